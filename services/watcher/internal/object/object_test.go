package object

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"
)

func parse(t testing.TB, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatalf("cannot parse test object: %v", err)
	}
	return u
}

const metadataIn = `
  name: x
  uid: u1
  resourceVersion: "7"
  generation: 3
  labels: {crossplane.io/composite: x}
  annotations: {kubectl.kubernetes.io/last-applied-configuration: "{...}"}
  finalizers: [composite.apiextensions.crossplane.io]
  managedFields: [{manager: kubectl}]
  ownerReferences:
  - {apiVersion: example.org/v1, kind: XParent, name: p, uid: p1, controller: true}
  - {apiVersion: v1, kind: ConfigMap, name: other, uid: o1}
`

const metadataOut = `
  name: x
  uid: u1
  resourceVersion: "7"
  generation: 3
  labels: {crossplane.io/composite: x}
  ownerReferences:
  - {apiVersion: example.org/v1, kind: XParent, name: p, uid: p1, controller: true}
`

func TestTransformUnstructured(t *testing.T) {
	cases := map[string]struct {
		reason string
		shape  Shape
		in     string
		want   string
		ready  string // the AnnotationReady kept, if any
	}{
		"ComposedReady": {
			reason: "An object other than an XR keeps the status of its Ready condition, and no status.",
			in: "apiVersion: nop.crossplane.io/v1alpha1\nkind: NopResource\nmetadata:" + metadataIn +
				"status: {conditions: [{type: Synced, status: \"True\"}, {type: Ready, status: \"False\", reason: Creating}]}\n",
			want:  "apiVersion: nop.crossplane.io/v1alpha1\nkind: NopResource\nmetadata:" + metadataOut,
			ready: "False",
		},
		"ComposedNoReadyCondition": {
			reason: "An object whose status has no Ready condition keeps no AnnotationReady.",
			in: "apiVersion: nop.crossplane.io/v1alpha1\nkind: NopResource\nmetadata:" + metadataIn +
				"status: {conditions: [{type: Synced, status: \"True\"}]}\n",
			want: "apiVersion: nop.crossplane.io/v1alpha1\nkind: NopResource\nmetadata:" + metadataOut,
		},
		"MetadataOnly": {
			reason: "Without a shape only apiVersion, kind and trimmed metadata remain.",
			in:     "apiVersion: v1\nkind: ConfigMap\nmetadata:" + metadataIn + "data: {a: b}\n",
			want:   "apiVersion: v1\nkind: ConfigMap\nmetadata:" + metadataOut,
		},
		"XR": {
			reason: "An XR keeps its claimRef, its Composition's name and the kinds of its resourceRefs.",
			shape:  ShapeXR,
			in: "apiVersion: example.org/v1\nkind: XDatabase\nmetadata:" + metadataIn + `spec:
  size: large
  compositionRef: {name: c}
  claimRef: {apiVersion: example.org/v1, kind: Database, namespace: ns, name: db}
  resourceRefs:
  - {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, name: a}
status: {conditions: [{type: Ready, status: "True"}]}
`,
			want: "apiVersion: example.org/v1\nkind: XDatabase\nmetadata:" + metadataOut + `spec:
  compositionRef: {name: c}
  claimRef: {apiVersion: example.org/v1, kind: Database, namespace: ns, name: db}
  resourceRefs:
  - {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
`,
		},
		"ModernXR": {
			reason: "A modern XR keeps the same fields under spec.crossplane.",
			shape:  ShapeXR,
			in: `apiVersion: example.org/v2
kind: XDatabase
metadata: {name: x, namespace: ns}
spec:
  crossplane:
    compositionRef: {name: c}
    resourceRefs: [{apiVersion: v1, kind: ConfigMap, name: a}]
`,
			want: `apiVersion: example.org/v2
kind: XDatabase
metadata: {name: x, namespace: ns}
spec:
  crossplane:
    compositionRef: {name: c}
    resourceRefs: [{apiVersion: v1, kind: ConfigMap}]
`,
		},
		"Composition": {
			reason: "A Composition keeps only its mode and the apiVersion and kind of its templates' bases.",
			shape:  ShapeComposition,
			in: `apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: c}
spec:
  compositeTypeRef: {apiVersion: example.org/v1, kind: XDatabase}
  mode: Pipeline
  resources:
  - name: a
    base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, spec: {forProvider: {}}}
    patches: [{type: FromCompositeFieldPath}]
  pipeline:
  - step: pt
    functionRef: {name: fn}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      resources:
      - {name: b, base: {apiVersion: v1, kind: ConfigMap, data: {}}}
`,
			want: `apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: c}
spec:
  mode: Pipeline
  resources:
  - base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}
  pipeline:
  - input:
      resources:
      - base: {apiVersion: v1, kind: ConfigMap}
`,
		},
		"UnionOfShapes": {
			reason: "Shapes combine: an XR that is also a claim-like kind keeps both sets of fields.",
			shape:  ShapeXR | ShapeClaim,
			in: `apiVersion: example.org/v1
kind: Odd
metadata: {name: x}
spec: {resourceRef: {name: r}, claimRef: {name: c}, other: 1}
`,
			want: `apiVersion: example.org/v1
kind: Odd
metadata: {name: x}
spec: {resourceRef: {name: r}, claimRef: {name: c}}
`,
		},
		"NoController": {
			reason: "Owner references without a controller are dropped.",
			in: `apiVersion: v1
kind: ConfigMap
metadata:
  name: x
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: other, uid: o1}]
`,
			want: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tf := Transform(tc.shape)
			got, err := tf(parse(t, tc.in))
			if err != nil {
				t.Fatalf("Transform(): %v", err)
			}
			want := parse(t, tc.want)
			in := parse(t, tc.in)
			// The digest's, the status summary's, the status fields', the
			// reading of the XR's status', the connection details' reading
			// of composed status and the binding summary's own behaviour
			// are TestDigest's, TestStatusChanges', TestStatusFieldsChanged's,
			// TestReadsStatus', TestDetailsFromStatus' and TestPropagated's
			// business.
			ann := digestAnnotations(in.GetAnnotations(), in.GetFinalizers())
			if tc.shape&ShapeXR != 0 {
				ann = with(ann, AnnotationStatus, statusSummary(in))
			} else {
				ann = with(ann, AnnotationStatusFields, statusFields(in))
				ann = with(ann, AnnotationReadyCondition, readyCondition(in))
			}
			if tc.shape&(ShapeComposition|ShapeRevision) != 0 {
				ann = with(ann, AnnotationReadsStatus, readsStatus(in))
				ann = with(ann, AnnotationDetailsFromStatus, detailsFromStatus(in))
				ann = with(ann, AnnotationReadsComposedSpec, readsComposedSpec(in))
				ann = with(ann, AnnotationReadsComposedStatus, readsComposedStatus(in))
				ann = with(ann, AnnotationDetailsFromSpec, detailsFromSpec(in))
				ann = with(ann, AnnotationReadyRequired, readyRequired(in))
				ann = with(ann, AnnotationStatusToSpec, statusToSpec(in))
			}
			if tc.shape&(ShapeXR|ShapeClaim) != 0 {
				ann = with(ann, AnnotationPropagated, propagatedSummary(in))
			}
			if w := writersOf(in); w != "" {
				ann = with(ann, AnnotationWriters, w)
			}
			if tc.ready != "" {
				ann = with(ann, AnnotationReady, tc.ready)
			}
			want.SetAnnotations(ann)
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nTransform(): -want, +got:\n%s", tc.reason, diff)
			}
			again, err := tf(got)
			if err != nil {
				t.Fatalf("Transform() again: %v", err)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("%s\nTransform() is not idempotent: -once, +twice:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTransformMetadata(t *testing.T) {
	yes, no := true, false
	now := metav1.Now()
	in := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "x", Namespace: "ns", UID: "u1", ResourceVersion: "7", Generation: 2,
			Labels:            map[string]string{"crossplane.io/composite": "p"},
			Annotations:       map[string]string{"big": "value"},
			Finalizers:        []string{"f"},
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			DeletionTimestamp: &now,
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "o1", Controller: &no},
				{APIVersion: "example.org/v1", Kind: "XParent", Name: "p", UID: "p1", Controller: &yes},
			},
		},
	}
	want := &metav1.PartialObjectMetadata{
		TypeMeta: in.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: "x", Namespace: "ns", UID: "u1", ResourceVersion: "7", Generation: 2,
			Labels:            map[string]string{"crossplane.io/composite": "p"},
			Annotations:       with(digestAnnotations(map[string]string{"big": "value"}, []string{"f"}), AnnotationWriters, writersOf(in)),
			DeletionTimestamp: &now,
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "example.org/v1", Kind: "XParent", Name: "p", UID: "p1", Controller: &yes}},
		},
	}
	tf := Transform(0)
	got, err := tf(in)
	if err != nil {
		t.Fatalf("Transform(): %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Transform(): -want, +got:\n%s", diff)
	}
	again, _ := tf(got)
	if diff := cmp.Diff(got, again); diff != "" {
		t.Errorf("Transform() is not idempotent: -once, +twice:\n%s", diff)
	}

	// Tombstones pass through.
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/x", Obj: want}
	if got, _ := tf(tomb); got != any(tomb) {
		t.Errorf("Transform(tombstone): want it unchanged, got %v", got)
	}
}

