//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/loomxr/loom/pkg/stack"
)

// devLoomctl returns the path of the built loomctl.
func devLoomctl(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LOOM_BIN_DIR")
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		root, err := stack.FindRepoRoot(wd)
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "bin")
	}
	p := filepath.Join(dir, "loomctl")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("cannot find loomctl (run `make build`): %v", err)
	}
	return p
}

// devProcessesOf returns "pid name" of every live process whose command line
// mentions dir, except this test.
func devProcessesOf(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(dir)) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue // exited, waiting to be reaped
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		out = append(out, fmt.Sprintf("%d %s", pid, filepath.Base(args[0])))
	}
	return out
}

// devMissing returns the names no process in procs runs.
func devMissing(procs []string, names ...string) []string {
	var miss []string
	for _, n := range names {
		found := false
		for _, p := range procs {
			found = found || strings.HasSuffix(p, " "+n)
		}
		if !found {
			miss = append(miss, n)
		}
	}
	return miss
}

// devEveryProcess is what a stack with the default services runs.
var devEveryProcess = []string{"etcd", "kube-apiserver", "kube-controller-manager", "watcher", "renderer", "binder", "secrets", "rbac-manager", "provider-nop"}

// dev up --detach with the repository's examples: it returns only once every
// example claim is Ready, so this is what `make run` promises a newcomer.
func TestDevUpDetachDown(t *testing.T) {
	bin := devLoomctl(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := stack.FindRepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	state, examples := t.TempDir(), filepath.Join(root, "examples")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		// Whatever happened, leave nothing behind.
		_ = exec.Command(bin, "dev", "down", "--state-dir", state).Run()
	})

	up := exec.CommandContext(ctx, bin, "dev", "up", "--detach", "--examples", examples, "--state-dir", state, "--wait", "3m")
	out, err := up.CombinedOutput()
	if err != nil {
		t.Fatalf("loomctl dev up --detach: %v\n%s\nlog:\n%s", err, out, devReadFile(filepath.Join(state, "loomctl.log")))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	kubeconfig := lines[len(lines)-1]
	if want := filepath.Join(state, "kubeconfig"); kubeconfig != want {
		t.Fatalf("dev up --detach printed %q last, want the kubeconfig path %q; output:\n%s", kubeconfig, want, out)
	}

	// The stack is up: every process runs, and the admin kubeconfig sees
	// the services' identities.
	if miss := devMissing(devProcessesOf(state), devEveryProcess...); len(miss) > 0 {
		t.Fatalf("after dev up --detach, not running: %v (running: %v)", miss, devProcessesOf(state))
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range stack.DefaultServices {
		if _, err := cs.CoreV1().ServiceAccounts(stack.Namespace).Get(ctx, stack.ServiceAccountName(svc), metav1.GetOptions{}); err != nil {
			t.Errorf("ServiceAccount of %s: %v", svc, err)
		}
	}

	// A second stack may not take the same state folder.
	again, err := exec.CommandContext(ctx, bin, "dev", "up", "--detach", "--examples", examples, "--state-dir", state).CombinedOutput()
	if err == nil {
		t.Errorf("a second dev up --detach on a running state folder succeeded:\n%s", again)
	}

	down, err := exec.CommandContext(ctx, bin, "dev", "down", "--state-dir", state).CombinedOutput()
	if err != nil {
		t.Fatalf("loomctl dev down: %v\n%s", err, down)
	}
	// dev down returns once everything is gone: no grace here.
	if left := devProcessesOf(state); len(left) > 0 {
		t.Errorf("processes left after dev down returned: %v", left)
	}
}

func TestDevUpInterrupt(t *testing.T) {
	bin := devLoomctl(t)
	state, examples := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	var out bytes.Buffer
	up := exec.CommandContext(ctx, bin, "dev", "up", "--examples", examples, "--state-dir", state)
	up.Stdout, up.Stderr = &out, &out
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- up.Wait() }()
	t.Cleanup(func() { _ = up.Process.Kill() })

	// Up once the stack describes itself in its state folder.
	for {
		if _, err := stack.ReadInfo(state); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			t.Fatalf("dev up exited during start-up: %v\n%s", err, out.String())
		case <-ctx.Done():
			t.Fatalf("dev up did not come up: %v\n%s", ctx.Err(), out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if miss := devMissing(devProcessesOf(state), devEveryProcess...); len(miss) > 0 {
		t.Fatalf("after dev up, not running: %v", miss)
	}

	// Ctrl-C, as in a terminal running `make run`.
	if err := up.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("dev up after Ctrl-C: %v\n%s", err, out.String())
		}
	case <-ctx.Done():
		t.Fatalf("dev up did not stop after Ctrl-C\n%s", out.String())
	}
	if left := devProcessesOf(state); len(left) > 0 {
		t.Errorf("processes left after Ctrl-C: %v", left)
	}
}

func devReadFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func devRESTConfig(path string) (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", path)
}
