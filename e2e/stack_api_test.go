//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/loomxr/loom/pkg/stack"
	"github.com/loomxr/loom/pkg/testing/poll"
)

// TestStackFaults exercises the fault-injection API later tests build on:
// a killed service replica comes back, and the API server and NATS restart
// in place.
func TestStackFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	state := t.TempDir()
	s, err := stack.Start(ctx, stack.Options{
		StateDir: state,
		Services: []string{"watcher", "renderer"},
		Replicas: map[string]int{"renderer": 2},
		CRDDirs:  []string{}, // not what this test is about
		Log:      t.Output(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Error(err)
		}
		if left := devProcessesOf(state); len(left) > 0 {
			t.Errorf("processes left after Stop: %v", left)
		}
	})

	cs, err := kubernetes.NewForConfig(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	apiUp := func() error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, stack.Namespace, metav1.GetOptions{})
		return err
	}
	if err := apiUp(); err != nil {
		t.Fatalf("namespace %s: %v", stack.Namespace, err)
	}
	if _, err := os.Stat(s.ServiceKubeconfig("renderer")); err != nil {
		t.Errorf("renderer kubeconfig: %v", err)
	}

	t.Run("KillService", func(t *testing.T) {
		before := s.ServicePID("renderer", 1)
		if before == 0 {
			t.Fatal("renderer-1 is not running")
		}
		if err := s.KillService("renderer", 1); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 30*time.Second, func() error {
			if pid := s.ServicePID("renderer", 1); pid == 0 || pid == before {
				return fmt.Errorf("pid %d (was %d)", pid, before)
			}
			return nil
		})
		if err := s.KillService("renderer", 2); err == nil {
			t.Error("KillService of a replica that does not exist: want error, got nil")
		}
	})

	t.Run("RestartAPIServer", func(t *testing.T) {
		start := time.Now()
		if err := s.RestartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("RestartAPIServer took %s; kube-apiserver should stop gracefully within seconds", took)
		}
		poll.Until(t, 30*time.Second, apiUp)
		// The services' tokens stay valid: the signing key did not change.
		rc, err := devRESTConfig(s.ServiceKubeconfig("watcher"))
		if err != nil {
			t.Fatal(err)
		}
		wcs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wcs.Discovery().ServerVersion(); err != nil {
			t.Errorf("watcher's kubeconfig after the restart: %v", err)
		}
	})

	t.Run("RestartNATS", func(t *testing.T) {
		url := s.NATSURL()
		nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := nc.JetStream()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.AddStream(&nats.StreamConfig{Name: "FAULTS", Subjects: []string{"faults.>"}, Storage: nats.FileStorage}); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish("faults.one", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := s.RestartNATS(ctx); err != nil {
			t.Fatal(err)
		}
		if got := s.NATSURL(); got != url {
			t.Errorf("NATSURL after restart: got %s, want %s", got, url)
		}
		poll.Until(t, 30*time.Second, func() error {
			info, err := js.StreamInfo("FAULTS")
			if err != nil {
				return err
			}
			if info.State.Msgs != 1 {
				return fmt.Errorf("%d messages, want 1", info.State.Msgs)
			}
			return nil
		})
		// Services reconnect and report ready again.
		poll.Until(t, 30*time.Second, func() error {
			return devServicesReady(state)
		})
	})
}

// devServicesReady checks /readyz of every service replica, using the health
// addresses from the replicas' command lines.
func devServicesReady(state string) error {
	var addrs []string
	for _, p := range devProcessesOf(state) {
		pid := strings.Fields(p)[0]
		b, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if v, ok := strings.CutPrefix(a, "--health-addr="); ok {
				addrs = append(addrs, v)
			}
		}
	}
	if len(addrs) == 0 {
		return fmt.Errorf("no service replicas found")
	}
	for _, a := range addrs {
		resp, err := http.Get("http://" + a + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s/readyz: %s", a, resp.Status)
		}
	}
	return nil
}
