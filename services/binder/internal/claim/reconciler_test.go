package claim

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	xv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/condition"
	"github.com/loomxr/loom/pkg/event"
	"github.com/loomxr/loom/pkg/reconcile"
)

var (
	claimGVK = schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Database"}
	xrGVK    = schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "XDatabase"}
	xrGR     = schema.GroupResource{Group: "example.org", Resource: "xdatabases"}
	claimGR  = schema.GroupResource{Group: "example.org", Resource: "databases"}
)

// fakeClient is an in-memory Client at the reconciler's seam. It records
// every call as "verb kind name" and lets a case fail or intercept writes.
type fakeClient struct {
	objs  map[string]*unstructured.Unstructured
	calls []string
	// hook, if set, runs before each call; a non-nil error fails the call.
	hook func(f *fakeClient, verb string, obj *unstructured.Unstructured) error
}

func key(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

func newFake(objs ...*unstructured.Unstructured) *fakeClient {
	f := &fakeClient{objs: map[string]*unstructured.Unstructured{}}
	for _, o := range objs {
		f.put(o)
	}
	return f
}

func (f *fakeClient) put(o *unstructured.Unstructured) {
	f.objs[key(o.GetKind(), o.GetNamespace(), o.GetName())] = o.DeepCopy()
}

func (f *fakeClient) get(kind, namespace, name string) *unstructured.Unstructured {
	if o, ok := f.objs[key(kind, namespace, name)]; ok {
		return o.DeepCopy()
	}
	return nil
}

func (f *fakeClient) call(verb string, o *unstructured.Unstructured) error {
	f.calls = append(f.calls, verb+" "+o.GetKind()+" "+o.GetName())
	if f.hook != nil {
		return f.hook(f, verb, o)
	}
	return nil
}

func gr(kind string) schema.GroupResource {
	if kind == xrGVK.Kind {
		return xrGR
	}
	return claimGR
}

func stub(gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{}}
	o.SetGroupVersionKind(gvk)
	o.SetNamespace(namespace)
	o.SetName(name)
	return o
}

func (f *fakeClient) Get(_ context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	if err := f.call("get", stub(gvk, namespace, name)); err != nil {
		return nil, err
	}
	if o := f.get(gvk.Kind, namespace, name); o != nil {
		return o, nil
	}
	return nil, kerrors.NewNotFound(gr(gvk.Kind), name)
}

func (f *fakeClient) Create(_ context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if err := f.call("create", obj); err != nil {
		return nil, err
	}
	if f.get(obj.GetKind(), obj.GetNamespace(), obj.GetName()) != nil {
		return nil, kerrors.NewAlreadyExists(gr(obj.GetKind()), obj.GetName())
	}
	f.put(obj)
	return obj.DeepCopy(), nil
}

func (f *fakeClient) Update(_ context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if err := f.call("update", obj); err != nil {
		return nil, err
	}
	f.put(obj)
	return obj.DeepCopy(), nil
}

func (f *fakeClient) Apply(_ context.Context, intent *unstructured.Unstructured, _ bool) (*unstructured.Unstructured, error) {
	if err := f.call("apply", intent); err != nil {
		return nil, err
	}
	f.put(intent)
	return intent.DeepCopy(), nil
}

func (f *fakeClient) ApplyStatus(_ context.Context, intent *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if err := f.call("applyStatus", intent); err != nil {
		return nil, err
	}
	o := f.get(intent.GetKind(), intent.GetNamespace(), intent.GetName())
	if o == nil {
		return nil, kerrors.NewNotFound(gr(intent.GetKind()), intent.GetName())
	}
	o.Object["status"] = intent.Object["status"]
	f.put(o)
	return o, nil
}