func TestDigest(t *testing.T) {
	base := digestAnnotations(map[string]string{"a": "1", "b": "2"}, []string{"f"})
	cases := map[string]struct {
		reason      string
		annotations map[string]string
		finalizers  []string
		same        bool
	}{
		"Same": {
			reason:      "The same annotations and finalizers give the same digest.",
			annotations: map[string]string{"b": "2", "a": "1"}, finalizers: []string{"f"}, same: true,
		},
		"AnnotationValue": {
			reason:      "A changed annotation value changes the digest.",
			annotations: map[string]string{"a": "1", "b": "3"}, finalizers: []string{"f"},
		},
		"AnnotationShifted": {
			reason:      "Moving text between key and value changes the digest.",
			annotations: map[string]string{"a": "12", "b": ""}, finalizers: []string{"f"},
		},
		"FinalizerRemoved": {
			reason:      "A removed finalizer changes the digest.",
			annotations: map[string]string{"a": "1", "b": "2"},
		},
		"FinalizerAsAnnotation": {
			reason:      "Finalizers and annotations do not mix.",
			annotations: map[string]string{"a": "1", "b": "2", "f": ""},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := digestAnnotations(tc.annotations, tc.finalizers)
			if same := got[AnnotationDigest] == base[AnnotationDigest]; same != tc.same {
				t.Errorf("%s\ndigest %v, base %v: same = %t, want %t", tc.reason, got, base, same, tc.same)
			}
		})
	}
	if got := digestAnnotations(nil, nil); got != nil {
		t.Errorf("digest of nothing: got %v, want nil", got)
	}
}

