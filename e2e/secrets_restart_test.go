//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loomxr/loom/e2e/framework"
	"github.com/loomxr/loom/pkg/testing/poll"
)

// TestSecretsRestart kills the secrets service and rotates a composed
// Secret once it is back. The restarted replica's index of which XR each
// Secret feeds is empty and nothing else changes (no watcher resync, no XR
// event), so the rotation can only reach the claim's Secret by tracing the
// unknown Secret through its controlling composed resource to the XR.
func TestSecretsRestart(t *testing.T) {
	env := secretsSetup(t)
	ctx := t.Context()
	secretsClaim(t, env, "restart-db", "")
	xr := secretsBoundXR(t, env, "restart-db")
	want := map[string]string{
		"username": "myadmin",
		"password": "nop-s3cr3t-password",
		"endpoint": xr.GetName() + ".mysql.database.azure.com:3306",
	}
	secretsWaitData(t, env, 3*time.Minute, secretsNamespace, "restart-db-conn", want)
	server, err := secretsComposed(ctx, env, xr, "server")
	if err != nil {
		t.Fatal(err)
	}
	ref, _, _ := unstructured.NestedStringMap(server.Object, "spec", "writeConnectionSecretToRef")

	pid := env.Stack.ServicePID("secrets", 0)
	if err := env.Stack.KillService("secrets", 0); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() error {
		if p := env.Stack.ServicePID("secrets", 0); p == 0 || p == pid {
			return fmt.Errorf("secrets-0 not restarted yet (pid %d, was %d)", p, pid)
		}
		return nil
	})

	// The replica takes a moment to list Secrets and to own its partitions:
	// rotate again until one rotation gets through.
	start := time.Now()
	attempt := 0
	framework.Eventually(t, 2*time.Minute, func() error {
		attempt++
		v := fmt.Sprintf("after-restart-%d-%d", attempt, time.Now().UnixNano())
		s, err := env.Kube.CoreV1().Secrets(ref["namespace"]).Get(ctx, ref["name"], metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Data["attribute.administrator_login_password"] = []byte(v)
		if _, err := env.Kube.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			if kerrors.IsConflict(err) {
				return err
			}
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if err := poll.Wait(rctx, func(ctx context.Context) error {
			_, got, err := secretsData(ctx, env, secretsNamespace, "restart-db-conn")
			if err == nil && got["password"] != v {
				err = errors.New("the claim's Secret holds another password")
			}
			return err
		}, poll.Every(framework.PollInterval)); err != nil {
			return fmt.Errorf("rotation %d did not reach the claim's Secret within 3s: %w", attempt, err)
		}
		return nil
	})
	t.Logf("a rotation reached the claim's Secret %s after the restart (attempt %d)", time.Since(start).Round(time.Millisecond), attempt)
}