func (f *fakeClient) MergePatch(_ context.Context, gvk schema.GroupVersionKind, namespace, name string, _ map[string]any) (*unstructured.Unstructured, error) {
	if err := f.call("mergePatch", stub(gvk, namespace, name)); err != nil {
		return nil, err
	}
	o := f.get(gvk.Kind, namespace, name)
	if o == nil {
		return nil, kerrors.NewNotFound(gr(gvk.Kind), name)
	}
	unstructured.RemoveNestedField(o.Object, "spec", "claimRef")
	f.put(o)
	return o, nil
}

func (f *fakeClient) JSONPatch(_ context.Context, gvk schema.GroupVersionKind, namespace, name string, _ []byte) (*unstructured.Unstructured, error) {
	if err := f.call("jsonPatch", stub(gvk, namespace, name)); err != nil {
		return nil, err
	}
	return f.get(gvk.Kind, namespace, name), nil
}

func (f *fakeClient) Delete(_ context.Context, gvk schema.GroupVersionKind, namespace, name string, _ types.UID, p *metav1.DeletionPropagation) error {
	verb := "delete"
	if p != nil {
		verb += "/" + string(*p)
	}
	if err := f.call(verb, stub(gvk, namespace, name)); err != nil {
		return err
	}
	o := f.get(gvk.Kind, namespace, name)
	if o != nil {
		now := metav1.Now()
		o.SetDeletionTimestamp(&now)
		f.put(o)
	}
	return nil
}

type defs struct {
	d *xv1.CompositeResourceDefinition
}

func (d defs) ForClaim(context.Context, schema.GroupKind) (*xv1.CompositeResourceDefinition, error) {
	return d.d, nil
}

// names returns the names in turn, then the last one forever.
func names(n ...string) NameGeneratorFn {
	i := 0
	return func(string) string {
		out := n[min(i, len(n)-1)]
		i++
		return out
	}
}

func testClaim(mod ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	cm := claimObj(map[string]any{"parameters": map[string]any{"size": "small"}}, map[string]any{"uid": "claim-uid", "resourceVersion": "1"})
	for _, fn := range mod {
		fn(cm)
	}
	return cm
}

func withRef(name string) func(*unstructured.Unstructured) {
	return func(cm *unstructured.Unstructured) {
		_ = unstructured.SetNestedMap(cm.Object, map[string]any{"apiVersion": "example.org/v1", "kind": "XDatabase", "name": name}, "spec", "resourceRef")
		cm.SetFinalizers([]string{Finalizer})
	}
}

func withSpec(field string, v any) func(*unstructured.Unstructured) {
	return func(cm *unstructured.Unstructured) { _ = unstructured.SetNestedField(cm.Object, v, "spec", field) }
}

func deleted(cm *unstructured.Unstructured) {
	now := metav1.Now()
	cm.SetDeletionTimestamp(&now)
}

// testXR is an XR bound to the claim namespace/name.
func testXR(name, namespace, claim string, mod ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	xr := u(map[string]any{
		"apiVersion": "example.org/v1", "kind": "XDatabase",
		"metadata": map[string]any{
			"name": name, "uid": "xr-uid", "resourceVersion": "7",
			"labels": map[string]any{LabelClaimName: claim, LabelClaimNamespace: namespace},
		},
		"spec": map[string]any{
			"parameters": map[string]any{"size": "small"},
			"claimRef":   map[string]any{"apiVersion": "example.org/v1", "kind": "Database", "namespace": namespace, "name": claim},
			// As the API server defaults it.
			"compositionUpdatePolicy": "Automatic",
		},
	})
	for _, fn := range mod {
		fn(xr)
	}
	return xr
}

func withStatus(xr *unstructured.Unstructured) {
	xr.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2026-01-01T00:00:00Z"}}}
}

func withNotReady(xr *unstructured.Unstructured) {
	xr.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "Creating", "lastTransitionTime": "2026-01-01T00:00:00Z"}}}
}

