package mirror

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/bus/bustest"
	"github.com/loomxr/loom/pkg/objjson"
)

// startBucket runs an in-process NATS server with JetStream on a loopback
// port for the duration of the test and returns the mirror's bucket on it.
// maxPayload, when not zero, lowers the server's max_payload. It returns the
// JetStream context it reaches the bucket through too.
func startBucket(t *testing.T, maxPayload int32) (jetstream.JetStream, jetstream.KeyValue) {
	t.Helper()
	var opts []bustest.Option
	if maxPayload != 0 {
		opts = append(opts, bustest.WithMaxPayload(maxPayload))
	}
	_, js := bustest.Connect(t, bustest.Run(t, opts...).URL())
	kv, err := EnsureBucket(t.Context(), js, 1)
	if err != nil {
		t.Fatalf("EnsureBucket(): %v", err)
	}
	return js, kv
}

// obj returns an object of apiVersion and kind.
func obj(apiVersion, kind, namespace, name, rv string, lbls map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetResourceVersion(rv)
	u.SetLabels(lbls)
	_ = unstructured.SetNestedField(u.Object, "small", "spec", "size")
	return u
}

var (
	gvkWidget = schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Widget"}
	gkWidget  = gvkWidget.GroupKind()
)

func widget(namespace, name, rv string, lbls map[string]string) *unstructured.Unstructured {
	return obj("example.org/v1", "Widget", namespace, name, rv, lbls)
}

