package usage

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/loomxr/loom/pkg/apis/apiextensions/v1beta1"
	"github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/pkg/stack"
	"github.com/loomxr/loom/pkg/stack/stacktest"
	"github.com/loomxr/loom/pkg/testing/poll"
)

// These tests run the webhook's decision and the controller's reconcile
// against a real kube-apiserver (the local control plane without Loom's
// services), with the Index reading Usages through its informer.

type env struct {
	objects *kube.Resources
	index   *Index
}

func startEnv(t *testing.T) *env {
	t.Helper()
	s := stacktest.ControlPlane(t, stack.Options{})
	kc, err := kube.NewClients(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	idx, err := NewIndex(kc.Dynamic)
	if err != nil {
		t.Fatal(err)
	}
	go idx.Run(t.Context())
	return &env{objects: kube.NewResources(kc.Dynamic, kc.Mapper), index: idx}
}

func nop(name string, labels map[string]string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "spec": map[string]any{"forProvider": map[string]any{}}}}
	o.SetName(name)
	o.SetLabels(labels)
	return o
}

func (e *env) create(t *testing.T, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	ri, err := e.objects.Resource(o.GroupVersionKind(), "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ri.Create(t.Context(), o, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("cannot create %s %q: %v", o.GetKind(), o.GetName(), err)
	}
	return got
}

func (e *env) get(t *testing.T, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	t.Helper()
	ri, err := e.objects.Resource(o.GroupVersionKind(), "")
	if err != nil {
		t.Fatal(err)
	}
	return ri.Get(t.Context(), o.GetName(), metav1.GetOptions{})
}