// readyAt makes the XR Ready since d after the tests' clock, time.Unix(0, 0).
func readyAt(d time.Duration) func(*unstructured.Unstructured) {
	return func(xr *unstructured.Unstructured) {
		xr.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Available",
			"lastTransitionTime": time.Unix(0, 0).Add(d).UTC().Format(time.RFC3339)}}}
	}
}

// createdAt sets the XR's creation time d after the tests' clock, time.Unix(0, 0).
func createdAt(d time.Duration) func(*unstructured.Unstructured) {
	return func(xr *unstructured.Unstructured) { xr.SetCreationTimestamp(metav1.NewTime(time.Unix(0, 0).Add(d))) }
}

func conflict(kind, name string) error {
	return kerrors.NewConflict(gr(kind), name, errors.New("the object has been modified"))
}

// failOn fails the n-th (1-based, 0 for every) call of verb on kind with err.
func failOn(verb, kind string, n int, err error) func(*fakeClient, string, *unstructured.Unstructured) error {
	seen := 0
	return func(_ *fakeClient, v string, o *unstructured.Unstructured) error {
		if v != verb || o.GetKind() != kind {
			return nil
		}
		seen++
		if n == 0 || seen == n {
			return err
		}
		return nil
	}
}

func TestReconcile(t *testing.T) {
	type want struct {
		result reconcile.Result
		err    bool
		calls  []string
		events []string
		// synced is the reason of the claim's Synced condition afterwards,
		// "" if it has none.
		synced string
		// xrs are the XRs' claims afterwards: XR name to claim namespace/name.
		xrs map[string]string
	}
	cases := map[string]struct {
		reason string
		objs   []*unstructured.Unstructured
		names  NameGeneratorFn
		d      *xv1.CompositeResourceDefinition
		hook   func(*fakeClient, string, *unstructured.Unstructured) error
		opts   []Option
		// superseded: a newer event for the claim came while it runs.
		superseded bool
		want       want
	}{
		"BindsNewClaim": {
			reason: "A new claim gets a generated name, recorded on the claim first, then an XR created with that name (a plain create).",
			objs:   []*unstructured.Unstructured{testClaim()},
			names:  names("db-bbbbb"),
			want: want{
				calls:  []string{"get Database db", "update Database db", "create XDatabase db-bbbbb"},
				xrs:    map[string]string{"db-bbbbb": "team-a/db"},
				events: nil,
			},
		},
		"ResourceRefConflictLoop": {
			reason: "A conflict on the resourceRef update re-reads the claim and carries on with the winner's name, creating no XR of its own.",
			objs:   []*unstructured.Unstructured{testClaim()},
			names:  names("db-bbbbb"),
			hook: func(f *fakeClient, verb string, o *unstructured.Unstructured) error {
				if verb == "update" && o.GetKind() == "Database" && ResourceRef(o).Name == "db-bbbbb" {
					// Another binder recorded its name first.
					f.put(testClaim(withRef("db-ccccc")))
					return conflict("Database", "db")
				}
				return nil
			},
			want: want{
				calls: []string{"get Database db", "update Database db", "get Database db", "get XDatabase db-ccccc", "create XDatabase db-ccccc"},
				xrs:   map[string]string{"db-ccccc": "team-a/db"},
			},
		},
		"ResourceRefConflictsExhausted": {
			reason: "A claim that keeps changing under the resourceRef update fails after a bounded number of attempts: Synced False, a warning, and an error so that the bus retries with backoff.",
			objs:   []*unstructured.Unstructured{testClaim()},
			names:  names("db-bbbbb"),
			hook:   failOn("update", "Database", 0, conflict("Database", "db")),
			want: want{
				err: true,
				calls: []string{
					"get Database db",
					"update Database db", "get Database db",
					"update Database db", "get Database db",
					"update Database db", "get Database db",
					"update Database db", "get Database db",
					"update Database db", "get Database db",
					"applyStatus Database db",
				},
				events: []string{"Warning BindCompositeResource cannot record a composite resource name in the claim's spec.resourceRef: the claim kept changing (5 conflicts)"},
				synced: "ReconcileError",
			},
		},
		"GeneratedNameTaken": {
			reason: "A generated name is not checked before it is recorded (that would cost a read per claim); when an XR of another claim holds it, the create's AlreadyExists makes the claim pick a new name (resourceVersion precondition) and requeue; the XR holding the name is untouched.",
			objs:   []*unstructured.Unstructured{testClaim(), testXR("db-bbbbb", "team-b", "db")},
			names:  names("db-bbbbb", "db-ccccc"),
			want: want{
				result: reconcile.Result{Requeue: true},
				calls:  []string{"get Database db", "update Database db", "create XDatabase db-bbbbb", "get XDatabase db-bbbbb", "update Database db"},
				xrs:    map[string]string{"db-bbbbb": "team-b/db"},
			},
		},
		"RefuseStaticBoundElsewhere": {
			reason: "A claim whose resourceRef a user set to an XR bound to another claim is refused: Synced False and a warning, but no error, because only a change of the claim can fix it.",
			objs:   []*unstructured.Unstructured{testClaim(withRef("shared")), testXR("shared", "team-b", "other")},
			want: want{
				calls:  []string{"get Database db", "get XDatabase shared", "applyStatus Database db"},
				events: []string{`Warning BindCompositeResource refusing to bind to composite resource "shared": bound to claim "team-b/other"`},
				synced: "ReconcileError",
				xrs:    map[string]string{"shared": "team-b/other"},
			},
		},
		"FailOnCreateError": {
			reason: "An API error creating the XR fails the claim (Synced False, a warning) and returns the error for a retry.",
			objs:   []*unstructured.Unstructured{testClaim(withRef("db-bbbbb"))},
			hook:   failOn("create", "XDatabase", 0, kerrors.NewServiceUnavailable("etcd is sad")),
			want: want{
				err:    true,
				calls:  []string{"get Database db", "get XDatabase db-bbbbb", "create XDatabase db-bbbbb", "applyStatus Database db"},
				events: []string{`Warning BindCompositeResource cannot create composite resource "db-bbbbb": etcd is sad`},
				synced: "ReconcileError",
			},
		},
		"CreateRaceLost": {
			reason: "Two claims generated the same name and the other created its XR first: this claim picks a new name (resourceVersion precondition) and requeues; the XR stays with the other claim.",
			objs:   []*unstructured.Unstructured{testClaim(withRef("db-bbbbb"))},
			names:  names("db-ccccc"),
			hook: func(f *fakeClient, verb string, o *unstructured.Unstructured) error {
				if verb == "create" && o.GetName() == "db-bbbbb" {
					f.put(testXR("db-bbbbb", "team-b", "db"))
				}
				return nil
			},
			want: want{
				result: reconcile.Result{Requeue: true},
				calls:  []string{"get Database db", "get XDatabase db-bbbbb", "create XDatabase db-bbbbb", "get XDatabase db-bbbbb", "update Database db"},
				xrs:    map[string]string{"db-bbbbb": "team-b/db"},
			},
		},
		"CreateRaceLostFoundOnRead": {
			reason: "A claim that finds its generated name already bound to another claim (the other won before this claim's first read) picks a new name too.",
			objs:   []*unstructured.Unstructured{testClaim(withRef("db-bbbbb")), testXR("db-bbbbb", "team-b", "db")},
			names:  names("db-ccccc"),
			want: want{
				result: reconcile.Result{Requeue: true},
				calls:  []string{"get Database db", "get XDatabase db-bbbbb", "update Database db"},
				xrs:    map[string]string{"db-bbbbb": "team-b/db"},
			},
		},
		"CreateRaceWonByPeer": {
			reason: "AlreadyExists is fine when the XR is this claim's (another binder replica created it).",
			objs:   []*unstructured.Unstructured{testClaim(withRef("db-bbbbb"))},
			hook: func(f *fakeClient, verb string, o *unstructured.Unstructured) error {
				if verb == "create" {
					f.put(testXR("db-bbbbb", "team-a", "db"))
				}
				return nil
			},
			want: want{
				calls: []string{"get Database db", "get XDatabase db-bbbbb", "create XDatabase db-bbbbb", "get XDatabase db-bbbbb"},
				xrs:   map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"AdoptsCreatedFields": {
			reason: "The first apply to an XR the binder created takes over, once, the fields its create set, so that a field the claim drops is removed from the XR.",
			objs: []*unstructured.Unstructured{testClaim(withRef("db-bbbbb"), withSpec("parameters", map[string]any{"size": "large"})), testXR("db-bbbbb", "team-a", "db", func(xr *unstructured.Unstructured) {
				xr.SetManagedFields([]metav1.ManagedFieldsEntry{{
					Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "example.org/v1", FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:parameters":{"f:size":{}}}}`)},
				}})
			})},
			want: want{
				calls: []string{"get Database db", "get XDatabase db-bbbbb", "jsonPatch XDatabase db-bbbbb", "apply XDatabase db-bbbbb"},
				xrs:   map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"AdoptsCreatedFieldsOnRemoval": {
			reason: "A field the claim dropped, that the binder's create set and no apply took over yet, is a change: the binder adopts the XR's fields and applies, so that the field goes (Crossplane's composition-selection e2e case: a claim's only update removes a compositionSelector label).",
			objs: []*unstructured.Unstructured{testClaim(withRef("db-bbbbb"), withStatus), testXR("db-bbbbb", "team-a", "db", withStatus, func(xr *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(xr.Object, "eu", "spec", "parameters", "region")
				xr.SetManagedFields([]metav1.ManagedFieldsEntry{{
					Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "example.org/v1", FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:crossplane.io/claim-name":{},"f:crossplane.io/claim-namespace":{}}},"f:spec":{"f:claimRef":{},"f:parameters":{"f:region":{},"f:size":{}}}}`)},
				}})
			})},
			want: want{
				calls:  []string{"get Database db", "get XDatabase db-bbbbb", "jsonPatch XDatabase db-bbbbb", "apply XDatabase db-bbbbb", "applyStatus Database db"},
				synced: "ReconcileSuccess",
				xrs:    map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"CopyBackConflict": {
			reason: "A conflict copying the XR's status to the claim is a requeue, not an error that burns deliveries.",
			objs:   []*unstructured.Unstructured{testClaim(withRef("db-bbbbb")), testXR("db-bbbbb", "team-a", "db", withStatus)},
			hook:   failOn("applyStatus", "Database", 0, conflict("Database", "db")),
			want: want{
				result: reconcile.Result{Requeue: true},
				calls:  []string{"get Database db", "get XDatabase db-bbbbb", "applyStatus Database db"},
				xrs:    map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"BackPropagateConflictRetried": {
			reason: "A conflict writing what flows back from the XR (the secrets service wrote the claim's status meanwhile) reads the claim again and writes at once, without a requeue that would wait the bus's retry delay.",
			objs: []*unstructured.Unstructured{testClaim(withRef("db-bbbbb")), testXR("db-bbbbb", "team-a", "db", withStatus, func(xr *unstructured.Unstructured) {
				_ = unstructured.SetNestedMap(xr.Object, map[string]any{"name": "c-1"}, "spec", "compositionRevisionRef")
			})},
			hook: failOn("update", "Database", 1, conflict("Database", "db")),
			want: want{
				calls:  []string{"get Database db", "get XDatabase db-bbbbb", "update Database db", "get Database db", "update Database db", "applyStatus Database db"},
				synced: "ReconcileSuccess",
				xrs:    map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"FirstStatusWaitsForReady": {
			reason: "A claim without a status whose XR, created a second ago, is not Ready yet gets no status: it comes back when the wait for the XR's Ready ends.",
			objs:   []*unstructured.Unstructured{testClaim(withRef("db-bbbbb")), testXR("db-bbbbb", "team-a", "db", createdAt(-time.Second), withNotReady)},
			want: want{
				result: reconcile.Result{RequeueAfter: DefaultFirstStatusWait - time.Second},
				calls:  []string{"get Database db", "get XDatabase db-bbbbb"},
				xrs:    map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"FirstStatusReadyAtOnce": {
			reason: "A claim's first status is written at once when its new XR is Ready.",
			objs:   []*unstructured.Unstructured{testClaim(withRef("db-bbbbb")), testXR("db-bbbbb", "team-a", "db", createdAt(-time.Second), withStatus)},
			want: want{
				calls:  []string{"get Database db", "get XDatabase db-bbbbb", "applyStatus Database db"},
				synced: "ReconcileSuccess",
				xrs:    map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"FirstStatusWaitsForSecret": {
			reason: "A claim that asks for a connection Secret, whose XR turned Ready a second ago but has not published its Secret yet, gets no status until it has or the wait ends.",
			objs: []*unstructured.Unstructured{
				testClaim(withRef("db-bbbbb"), withSpec("writeConnectionSecretToRef", map[string]any{"name": "db-conn"})),
				testXR("db-bbbbb", "team-a", "db", createdAt(-time.Minute), readyAt(-time.Second)),
			},
			want: want{
				result: reconcile.Result{RequeueAfter: DefaultFirstStatusWait - time.Second},
				calls:  []string{"get Database db", "get XDatabase db-bbbbb"},
				xrs:    map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"WaitingClaimWaitsForSecret": {
			reason: "A claim that said it waits (its XR took long) waits for the Secret too when the XR turns Ready.",
			objs: []*unstructured.Unstructured{
				testClaim(withRef("db-bbbbb"), withSpec("writeConnectionSecretToRef", map[string]any{"name": "db-conn"}), func(cm *unstructured.Unstructured) {
					cm.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "Waiting", "lastTransitionTime": "1969-12-31T23:00:00Z"}}}
				}),
				testXR("db-bbbbb", "team-a", "db", createdAt(-time.Minute), readyAt(-2*time.Second)),
			},
			want: want{
				result: reconcile.Result{RequeueAfter: DefaultFirstStatusWait - 2*time.Second},
				calls:  []string{"get Database db", "get XDatabase db-bbbbb"},
				xrs:    map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"ReadyWithoutSecretAfterWait": {
			reason: "An XR Ready for longer than the wait without a Secret makes its claim Ready without one.",
			objs: []*unstructured.Unstructured{
				testClaim(withRef("db-bbbbb"), withSpec("writeConnectionSecretToRef", map[string]any{"name": "db-conn"})),
				testXR("db-bbbbb", "team-a", "db", createdAt(-time.Minute), readyAt(-DefaultFirstStatusWait)),
			},
			want: want{
				calls:  []string{"get Database db", "get XDatabase db-bbbbb", "applyStatus Database db"},
				synced: "ReconcileSuccess",
				xrs:    map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"FirstStatusWithSecret": {
			reason: "Once the XR's Secret is published, the claim's first status says Ready, in one write.",
			objs: []*unstructured.Unstructured{
				testClaim(withRef("db-bbbbb"), withSpec("writeConnectionSecretToRef", map[string]any{"name": "db-conn"})),
				testXR("db-bbbbb", "team-a", "db", createdAt(-time.Second), withStatus, func(xr *unstructured.Unstructured) {
					_ = unstructured.SetNestedField(xr.Object, "2026-01-01T00:00:00Z", "status", "connectionDetails", "lastPublishedTime")
				}),
			},
			want: want{
				calls:  []string{"get Database db", "get XDatabase db-bbbbb", "applyStatus Database db"},
				synced: "ReconcileSuccess",
				xrs:    map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"FirstStatusAfterWait": {
			reason: "Once the wait is over, a claim's first status says it waits for its XR.",
			objs:   []*unstructured.Unstructured{testClaim(withRef("db-bbbbb")), testXR("db-bbbbb", "team-a", "db", createdAt(-DefaultFirstStatusWait), withNotReady)},
			want: want{
				calls:  []string{"get Database db", "get XDatabase db-bbbbb", "applyStatus Database db"},
				synced: "ReconcileSuccess",
				xrs:    map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"FirstStatusConfirmed": {
			reason: "With WithConfirmedWaits, a claim's first status that would say it waits reads the XR again from the API server first.",
			objs:   []*unstructured.Unstructured{testClaim(withRef("db-bbbbb")), testXR("db-bbbbb", "team-a", "db", createdAt(-DefaultFirstStatusWait), withNotReady)},
			opts:   []Option{WithConfirmedWaits()},
			want: want{
				calls:  []string{"get Database db", "get XDatabase db-bbbbb", "get XDatabase db-bbbbb", "applyStatus Database db"},
				synced: "ReconcileSuccess",
				xrs:    map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"WaitingSuperseded": {
			reason:     "A status that would say the claim waits, while a newer event for the claim has come, is left to that event's reconcile: no confirming read, no write.",
			objs:       []*unstructured.Unstructured{testClaim(withRef("db-bbbbb")), testXR("db-bbbbb", "team-a", "db", createdAt(-DefaultFirstStatusWait), withNotReady)},
			opts:       []Option{WithConfirmedWaits()},
			superseded: true,
			want: want{
				calls: []string{"get Database db", "get XDatabase db-bbbbb"},
				xrs:   map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"ReadySuperseded": {
			reason:     "A claim turning Ready is written at once, newer events or not.",
			objs:       []*unstructured.Unstructured{testClaim(withRef("db-bbbbb")), testXR("db-bbbbb", "team-a", "db", withStatus)},
			superseded: true,
			want: want{
				calls:  []string{"get Database db", "get XDatabase db-bbbbb", "applyStatus Database db"},
				synced: "ReconcileSuccess",
				xrs:    map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"Unchanged": {
			reason: "A bound claim whose XR and status already agree writes nothing.",
			objs: func() []*unstructured.Unstructured {
				cm := testClaim(withRef("db-bbbbb"))
				xr := testXR("db-bbbbb", "team-a", "db", withStatus)
				r := NewReconciler(newFake(cm, xr), defs{xrd()}, WithClock(func() time.Time { return time.Unix(0, 0) }))
				f := newFake(cm, xr)
				r.client = f
				_, _ = r.Reconcile(t.Context(), claimGVK, "team-a", "db")
				return []*unstructured.Unstructured{f.get("Database", "team-a", "db"), xr}
			}(),
			want: want{
				calls:  []string{"get Database db", "get XDatabase db-bbbbb"},
				synced: "ReconcileSuccess",
				xrs:    map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"Retain": {
			reason: "A deleted claim with reclaimPolicy Retain releases its XR (claimRef cleared, Bound False) and drops its finalizer; the XR is not deleted.",
			objs:   []*unstructured.Unstructured{testClaim(withRef("db-bbbbb"), withSpec("reclaimPolicy", "Retain"), deleted), testXR("db-bbbbb", "team-a", "db")},
			want: want{
				calls:  []string{"get Database db", "get XDatabase db-bbbbb", "mergePatch XDatabase db-bbbbb", "applyStatus XDatabase db-bbbbb", "update Database db"},
				events: []string{`Normal ReleaseCompositeResource Released composite resource "db-bbbbb" (reclaimPolicy Retain)`},
				xrs:    map[string]string{"db-bbbbb": ""},
			},
		},
		"Foreground": {
			reason: "A deleted claim with compositeDeletePolicy Foreground deletes its XR in the foreground, says so on the claim, and looks again later; the finalizer stays until the XR is gone.",
			objs:   []*unstructured.Unstructured{testClaim(withRef("db-bbbbb"), withSpec("compositeDeletePolicy", "Foreground"), deleted), testXR("db-bbbbb", "team-a", "db")},
			want: want{
				result: reconcile.Result{RequeueAfter: 15 * time.Second},
				calls:  []string{"get Database db", "get XDatabase db-bbbbb", "delete/Foreground XDatabase db-bbbbb", "applyStatus Database db"},
				events: []string{`Normal DeleteCompositeResource Deleting composite resource "db-bbbbb" (compositeDeletePolicy Foreground)`},
				synced: "ReconcileSuccess",
				xrs:    map[string]string{"db-bbbbb": "team-a/db"},
			},
		},
		"ForegroundDone": {
			reason: "Once the XR deleted in the foreground is gone, the claim's finalizer is removed.",
			objs:   []*unstructured.Unstructured{testClaim(withRef("db-bbbbb"), withSpec("compositeDeletePolicy", "Foreground"), deleted)},
			want: want{
				calls: []string{"get Database db", "get XDatabase db-bbbbb", "update Database db"},
			},
		},
		"FinalizerConflict": {
			reason: "A conflict removing the finalizer is a requeue.",
			objs:   []*unstructured.Unstructured{testClaim(withRef("db-bbbbb"), deleted)},
			hook:   failOn("update", "Database", 0, conflict("Database", "db")),
			want: want{
				result: reconcile.Result{Requeue: true},
				calls:  []string{"get Database db", "get XDatabase db-bbbbb", "update Database db"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFake(tc.objs...)
			f.hook = tc.hook
			var events []string
			rec := event.RecorderFn(func(_ runtime.Object, typ, reason, msg string) {
				events = append(events, fmt.Sprintf("%s %s %s", typ, reason, msg))
			})
			d := tc.d
			if d == nil {
				d = xrd()
			}
			o := []Option{WithRecorder(rec), WithClock(func() time.Time { return time.Unix(0, 0) })}
			if tc.names != nil {
				o = append(o, WithNameGenerator(tc.names))
			}
			o = append(o, tc.opts...)
			r := NewReconciler(f, defs{d}, o...)
			ctx := t.Context()
			if tc.superseded {
				ctx = reconcile.WithSuperseded(ctx, func() bool { return true })
			}
			res, err := r.Reconcile(ctx, claimGVK, "team-a", "db")
			if diff := cmp.Diff(tc.want.result, res); diff != "" {
				t.Errorf("%s\nReconcile(...): result -want, +got:\n%s", tc.reason, diff)
			}
			if (err != nil) != tc.want.err {
				t.Errorf("%s\nReconcile(...): error %v, want error %t", tc.reason, err, tc.want.err)
			}
			if diff := cmp.Diff(tc.want.calls, f.calls); diff != "" {
				t.Errorf("%s\nReconcile(...): API calls -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.events, events); diff != "" {
				t.Errorf("%s\nReconcile(...): events -want, +got:\n%s", tc.reason, diff)
			}
			synced := ""
			if cm := f.get("Database", "team-a", "db"); cm != nil {
				if c, ok := condition.Find(condition.Observed(cm), "Synced"); ok {
					synced = string(c.Reason)
				}
			}
			if diff := cmp.Diff(tc.want.synced, synced); diff != "" {
				t.Errorf("%s\nReconcile(...): claim's Synced reason -want, +got:\n%s", tc.reason, diff)
			}
			xrs := map[string]string{}
			for _, o := range f.objs {
				if o.GetKind() != "XDatabase" {
					continue
				}
				claim := ""
				if ref := ClaimRef(o); ref != nil {
					claim = ref.String()
				}
				xrs[o.GetName()] = claim
			}
			if tc.want.xrs == nil {
				tc.want.xrs = map[string]string{}
			}
			if diff := cmp.Diff(tc.want.xrs, xrs); diff != "" {
				t.Errorf("%s\nReconcile(...): XRs (name: claim) -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