func TestKey(t *testing.T) {
	cases := map[string]struct {
		reason string
		key    Key
		want   string
	}{
		"Namespaced": {
			reason: "Dots in the group and name become underscores.",
			key:    Key{Group: "example.org", Kind: "Widget", Namespace: "team-a", Name: "w1.a"},
			want:   "example_org.Widget.team-a.w1_a",
		},
		"CoreClusterScoped": {
			reason: "The core group and no namespace are each the token _.",
			key:    Key{Kind: "Namespace", Name: "team-a"},
			want:   "_.Namespace._.team-a",
		},
		"PathSegmentName": {
			reason: "Some built-in kinds allow any name without a slash: other bytes, and _ itself, are hex escapes.",
			key:    Key{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:a_b=c"},
			want:   "rbac_authorization_k8s_io.ClusterRole._.system=3Aa=5Fb=3Dc",
		},
		"LeadingDot": {
			reason: "A leading dot is escaped, so that no name escapes to the empty token.",
			key:    Key{Kind: "ConfigMap", Namespace: "ns", Name: ".x"},
			want:   "_.ConfigMap.ns.=2Ex",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.key.String()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nString(): -want, +got:\n%s", tc.reason, diff)
			}
			back, err := ParseKey(got)
			if err != nil {
				t.Fatalf("%s\nParseKey(%q): %v", tc.reason, got, err)
			}
			if diff := cmp.Diff(tc.key, back); diff != "" {
				t.Errorf("%s\nParseKey(String()): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestParseKeyRefuses(t *testing.T) {
	cases := map[string]struct {
		reason string
		key    string
	}{
		"TooFewTokens":  {reason: "A key has four tokens.", key: "example_org.Widget.w1"},
		"TooManyTokens": {reason: "A key has four tokens.", key: "example_org.Widget.ns.w1.x"},
		"NoKind":        {reason: "Every object has a kind.", key: "example_org._.ns.w1"},
		"BadEscape":     {reason: "An escape is = and two hex digits.", key: "example_org.Widget.ns.w=G1"},
		"ShortEscape":   {reason: "An escape is = and two hex digits.", key: "example_org.Widget.ns.w=4"},
		"NotCanonical":  {reason: "A letter needs no escape: the key is spelled as no Key spells it.", key: "example_org.Widget.ns.=61"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if k, err := ParseKey(tc.key); err == nil {
				t.Errorf("%s\nParseKey(%q) = %+v, want an error", tc.reason, tc.key, k)
			}
		})
	}
}

func TestAtLeast(t *testing.T) {
	cases := map[string]struct {
		reason     string
		have, want string
		atLeast    bool
	}{
		"Equal":          {reason: "Equal versions are as new.", have: "42", want: "42", atLeast: true},
		"Newer":          {reason: "etcd revisions grow: a larger one is newer.", have: "100", want: "42", atLeast: true},
		"Older":          {reason: "A smaller revision is older.", have: "42", want: "100", atLeast: false},
		"NumericNotText": {reason: "Revisions compare as numbers, not as text.", have: "100", want: "99", atLeast: true},
		"AnyVersion":     {reason: "An empty want accepts anything.", have: "abc", want: "", atLeast: true},
		"OpaqueEqual":    {reason: "Opaque versions compare for equality.", have: "abc", want: "abc", atLeast: true},
		"OpaqueUnequal":  {reason: "Opaque versions that differ cannot be ordered.", have: "abd", want: "abc", atLeast: false},
		"MixedForms":     {reason: "One opaque version makes the pair opaque.", have: "100", want: "abc", atLeast: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := AtLeast(tc.have, tc.want); got != tc.atLeast {
				t.Errorf("%s\nAtLeast(%q, %q) = %v, want %v", tc.reason, tc.have, tc.want, got, tc.atLeast)
			}
		})
	}
}

func TestGet(t *testing.T) {
	type args struct {
		gvk                 schema.GroupVersionKind
		namespace, name, rv string
	}
	type want struct {
		state State
		rv    string
	}
	cases := map[string]struct {
		reason string
		put    []*unstructured.Unstructured
		purge  []Key
		args   args
		want   want
	}{
		"FreshEqual": {
			reason: "An entry at the event's resourceVersion is fresh.",
			put:    []*unstructured.Unstructured{widget("ns", "w", "5", nil)},
			args:   args{gvk: gvkWidget, namespace: "ns", name: "w", rv: "5"},
			want:   want{state: Fresh, rv: "5"},
		},
		"FreshNewer": {
			reason: "An entry newer than the event is fresh.",
			put:    []*unstructured.Unstructured{widget("ns", "w", "5", nil), widget("ns", "w", "7", nil)},
			args:   args{gvk: gvkWidget, namespace: "ns", name: "w", rv: "5"},
			want:   want{state: Fresh, rv: "7"},
		},
		"Stale": {
			reason: "An entry older than the event is stale, and returned.",
			put:    []*unstructured.Unstructured{widget("ns", "w", "5", nil)},
			args:   args{gvk: gvkWidget, namespace: "ns", name: "w", rv: "7"},
			want:   want{state: Stale, rv: "5"},
		},
		"OpaqueUnequal": {
			reason: "Versions that are not revisions and differ cannot be ordered: stale.",
			put:    []*unstructured.Unstructured{widget("ns", "w", "x1", nil)},
			args:   args{gvk: gvkWidget, namespace: "ns", name: "w", rv: "x2"},
			want:   want{state: Stale, rv: "x1"},
		},
		"NoMinimum": {
			reason: "Asking for no resourceVersion accepts any entry.",
			put:    []*unstructured.Unstructured{widget("ns", "w", "5", nil)},
			args:   args{gvk: gvkWidget, namespace: "ns", name: "w"},
			want:   want{state: Fresh, rv: "5"},
		},
		"NeverSeen": {
			reason: "A missing key is unknown, not NotFound.",
			args:   args{gvk: gvkWidget, namespace: "ns", name: "w", rv: "5"},
			want:   want{state: Unknown},
		},
		"Deleted": {
			reason: "A purged key is unknown.",
			put:    []*unstructured.Unstructured{widget("ns", "w", "5", nil)},
			purge:  []Key{KeyOf(gkWidget, "ns", "w")},
			args:   args{gvk: gvkWidget, namespace: "ns", name: "w", rv: "5"},
			want:   want{state: Unknown},
		},
		"OtherNamespace": {
			reason: "The namespace is part of the key.",
			put:    []*unstructured.Unstructured{widget("ns", "w", "5", nil)},
			args:   args{gvk: gvkWidget, namespace: "other", name: "w", rv: "5"},
			want:   want{state: Unknown},
		},
		"DottedNames": {
			reason: "A dot in a name does not split it: w.x and w.y are two objects.",
			put:    []*unstructured.Unstructured{widget("ns", "w.x", "5", nil), widget("ns", "w.y", "6", nil)},
			args:   args{gvk: gvkWidget, namespace: "ns", name: "w.x"},
			want:   want{state: Fresh, rv: "5"},
		},
		"OtherVersion": {
			reason: "An entry of another version of the kind cannot answer for this one.",
			put:    []*unstructured.Unstructured{obj("example.org/v1beta1", "Widget", "ns", "w", "5", nil)},
			args:   args{gvk: gvkWidget, namespace: "ns", name: "w", rv: "5"},
			want:   want{state: Unknown},
		},
		"AnyVersion": {
			reason: "Without a version, the entry answers whatever version it holds.",
			put:    []*unstructured.Unstructured{obj("example.org/v1beta1", "Widget", "ns", "w", "5", nil)},
			args:   args{gvk: schema.GroupVersionKind{Group: "example.org", Kind: "Widget"}, namespace: "ns", name: "w", rv: "5"},
			want:   want{state: Fresh, rv: "5"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			js, kv := startBucket(t, 0)
			w, r := NewWriter(js, kv), NewReader(kv)
			for _, o := range tc.put {
				if err := w.Put(ctx, o); err != nil {
					t.Fatalf("Put(%s): %v", o.GetName(), err)
				}
			}
			for _, k := range tc.purge {
				if err := w.Delete(ctx, k.GroupKind(), k.Namespace, k.Name); err != nil {
					t.Fatalf("Delete(%s): %v", k, err)
				}
			}
			u, state, err := r.Get(ctx, tc.args.gvk, tc.args.namespace, tc.args.name, tc.args.rv)
			if err != nil {
				t.Fatalf("%s\nGet(): %v", tc.reason, err)
			}
			got := want{state: state}
			if u != nil {
				got.rv = u.GetResourceVersion()
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nGet(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestPut checks Put, and Send with every write sent before the first
// answer is waited for: a write that JetStream stores in another order than
// it was sent leaves an older version in the mirror.
func TestPut(t *testing.T) {
	var versions []*unstructured.Unstructured
	for i := range 50 {
		versions = append(versions, widget("ns", "w", strconv.Itoa(i+1), nil))
	}
	big := widget("ns", "w", "6", nil)
	_ = unstructured.SetNestedField(big.Object, strings.Repeat("x", 8192), "spec", "blob")
	cases := map[string]struct {
		reason     string
		maxPayload int32
		put        []*unstructured.Unstructured
		wantErr    error
		// get is the object then read back; want its resourceVersion and
		// state (its minimum is the version last put).
		get       Key
		wantState State
	}{
		"CoreSecret": {
			reason:    "Secret data never travels on NATS: a core Secret is refused and nothing is written.",
			put:       []*unstructured.Unstructured{obj("v1", "Secret", "ns", "s", "5", nil)},
			wantErr:   ErrSecret,
			get:       KeyOf(schema.GroupKind{Kind: "Secret"}, "ns", "s"),
			wantState: Unknown,
		},
		"OtherGroupSecret": {
			reason:    "Only core Secrets are Secrets: a kind named Secret in another group is mirrored.",
			put:       []*unstructured.Unstructured{obj("example.org/v1", "Secret", "ns", "s", "5", nil)},
			get:       KeyOf(schema.GroupKind{Group: "example.org", Kind: "Secret"}, "ns", "s"),
			wantState: Fresh,
		},
		"TooLarge": {
			reason:     "An object larger than a NATS message is not mirrored, and its older entry is purged rather than left stale.",
			maxPayload: 4096,
			put:        []*unstructured.Unstructured{widget("ns", "w", "5", nil), big},
			get:        KeyOf(gkWidget, "ns", "w"),
			wantState:  Unknown,
		},
		"Versions": {
			reason:    "Of many versions written one after another, the last is stored.",
			put:       versions,
			get:       KeyOf(gkWidget, "ns", "w"),
			wantState: Fresh,
		},
	}
	for name, tc := range cases {
		for _, send := range []bool{false, true} {
			how := "Put"
			if send {
				how = "Send"
			}
			t.Run(name+"/"+how, func(t *testing.T) {
				ctx := t.Context()
				js, kv := startBucket(t, tc.maxPayload)
				w, r := NewWriter(js, kv), NewReader(kv)
				var err error
				last := ""
				if send {
					var sent []Pending
					for _, o := range tc.put {
						data, encErr := objjson.Append(nil, o.Object)
						if encErr != nil {
							t.Fatalf("cannot encode %s: %v", o.GetName(), encErr)
						}
						sent = append(sent, w.Send(o.GroupVersionKind().GroupKind(), o.GetNamespace(), o.GetName(), data))
						last = o.GetResourceVersion()
					}
					for _, p := range sent {
						if werr := p.Wait(ctx); werr != nil && err == nil {
							err = werr
						}
					}
				} else {
					for _, o := range tc.put {
						if err = w.Put(ctx, o); err != nil {
							break
						}
						last = o.GetResourceVersion()
					}
				}
				if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
					t.Errorf("%s\n%s(): -want error, +got error:\n%s", tc.reason, how, diff)
				}
				gvk := tc.get.GroupKind().WithVersion("")
				got, state, err := r.Get(ctx, gvk, tc.get.Namespace, tc.get.Name, last)
				if err != nil {
					t.Fatalf("Get(): %v", err)
				}
				if state != tc.wantState {
					t.Errorf("%s\nGet() state = %s, want %s", tc.reason, state, tc.wantState)
				}
				if state == Fresh && got.GetResourceVersion() != last {
					t.Errorf("%s\nGet() = resourceVersion %s, want %s", tc.reason, got.GetResourceVersion(), last)
				}
			})
		}
	}
}

func TestReconcile(t *testing.T) {
	objects := []*unstructured.Unstructured{
		widget("ns", "a", "1", nil),
		widget("ns", "b", "2", nil),
		obj("v1", "ConfigMap", "ns", "a", "3", nil),
	}
	cases := map[string]struct {
		reason     string
		exists     func(Key) bool
		junk       []string
		wantPurged int
		wantKeys   []string
	}{
		"NothingGone": {
			reason:   "Keys of objects that exist stay.",
			exists:   func(Key) bool { return true },
			wantKeys: []string{"_.ConfigMap.ns.a", "example_org.Widget.ns.a", "example_org.Widget.ns.b"},
		},
		"SomeGone": {
			reason:     "Keys of objects that vanished are purged; others stay.",
			exists:     func(k Key) bool { return k.Name == "a" },
			wantPurged: 1,
			wantKeys:   []string{"_.ConfigMap.ns.a", "example_org.Widget.ns.a"},
		},
		"KindGone": {
			reason:     "A kind no longer watched is purged whole.",
			exists:     func(k Key) bool { return k.Kind != "Widget" },
			wantPurged: 2,
			wantKeys:   []string{"_.ConfigMap.ns.a"},
		},
		"NotOurs": {
			reason:     "A key that is no Key is purged, whatever exists says.",
			exists:     func(Key) bool { return true },
			junk:       []string{"junk", "example_org.Widget.ns.=61"},
			wantPurged: 2,
			wantKeys:   []string{"_.ConfigMap.ns.a", "example_org.Widget.ns.a", "example_org.Widget.ns.b"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			js, kv := startBucket(t, 0)
			w := NewWriter(js, kv)
			for _, o := range objects {
				if err := w.Put(ctx, o); err != nil {
					t.Fatalf("Put(): %v", err)
				}
			}
			for _, k := range tc.junk {
				if _, err := kv.Put(ctx, k, []byte("{}")); err != nil {
					t.Fatalf("kv.Put(%q): %v", k, err)
				}
			}
			purged, err := w.Reconcile(ctx, tc.exists)
			if err != nil {
				t.Fatalf("%s\nReconcile(): %v", tc.reason, err)
			}
			if purged != tc.wantPurged {
				t.Errorf("%s\nReconcile() purged %d keys, want %d", tc.reason, purged, tc.wantPurged)
			}
			if diff := cmp.Diff(tc.wantKeys, keys(ctx, t, kv)); diff != "" {
				t.Errorf("%s\nkeys after Reconcile(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// keys returns the bucket's keys, sorted.
func keys(ctx context.Context, t *testing.T, kv jetstream.KeyValue) []string {
	t.Helper()
	kl, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatalf("ListKeys(): %v", err)
	}
	var out []string
	for k := range kl.Keys() {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestList(t *testing.T) {
	objects := []*unstructured.Unstructured{
		widget("ns-a", "w1", "1", map[string]string{"tier": "gold"}),
		widget("ns-a", "w2", "2", map[string]string{"tier": "silver"}),
		widget("ns-b", "w3", "3", map[string]string{"tier": "gold"}),
		obj("example.org/v1beta1", "Widget", "ns-b", "w4", "4", map[string]string{"tier": "gold"}),
		obj("example.org/v1", "Gadget", "ns-a", "g1", "5", map[string]string{"tier": "gold"}),
		obj("other.example.org/v1", "Widget", "ns-a", "o1", "6", map[string]string{"tier": "gold"}),
	}
	gold := labels.SelectorFromSet(labels.Set{"tier": "gold"})
	cases := map[string]struct {
		reason    string
		gvk       schema.GroupVersionKind
		namespace string
		sel       labels.Selector
		want      []string
	}{
		"AllNamespaces": {
			reason: "Every object of the kind at the version, in every namespace; not other kinds or groups, nor other versions.",
			gvk:    gvkWidget,
			want:   []string{"ns-a/w1", "ns-a/w2", "ns-b/w3"},
		},
		"OneNamespace": {
			reason:    "A namespace narrows the scan.",
			gvk:       gvkWidget,
			namespace: "ns-a",
			want:      []string{"ns-a/w1", "ns-a/w2"},
		},
		"Selector": {
			reason: "Labels select.",
			gvk:    gvkWidget,
			sel:    gold,
			want:   []string{"ns-a/w1", "ns-b/w3"},
		},
		"AnyVersion": {
			reason: "Without a version, every version the mirror holds answers.",
			gvk:    schema.GroupVersionKind{Group: "example.org", Kind: "Widget"},
			sel:    gold,
			want:   []string{"ns-a/w1", "ns-b/w3", "ns-b/w4"},
		},
		"NoneOfTheKind": {
			reason: "A kind with no entries lists nothing.",
			gvk:    schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Gizmo"},
		},
	}
	ctx := t.Context()
	js, kv := startBucket(t, 0)
	w, r := NewWriter(js, kv), NewReader(kv)
	for _, o := range objects {
		if err := w.Put(ctx, o); err != nil {
			t.Fatalf("Put(): %v", err)
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := r.List(ctx, tc.gvk, tc.namespace, tc.sel)
			if err != nil {
				t.Fatalf("%s\nList(): %v", tc.reason, err)
			}
			var names []string
			for _, u := range got {
				names = append(names, u.GetNamespace()+"/"+u.GetName())
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("%s\nList(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestWithoutManagedFields checks that a Reader made WithoutManagedFields
// answers Get and List with the objects written, but for their
// managedFields, and that a default Reader keeps them.
func TestWithoutManagedFields(t *testing.T) {
	ctx := t.Context()
	js, kv := startBucket(t, 0)
	w := NewWriter(js, kv)
	o := widget("ns-a", "w1", "1", map[string]string{"tier": "gold"})
	o.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "loom-renderer", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "example.org/v1", FieldsType: "FieldsV1"}})
	if err := w.Put(ctx, o); err != nil {
		t.Fatalf("Put(): %v", err)
	}
	lean := o.DeepCopy()
	lean.SetManagedFields(nil)
	for name, tc := range map[string]struct {
		r    *Reader
		want *unstructured.Unstructured
	}{
		"Default":              {r: NewReader(kv), want: o},
		"WithoutManagedFields": {r: NewReader(kv, WithoutManagedFields()), want: lean},
	} {
		got, st, err := tc.r.Get(ctx, gvkWidget, "ns-a", "w1", "1")
		if err != nil || st != Fresh {
			t.Fatalf("%s: Get(): %v, %v", name, st, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: Get(): -want, +got:\n%s", name, diff)
		}
		l, err := tc.r.List(ctx, gvkWidget, "ns-a", nil)
		if err != nil || len(l) != 1 {
			t.Fatalf("%s: List(): %d objects, %v", name, len(l), err)
		}
		if diff := cmp.Diff(tc.want, l[0]); diff != "" {
			t.Errorf("%s: List(): -want, +got:\n%s", name, diff)
		}
	}
}