func usageObject(t *testing.T, u *v1beta1.Usage) *unstructured.Unstructured {
	t.Helper()
	u.SetGroupVersionKind(usageGVK)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// waitIndexed waits until the Index has n Usages of the object.
func (e *env) waitIndexed(t *testing.T, name string, n int) {
	t.Helper()
	poll.Until(t, 10*time.Second, func() error {
		us, err := e.index.Of("nop.crossplane.io/v1alpha1", "NopResource", name)
		if err == nil && len(us) != n {
			err = fmt.Errorf("the Index has %d Usages of %q, want %d", len(us), name, n)
		}
		return err
	})
}

func TestUsage(t *testing.T) {
	e := startEnv(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Run("Validate", func(t *testing.T) { testValidate(t, e, log) })
	t.Run("Reconcile", func(t *testing.T) { testReconcile(t, e, log) })
}

func testValidate(t *testing.T, e *env, log *slog.Logger) {
	e.create(t, nop("protected", map[string]string{LabelInUse: "true"}))
	e.create(t, nop("free", nil))
	reason := "critical"
	e.create(t, usageObject(t, &v1beta1.Usage{ObjectMeta: metav1.ObjectMeta{Name: "b-protect"}, Spec: v1beta1.UsageSpec{
		Of: v1beta1.Resource{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource", ResourceRef: &v1beta1.ResourceRef{Name: "protected"}}, Reason: &reason}}))
	e.create(t, usageObject(t, &v1beta1.Usage{ObjectMeta: metav1.ObjectMeta{Name: "a-user"}, Spec: v1beta1.UsageSpec{
		Of: v1beta1.Resource{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource", ResourceRef: &v1beta1.ResourceRef{Name: "protected"}},
		By: &v1beta1.Resource{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource", ResourceRef: &v1beta1.ResourceRef{Name: "user"}}}}))
	e.waitIndexed(t, "protected", 2)

	raw := func(o *unstructured.Unstructured) runtime.RawExtension {
		b, _ := o.MarshalJSON()
		return runtime.RawExtension{Raw: b}
	}
	orphan := metav1.DeletePropagationOrphan
	opts, _ := json.Marshal(metav1.DeleteOptions{PropagationPolicy: &orphan})
	dry := true
	type want struct {
		code       int32 // 0: admitted
		message    string
		annotation string // on the object afterwards
	}
	cases := map[string]struct {
		reason string
		req    *admissionv1.AdmissionRequest
		obj    *unstructured.Unstructured
		want   want
	}{
		"InUse": {
			reason: "Deleting an object Usages name is refused with the first Usage by name and its user, and the attempt is recorded with the default policy.",
			req:    &admissionv1.AdmissionRequest{Operation: admissionv1.Delete, OldObject: raw(nop("protected", nil))},
			obj:    nop("protected", nil),
			want: want{code: http.StatusConflict, annotation: "Background",
				message: `This resource is in-use by 2 Usage(s), including the Usage "a-user" by resource NopResource/user.`},
		},
		"InUseDryRun": {
			reason: "A dry run is refused too, and records nothing (sideEffects NoneOnDryRun).",
			req:    &admissionv1.AdmissionRequest{Operation: admissionv1.Delete, OldObject: raw(nop("protected", nil)), Options: runtime.RawExtension{Raw: opts}, DryRun: &dry},
			obj:    nop("protected", nil),
			want: want{code: http.StatusConflict, annotation: "Background",
				message: `This resource is in-use by 2 Usage(s), including the Usage "a-user" by resource NopResource/user.`},
		},
		"InUseOrphan": {
			reason: "The attempt is recorded with the policy asked for.",
			req:    &admissionv1.AdmissionRequest{Operation: admissionv1.Delete, OldObject: raw(nop("protected", nil)), Options: runtime.RawExtension{Raw: opts}},
			obj:    nop("protected", nil),
			want: want{code: http.StatusConflict, annotation: "Orphan",
				message: `This resource is in-use by 2 Usage(s), including the Usage "a-user" by resource NopResource/user.`},
		},
		"Free": {
			reason: "An object no Usage names may be deleted.",
			req:    &admissionv1.AdmissionRequest{Operation: admissionv1.Delete, OldObject: raw(nop("free", nil))},
			obj:    nop("free", nil),
		},
		"NotDelete": {
			reason: "The webhook only answers deletions.",
			req:    &admissionv1.AdmissionRequest{Operation: admissionv1.Update, OldObject: raw(nop("protected", nil))},
			want:   want{code: http.StatusBadRequest, message: `unexpected operation "UPDATE", expected "DELETE"`},
		},
	}
	v := NewValidator(e.index, e.objects, log)
	// In order: the annotation cases build on each other.
	for _, name := range []string{"InUse", "InUseDryRun", "InUseOrphan", "Free", "NotDelete"} {
		tc := cases[name]
		t.Run(name, func(t *testing.T) {
			_, err := v.Validate(t.Context(), tc.req)
			got := want{}
			if err != nil {
				var se kerrors.APIStatus
				if !asStatus(err, &se) {
					t.Fatalf("%s\nnot a status error: %v", tc.reason, err)
				}
				got.code, got.message = se.Status().Code, se.Status().Message
			}
			if tc.obj != nil {
				live, err := e.get(t, tc.obj)
				if err != nil {
					t.Fatal(err)
				}
				got.annotation = live.GetAnnotations()[AnnotationDeletionAttempt]
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func asStatus(err error, se *kerrors.APIStatus) bool {
	s, ok := err.(kerrors.APIStatus) //nolint:errorlint // Validate returns status errors unwrapped.
	*se = s
	return ok
}

func testReconcile(t *testing.T, e *env, log *slog.Logger) {
	used := e.create(t, nop("db", map[string]string{"tier": "data"}))
	user := e.create(t, nop("app", nil))
	replay, reason := true, "kept"
	e.create(t, usageObject(t, &v1beta1.Usage{ObjectMeta: metav1.ObjectMeta{Name: "app-uses-db"}, Spec: v1beta1.UsageSpec{
		ReplayDeletion: &replay,
		Of: v1beta1.Resource{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource",
			ResourceSelector: &v1beta1.ResourceSelector{MatchLabels: map[string]string{"tier": "data"}}},
		By: &v1beta1.Resource{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource", ResourceRef: &v1beta1.ResourceRef{Name: "app"}}}}))
	e.create(t, usageObject(t, &v1beta1.Usage{ObjectMeta: metav1.ObjectMeta{Name: "nothing-matches"}, Spec: v1beta1.UsageSpec{
		Of: v1beta1.Resource{APIVersion: "nop.crossplane.io/v1alpha1", Kind: "NopResource",
			ResourceSelector: &v1beta1.ResourceSelector{MatchLabels: map[string]string{"tier": "none"}}}, Reason: &reason}}))

	ran := make(chan struct{}, 1)
	r := NewReconciler(e.objects, e.index, log, WithReplay(func(f func()) { f(); ran <- struct{}{} }))
	usageRef := usageObject(t, &v1beta1.Usage{ObjectMeta: metav1.ObjectMeta{Name: "app-uses-db"}})

	type want struct {
		err        string
		result     Result
		ref        string // spec.of.resourceRef.name
		finalizers []string
		owners     []string // UIDs
		ready      string
		inUse      string // label of the used object
	}
	cases := map[string]struct {
		reason string
		name   string
		want   want
	}{
		"InPlace": {
			reason: "The selector resolves, the Usage gets its finalizer and an owner reference to its user, the used object the in-use label, and the Usage is Available.",
			name:   "app-uses-db",
			want: want{result: Result{RequeueAfter: time.Minute}, ref: "db", finalizers: []string{Finalizer},
				owners: []string{string(user.GetUID())}, ready: "Available", inUse: "true"},
		},
		"NoMatch": {
			reason: "A selector nothing matches is an error that names the Usage, the field and the labels.",
			name:   "nothing-matches",
			want:   want{err: `usage "nothing-matches": spec.of.resourceSelector: no NopResource matches labels "tier=none"`},
		},
		"Gone": {
			reason: "A Usage that is gone is nothing to do.",
			name:   "no-such-usage",
		},
	}
	for _, name := range []string{"InPlace", "NoMatch", "Gone"} {
		tc := cases[name]
		t.Run(name, func(t *testing.T) {
			res, err := r.Reconcile(t.Context(), tc.name)
			got := want{result: res}
			if err != nil {
				got.err = err.Error()
			}
			if tc.want.ref != "" {
				u, err := e.get(t, usageRef)
				if err != nil {
					t.Fatal(err)
				}
				got.ref, _, _ = unstructured.NestedString(u.Object, "spec", "of", "resourceRef", "name")
				got.finalizers = u.GetFinalizers()
				for _, o := range u.GetOwnerReferences() {
					got.owners = append(got.owners, string(o.UID))
				}
				typed, err := FromUnstructured(u)
				if err != nil {
					t.Fatal(err)
				}
				got.ready = string(typed.Status.GetCondition("Ready").Reason)
				live, err := e.get(t, used)
				if err != nil {
					t.Fatal(err)
				}
				got.inUse = live.GetLabels()[LabelInUse]
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}

	t.Run("Release", func(t *testing.T) {
		// The webhook refused a deletion; then the Usage is deleted.
		e.waitIndexed(t, "db", 1)
		ri, err := e.objects.Resource(used.GroupVersionKind(), "")
		if err != nil {
			t.Fatal(err)
		}
		patch := []byte(`{"metadata":{"annotations":{"` + AnnotationDeletionAttempt + `":"Background"}}}`)
		if _, err := ri.Patch(t.Context(), "db", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		us, err := e.objects.Resource(usageGVK, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := us.Delete(t.Context(), "app-uses-db", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		res, err := r.Reconcile(t.Context(), "app-uses-db")
		if err != nil || res != (Result{}) {
			t.Fatalf("Reconcile: want no error and no requeue, got %+v, %v", res, err)
		}
		<-ran
		if _, err := e.get(t, usageRef); !kerrors.IsNotFound(err) {
			t.Errorf("the Usage is still there after its finalizer was removed: %v", err)
		}
		if _, err := e.get(t, used); !kerrors.IsNotFound(err) {
			t.Errorf("the used object's deletion was not replayed: %v", err)
		}
	})
}
