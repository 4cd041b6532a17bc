package kube

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/loomxr/loom/pkg/stack"
	"github.com/loomxr/loom/pkg/stack/stacktest"
)

var (
	gvrEnv = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v1beta1", Resource: "environmentconfigs"}
	gvrCM  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// envConfig is an EnvironmentConfig whose data holds every kind of JSON
// value, escapes and text beyond ASCII.
func envConfig(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.crossplane.io/v1beta1",
		"kind":       "EnvironmentConfig",
		"metadata":   map[string]any{"name": name, "labels": map[string]any{"team": "a"}},
		"data": map[string]any{
			"int": int64(7), "big": int64(9007199254740993), "float": 2.5, "yes": true, "none": nil,
			"text":   "tab\there \"quoted\" \\ é 😀 <&>",
			"list":   []any{"a", int64(1), map[string]any{"k": "v"}},
			"nested": map[string]any{"deeper": map[string]any{"n": int64(-3)}},
		},
	}}
}

// TestNewDynamicOnAPIServer runs the dynamic client of NewDynamic against a
// real API server, beside one of client-go's own: every answer, the objects
// of watch events and errors must be what client-go's client makes of them.
func TestNewDynamicOnAPIServer(t *testing.T) {
	rc := stacktest.ControlPlane(t, stack.Options{}).RESTConfig()
	ours, err := NewDynamic(rc)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	w, err := ours.Resource(gvrEnv).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("Watch(): %v", err)
	}
	defer w.Stop()

	// Create, get, update, merge patch, apply: each answer equals what
	// client-go's client reads back.
	same := func(op string, got *unstructured.Unstructured, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		want, err := theirs.Resource(gvrEnv).Get(ctx, got.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("client-go's Get after %s: %v", op, err)
		}
		if want.GetResourceVersion() != got.GetResourceVersion() {
			return // Changed since; compared by the next step.
		}
		if diff := cmp.Diff(want.Object, got.Object); diff != "" {
			t.Errorf("%s: -client-go's, +ours:\n%s", op, diff)
		}
	}
	created, err := ours.Resource(gvrEnv).Create(ctx, envConfig("one"), metav1.CreateOptions{})
	same("Create", created, err)
	if got, _, _ := unstructured.NestedString(created.Object, "data", "text"); got != "tab\there \"quoted\" \\ é 😀 <&>" {
		t.Errorf("Create(): data.text = %q", got)
	}
	if got, _, _ := unstructured.NestedInt64(created.Object, "data", "big"); got != 9007199254740993 {
		t.Errorf("Create(): data.big = %d, want 9007199254740993 (an int64 that a float64 cannot hold)", got)
	}
	got, err := ours.Resource(gvrEnv).Get(ctx, "one", metav1.GetOptions{})
	same("Get", got, err)
	_ = unstructured.SetNestedField(got.Object, "b", "metadata", "labels", "team")
	updated, err := ours.Resource(gvrEnv).Update(ctx, got, metav1.UpdateOptions{})
	same("Update", updated, err)
	patched, err := ours.Resource(gvrEnv).Patch(ctx, "one", types.MergePatchType, []byte(`{"data":{"int":8}}`), metav1.PatchOptions{})
	same("Patch", patched, err)
	intent := envConfig("one")
	_ = unstructured.SetNestedField(intent.Object, "applied", "data", "text")
	ri := ours.Resource(gvrEnv)
	applied, err := apply(ctx, ri, intent, metav1.ApplyOptions{FieldManager: "loom-test", Force: true})
	same("apply", applied, err)
	if !slices.ContainsFunc(applied.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == "loom-test" && e.Operation == metav1.ManagedFieldsOperationApply
	}) {
		t.Errorf("apply(): managed fields %v, want an Apply entry of loom-test", applied.GetManagedFields())
	}

	// The watch: one event per change, each object as a Get would read it.
	for i, want := range []watch.EventType{watch.Added, watch.Modified, watch.Modified, watch.Modified} {
		select {
		case ev := <-w.ResultChan():
			u, ok := ev.Object.(*unstructured.Unstructured)
			if ev.Type != want || !ok {
				t.Fatalf("watch event %d: %s %T, want %s of *unstructured.Unstructured", i, ev.Type, ev.Object, want)
			}
			if u.GetName() != "one" || u.GetKind() != "EnvironmentConfig" {
				t.Errorf("watch event %d: %s %s", i, u.GetKind(), u.GetName())
			}
		case <-ctx.Done():
			t.Fatalf("watch event %d: none", i)
		}
	}

	// Errors are Status answers: typed, as before.
	if _, err := ours.Resource(gvrEnv).Get(ctx, "absent", metav1.GetOptions{}); !kerrors.IsNotFound(err) {
		t.Errorf("Get() of an absent object: %v, want NotFound", err)
	}
	if _, err := ours.Resource(gvrEnv).Create(ctx, envConfig("one"), metav1.CreateOptions{}); !kerrors.IsAlreadyExists(err) {
		t.Errorf("Create() again: %v, want AlreadyExists", err)
	}
	stale := updated.DeepCopy()
	if _, err := ours.Resource(gvrEnv).Update(ctx, stale, metav1.UpdateOptions{}); !kerrors.IsConflict(err) {
		t.Errorf("Update() of a stale object: %v, want Conflict", err)
	}

	// Lists and core kinds.
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "one", "namespace": "default"},
		"data":     map[string]any{"k": "v"},
	}}
	if _, err := ours.Resource(gvrCM).Namespace("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create(ConfigMap): %v", err)
	}
	l, err := ours.Resource(gvrEnv).List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || l.Items[0].GetName() != "one" {
		t.Errorf("List(): %v, %v", l, err)
	}
}
