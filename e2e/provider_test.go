//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loomxr/loom/pkg/stack"

	"github.com/loomxr/loom/e2e/framework"
)

// The test provider (bin/provider-nop) runs in every stack; these tests use
// its NopResource as Crossplane's own tests write it.

// namespace is a Namespace manifest. Each test uses its own: ApplyYAML
// deletes what it applied when the test ends, and a terminating namespace
// refuses new Secrets.
func namespace(name string) string {
	return "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + name + "\n"
}

// nopResource is a NopResource that turns Ready 1s after creation and
// publishes one connection detail.
const nopResource = `apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  name: provider-e2e-ready
spec:
  forProvider:
    conditionAfter:
    - time: 1s
      conditionType: Ready
      conditionStatus: "True"
    connectionDetails:
    - name: password
      value: s3cr3t
    fields:
      tier: small
      replicas: 3
  writeConnectionSecretToRef:
    name: provider-e2e-ready
    namespace: provider-e2e-ready
`

func TestProviderNopResource(t *testing.T) {
	env := framework.StartStack(t)
	framework.ApplyYAML(t, namespace("provider-e2e-ready"))
	nr := framework.ApplyYAML(t, nopResource)[0]
	ri, err := env.Resource(nr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	var got *unstructured.Unstructured
	framework.Eventually(t, 30*time.Second, func() error {
		got, err = ri.Get(ctx, nr.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		return errors.Join(
			hasCondition(got, "Synced", "True", "ReconcileSuccess"),
			hasCondition(got, "Ready", "True", "Available"),
			mirrorsFields(got),
		)
	})

	// Ready when due, not before 1s (condition times have second
	// precision, like creationTimestamp). How soon after is the machine's
	// load as much as the provider's: a wall-clock upper bound here failed
	// on a busy machine, so it is left to the Eventually above.
	created := got.GetCreationTimestamp().Time
	readyAt := conditionTime(t, got, "Ready")
	if d := readyAt.Sub(created); d < time.Second {
		t.Errorf("Ready at %s after creation, want not before 1s", d)
	}

	secrets := env.Kube.CoreV1().Secrets("provider-e2e-ready")
	framework.Eventually(t, 30*time.Second, func() error {
		s, err := secrets.Get(ctx, "provider-e2e-ready", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return isConnectionSecret(s, got, map[string]string{"password": "s3cr3t"})
	})

	// The Secret and the status follow spec changes: a rotated value, a new
	// key, a field gone.
	changed, err := stack.DecodeManifests([]byte(strings.NewReplacer(
		"value: s3cr3t", "value: rotated\n    - name: user\n      value: admin",
		"      replicas: 3\n", "",
	).Replace(nopResource)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Stack.ApplyObjects(ctx, changed...); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, func() error {
		s, err := secrets.Get(ctx, "provider-e2e-ready", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return isConnectionSecret(s, got, map[string]string{"password": "rotated", "user": "admin"})
	})
	framework.Eventually(t, 30*time.Second, func() error {
		o, err := ri.Get(ctx, nr.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		f, _, _ := unstructured.NestedMap(o.Object, "status", "atProvider", "fields")
		if diff := cmp.Diff(map[string]any{"tier": "small"}, f); diff != "" {
			return fmt.Errorf("status.atProvider.fields: -want, +got:\n%s", diff)
		}
		return hasCondition(o, "Ready", "True", "Available")
	})

	// No finalizer holds the NopResource, and the garbage collector
	// deletes its Secret.
	if err := ri.Delete(ctx, nr.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	// The garbage collector learns of new kinds by rediscovery every 30s, so
	// a Secret owned by a kind installed just before may take that long.
	framework.Eventually(t, time.Minute, func() error {
		_, err := ri.Get(ctx, nr.GetName(), metav1.GetOptions{})
		if !kerrors.IsNotFound(err) {
			return fmt.Errorf("NopResource still there (finalizers?): %v", err)
		}
		_, err = secrets.Get(ctx, "provider-e2e-ready", metav1.GetOptions{})
		if !kerrors.IsNotFound(err) {
			return fmt.Errorf("connection Secret still there: %v", err)
		}
		return nil
	})
	t.Logf("connection Secret garbage-collected %s after the NopResource's deletion", time.Since(deleted).Round(time.Millisecond))
}

// TestProviderWritesOnlyOnChange counts the provider's API writes through
// the API server's own request metrics. Its NopResource is Ready at once,
// Ready again (no change) at 2s and Probe at 3s: that is two status writes
// and one Secret create, with the 2s wake-up writing nothing. It assumes no
// other NopResource changes status meanwhile, which holds because it does
// not run in parallel with other tests.
func TestProviderWritesOnlyOnChange(t *testing.T) {
	env := framework.StartStack(t)
	framework.ApplyYAML(t, namespace("provider-e2e-writes"))
	ctx := t.Context()

	count := func() map[string]float64 {
		t.Helper()
		c := map[string]float64{}
		for name, labels := range map[string]map[string]string{
			"status patches": {"resource": "nopresources", "subresource": "status", "verb": "PATCH"},
			"status updates": {"resource": "nopresources", "subresource": "status", "verb": "PUT"},
			"secret creates": {"resource": "secrets", "verb": "POST"},
			"secret updates": {"resource": "secrets", "verb": "PUT"},
		} {
			n, err := env.APIRequests(ctx, labels)
			if err != nil {
				t.Fatal(err)
			}
			c[name] = n
		}
		return c
	}
	before := count()

	nr := framework.ApplyYAML(t, `apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  name: provider-e2e-writes
spec:
  forProvider:
    conditionAfter:
    - {time: 0s, conditionType: Ready, conditionStatus: "True"}
    - {time: 2s, conditionType: Ready, conditionStatus: "True"}
    - {time: 3s, conditionType: Probe, conditionStatus: "True", conditionReason: Probed}
    connectionDetails:
    - {name: endpoint, value: nop.example}
    fields: {a: 1}
  writeConnectionSecretToRef:
    name: provider-e2e-writes
    namespace: provider-e2e-writes
`)[0]
	ri, err := env.Resource(nr)
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, func() error {
		o, err := ri.Get(ctx, nr.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		return hasCondition(o, "Probe", "True", "Probed")
	})

	want := map[string]float64{"status patches": 2, "status updates": 0, "secret creates": 1, "secret updates": 0}
	var diff string
	// A request is counted as it completes, which may trail its response.
	framework.Eventually(t, 5*time.Second, func() error {
		after := count()
		got := map[string]float64{}
		for k := range after {
			got[k] = after[k] - before[k]
		}
		diff = cmp.Diff(want, got)
		if got["status patches"] < want["status patches"] || got["secret creates"] < want["secret creates"] {
			return fmt.Errorf("writes not all counted yet: -want, +got:\n%s", diff)
		}
		return nil
	})
	if diff != "" {
		t.Errorf("API writes of the provider for one NopResource: -want, +got:\n%s", diff)
	}
}

func TestProviderReportsBadSchedule(t *testing.T) {
	env := framework.StartStack(t)
	nr := framework.ApplyYAML(t, `apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata:
  name: provider-e2e-bad-schedule
spec:
  forProvider:
    conditionAfter:
    - {time: soon, conditionType: Ready, conditionStatus: "True"}
`)[0]
	ri, err := env.Resource(nr)
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, func() error {
		o, err := ri.Get(t.Context(), nr.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := hasCondition(o, "Synced", "False", "ReconcileError"); err != nil {
			return err
		}
		if msg := conditionField(o, "Synced", "message"); !strings.Contains(msg, "spec.forProvider.conditionAfter[0].time") {
			return fmt.Errorf("Synced message %q does not name the bad field", msg)
		}
		return nil
	})
}

// hasCondition fails unless o has a condition of type typ with that status
// and reason, in the shape Crossplane v1.20 gives it: the test provider's
// managed resources record the generation they observed; claims and XRs
// carry no observedGeneration (Crossplane v1.20 never sets it on them).
func hasCondition(o *unstructured.Unstructured, typ, status, reason string) error {
	got := fmt.Sprintf("%s/%s/%s", conditionField(o, typ, "status"), conditionField(o, typ, "reason"), conditionField(o, typ, "observedGeneration"))
	want := fmt.Sprintf("%s/%s/", status, reason)
	if o.GroupVersionKind().Group == "nop.crossplane.io" {
		want = fmt.Sprintf("%s/%s/%d", status, reason, o.GetGeneration())
	}
	if got != want {
		return fmt.Errorf("%s condition (status/reason/observedGeneration) is %q, want %q", typ, got, want)
	}
	return nil
}

// conditionField returns a field of o's condition of type typ, formatted, or
// "" if there is none.
func conditionField(o *unstructured.Unstructured, typ, field string) string {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ && m[field] != nil {
			return fmt.Sprint(m[field])
		}
	}
	return ""
}

func conditionTime(t *testing.T, o *unstructured.Unstructured, typ string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, conditionField(o, typ, "lastTransitionTime"))
	if err != nil {
		t.Fatalf("cannot parse lastTransitionTime of %s: %v", typ, err)
	}
	return at
}

// mirrorsFields fails unless status.atProvider.fields equals
// spec.forProvider.fields.
func mirrorsFields(o *unstructured.Unstructured) error {
	spec, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "forProvider", "fields")
	status, _, _ := unstructured.NestedFieldNoCopy(o.Object, "status", "atProvider", "fields")
	if diff := cmp.Diff(spec, status); diff != "" {
		return fmt.Errorf("status.atProvider.fields does not mirror spec.forProvider.fields: -spec, +status:\n%s", diff)
	}
	return nil
}

// isConnectionSecret fails unless s is a Crossplane connection Secret
// controlled by owner and holding exactly data.
func isConnectionSecret(s *corev1.Secret, owner *unstructured.Unstructured, data map[string]string) error {
	got := map[string]string{}
	for k, v := range s.Data {
		got[k] = string(v)
	}
	var errs []error
	if diff := cmp.Diff(data, got); diff != "" {
		errs = append(errs, fmt.Errorf("connection Secret data: -want, +got:\n%s", diff))
	}
	if s.Type != "connection.crossplane.io/v1alpha1" {
		errs = append(errs, fmt.Errorf("connection Secret type is %q", s.Type))
	}
	// The garbage collector needs the owner's apiVersion and kind, not
	// only its UID.
	if c := metav1.GetControllerOf(s); c == nil || c.UID != owner.GetUID() || c.APIVersion != owner.GetAPIVersion() || c.Kind != owner.GetKind() {
		errs = append(errs, fmt.Errorf("connection Secret controller is %+v, want %s %s", c, owner.GetKind(), owner.GetUID()))
	}
	return errors.Join(errs...)
}