func TestStatusOnly(t *testing.T) {
	yes := true
	old := Meta{UID: "u", Generation: 3, Labels: map[string]string{"l": "1"}, Digest: "d",
		Controller: &metav1.OwnerReference{UID: "c", Controller: &yes}}
	cases := map[string]struct {
		reason string
		change func(m *Meta)
		want   bool
	}{
		"Status": {
			reason: "Nothing but the resource version changed: the status did.",
			change: func(m *Meta) { m.ResourceVersion = "9" },
			want:   true,
		},
		"Spec": {
			reason: "A new generation means a spec change.",
			change: func(m *Meta) { m.Generation = 4 },
		},
		"Labels": {
			reason: "Changed labels are not a status change.",
			change: func(m *Meta) { m.Labels = map[string]string{"l": "2"} },
		},
		"AnnotationsOrFinalizers": {
			reason: "A changed digest is not a status change.",
			change: func(m *Meta) { m.Digest = "e" },
		},
		"Deleting": {
			reason: "A deletion is not a status change.",
			change: func(m *Meta) { m.Deleting = true },
		},
		"Controller": {
			reason: "A new controller is not a status change.",
			change: func(m *Meta) { m.Controller = nil },
		},
		"NoGeneration": {
			reason: "Without a generation a spec change cannot be told from a status change.",
			change: func(m *Meta) { m.Generation = 0 },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cur := old
			cur.Labels = maps.Clone(old.Labels)
			tc.change(&cur)
			o := old
			if name == "NoGeneration" {
				o.Generation = 0
			}
			if got := StatusOnly(o, cur); got != tc.want {
				t.Errorf("%s\nStatusOnly() = %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

func TestMetaOf(t *testing.T) {
	yes := true
	gvk := schema.GroupVersionKind{Group: "nop.crossplane.io", Version: "v1alpha1", Kind: "NopResource"}
	pom := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "x", UID: "u1", ResourceVersion: "7", Generation: 2, Labels: map[string]string{"a": "b"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.org/v1", Kind: "XParent", Name: "p", UID: "p1", Controller: &yes}},
	}}
	want := Meta{
		GVK: gvk, Name: "x", UID: "u1", ResourceVersion: "7", Generation: 2, Labels: map[string]string{"a": "b"},
		Controller: &metav1.OwnerReference{APIVersion: "example.org/v1", Kind: "XParent", Name: "p", UID: "p1", Controller: &yes},
	}
	for name, obj := range map[string]any{
		"Object":    pom,
		"Tombstone": cache.DeletedFinalStateUnknown{Key: "x", Obj: pom},
	} {
		got, err := MetaOf(gvk, obj)
		if err != nil {
			t.Fatalf("%s: MetaOf(): %v", name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: MetaOf(): -want, +got:\n%s", name, diff)
		}
	}
	if _, err := MetaOf(gvk, "not an object"); err == nil {
		t.Error("MetaOf(string): want error, got nil")
	}
}

func TestClaimRef(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   *Reference
	}{
		"Legacy": {
			reason: "A legacy XR's claimRef is under spec.",
			in:     "spec: {claimRef: {apiVersion: example.org/v1, kind: Database, namespace: ns, name: db}}",
			want:   &Reference{APIVersion: "example.org/v1", Kind: "Database", Namespace: "ns", Name: "db"},
		},
		"Modern": {
			reason: "A modern XR's claimRef is under spec.crossplane.",
			in:     "spec: {crossplane: {claimRef: {apiVersion: example.org/v1, kind: Database, namespace: ns, name: db}}}",
			want:   &Reference{APIVersion: "example.org/v1", Kind: "Database", Namespace: "ns", Name: "db"},
		},
		"None":       {reason: "An unclaimed XR has no claimRef.", in: "spec: {}"},
		"Incomplete": {reason: "A claimRef without a name names nothing.", in: "spec: {claimRef: {kind: Database}}"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ClaimRef(parse(t, tc.in))); diff != "" {
				t.Errorf("%s\nClaimRef(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestKinds(t *testing.T) {
	nop := schema.GroupVersionKind{Group: "nop.crossplane.io", Version: "v1alpha1", Kind: "NopResource"}
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	cases := map[string]struct {
		reason string
		read   func(*unstructured.Unstructured) []schema.GroupVersionKind
		in     string
		want   []schema.GroupVersionKind
	}{
		"ResourceRefs": {
			reason: "An XR's resourceRefs name kinds, sorted, without duplicates or malformed entries.",
			read:   ResourceKinds,
			in: `spec:
  resourceRefs:
  - {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, name: a}
  - {apiVersion: v1, kind: ConfigMap, name: b}
  - {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, name: c}
  - {apiVersion: "a/b/c", kind: Bad}
  - {kind: NoVersion}
  crossplane:
    resourceRefs: [{apiVersion: v1, kind: ConfigMap}]
`,
			want: []schema.GroupVersionKind{cm, nop},
		},
		"NoResourceRefs": {
			reason: "An XR that composed nothing names no kinds.",
			read:   ResourceKinds,
			in:     "spec: {}",
		},
		"Templates": {
			reason: "A Composition's templates and P&T pipeline inputs name kinds; templates without a base are skipped.",
			read:   TemplateKinds,
			in: `spec:
  resources:
  - {name: a, base: {apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource}}
  - {name: b}
  pipeline:
  - {step: s1, input: {resources: [{name: c, base: {apiVersion: v1, kind: ConfigMap}}]}}
  - {step: s2, input: {apiVersion: other/v1, kind: Input}}
  - {step: s3}
`,
			want: []schema.GroupVersionKind{cm, nop},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.read(parse(t, tc.in)), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDefinitionOf(t *testing.T) {
	v := func(version, kind string) *schema.GroupVersionKind {
		return &schema.GroupVersionKind{Group: "example.org", Version: version, Kind: kind}
	}
	cases := map[string]struct {
		reason  string
		in      string
		want    Definition
		wantErr bool
	}{
		"Referenceable": {
			reason: "The XR and claim kinds are at the referenceable version.",
			in: `spec:
  group: example.org
  names: {kind: XDatabase}
  claimNames: {kind: Database}
  versions: [{name: v1alpha1, served: true}, {name: v1, served: true, referenceable: true}]
`,
			want: Definition{XR: *v("v1", "XDatabase"), Claim: v("v1", "Database")},
		},
		"NoClaims": {
			reason: "Without claimNames there is no claim kind; without a referenceable version the first served one is used.",
			in: `spec:
  group: example.org
  names: {kind: XDatabase}
  versions: [{name: v2, served: false}, {name: v1, served: true}]
`,
			want: Definition{XR: *v("v1", "XDatabase")},
		},
		"NoVersions": {
			reason:  "An XRD without versions defines nothing.",
			in:      "spec: {group: example.org, names: {kind: XDatabase}}",
			wantErr: true,
		},
		"NoGroup": {
			reason:  "An XRD without a group defines nothing.",
			in:      "spec: {names: {kind: XDatabase}, versions: [{name: v1}]}",
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := DefinitionOf(parse(t, tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nDefinitionOf(): want error %v, got %v", tc.reason, tc.wantErr, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nDefinitionOf(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCRDOf(t *testing.T) {
	in := `metadata: {name: xdatabases.example.org}
spec:
  group: example.org
  names: {kind: XDatabase, plural: xdatabases}
  scope: Cluster
  versions: [{name: v1alpha1, served: false}, {name: v1, served: true}]
status:
  conditions: [{type: NamesAccepted, status: "True"}, {type: Established, status: "True"}]
`
	got, err := CRDOf(parse(t, in))
	if err != nil {
		t.Fatalf("CRDOf(): %v", err)
	}
	want := CRD{Group: "example.org", Kind: "XDatabase", Plural: "xdatabases", Served: []string{"v1"}, Established: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CRDOf(): -want, +got:\n%s", diff)
	}
	if !got.Serves("v1") || got.Serves("v1alpha1") {
		t.Errorf("Serves(): want v1 served and v1alpha1 not")
	}
	got.Established = false
	if got.Serves("v1") {
		t.Errorf("Serves(): a CRD that is not established serves nothing")
	}
	if _, err := CRDOf(parse(t, "metadata: {name: broken}\nspec: {group: g}")); err == nil {
		t.Error("CRDOf(broken): want error, got nil")
	}
}

func TestTurnedReady(t *testing.T) {
	cases := map[string]struct {
		reason   string
		old, cur Meta
		want     bool
	}{
		"FalseToTrue":   {reason: "A Ready condition turning True is readiness progress.", old: Meta{UID: "u", Ready: "False"}, cur: Meta{UID: "u", Ready: "True"}, want: true},
		"NoneToTrue":    {reason: "A first Ready condition that is True is readiness progress.", old: Meta{UID: "u"}, cur: Meta{UID: "u", Ready: "True"}, want: true},
		"TrueToTrue":    {reason: "Another change of a Ready object is not.", old: Meta{UID: "u", Ready: "True"}, cur: Meta{UID: "u", Ready: "True"}},
		"TrueToFalse":   {reason: "Losing readiness is not progress.", old: Meta{UID: "u", Ready: "True"}, cur: Meta{UID: "u", Ready: "False"}},
		"FalseToFalse":  {reason: "A change that leaves the object unready is not.", old: Meta{UID: "u", Ready: "False"}, cur: Meta{UID: "u", Ready: "False"}},
		"OtherObject":   {reason: "A new object under the same name is a creation, not a turn.", old: Meta{UID: "u", Ready: "False"}, cur: Meta{UID: "v", Ready: "True"}},
		"MetadataOnly":  {reason: "Kinds cached without their status never turn Ready.", old: Meta{UID: "u"}, cur: Meta{UID: "u"}},
		"XRFromSummary": {reason: "An XR's readiness comes from its status summary.", old: metaOf(t, "False/1/2"), cur: metaOf(t, "True/1/3"), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := TurnedReady(tc.old, tc.cur); got != tc.want {
				t.Errorf("%s\nTurnedReady(...) = %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

// metaOf returns the Meta of a cached XR with the given status summary.
func metaOf(t *testing.T, summary string) Meta {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetUID("u")
	u.SetAnnotations(map[string]string{AnnotationStatus: summary})
	m, err := MetaOf(schema.GroupVersionKind{Kind: "XR"}, u)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
