//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loomxr/loom/e2e/framework"
)

// TestSecretsReplicas runs three replicas of the secrets service: each XR
// is handled by the replica that owns its partition, claims (other
// partitions) requeue their XRs there, and a rotated Secret, which every
// replica's watch sees, reaches each claim's Secret.
func TestSecretsReplicas(t *testing.T) {
	env := startSecretsStack(t, map[string]int{"secrets": 3})
	ctx := t.Context()
	const claims = 6
	want := map[string]map[string]string{}
	xrs := map[string]*unstructured.Unstructured{}
	for i := range claims {
		name := fmt.Sprintf("replica-db-%d", i)
		secretsClaim(t, env, name, "")
	}
	for i := range claims {
		name := fmt.Sprintf("replica-db-%d", i)
		xrs[name] = secretsBoundXR(t, env, name)
		want[name] = map[string]string{
			"username": "myadmin",
			"password": "nop-s3cr3t-password",
			"endpoint": xrs[name].GetName() + ".mysql.database.azure.com:3306",
		}
	}
	for name, w := range want {
		secretsWaitData(t, env, 3*time.Minute, secretsNamespace, name+"-conn", w)
	}

	start := time.Now()
	for name, xr := range xrs {
		server, err := secretsComposed(ctx, env, xr, "server")
		if err != nil {
			t.Fatal(err)
		}
		ref, _, _ := unstructured.NestedStringMap(server.Object, "spec", "writeConnectionSecretToRef")
		v := fmt.Sprintf("rotated-%s-%d", name, time.Now().UnixNano())
		framework.Eventually(t, 30*time.Second, func() error {
			s, err := env.Kube.CoreV1().Secrets(ref["namespace"]).Get(ctx, ref["name"], metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Data["attribute.administrator_login_password"] = []byte(v)
			_, err = env.Kube.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
			return err
		})
		want[name]["password"] = v
	}
	for name, w := range want {
		secretsWaitData(t, env, 30*time.Second, secretsNamespace, name+"-conn", w)
	}
	t.Logf("%d rotations reached their claims' Secrets in %s", claims, time.Since(start).Round(time.Millisecond))
}
