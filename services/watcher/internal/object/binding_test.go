package object

import (
	"strings"
	"testing"
)

func TestBindingChanged(t *testing.T) {
	base := `
apiVersion: example.org/v1
kind: XDatabase
metadata:
  name: x
  generation: 1
  labels: {crossplane.io/claim-name: db}
  annotations: {crossplane.io/external-name: ext}
spec:
  size: large
  claimRef: {apiVersion: example.org/v1, kind: Database, namespace: ns, name: db}
  compositionRef: {name: c}
  compositionRevisionRef: {name: c-1}
  compositionUpdatePolicy: Automatic
  resourceRefs: [{apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, name: a}]
  writeConnectionSecretToRef: {namespace: loom-system, name: uid}
`
	cases := map[string]struct {
		reason   string
		old, cur string
		want     bool
	}{
		"RendererFields": {
			reason: "The renderer's resourceRefs and connection Secret reference are not read back to the claim.",
			old:    strings.Replace(strings.Replace(base, "  resourceRefs: [{apiVersion: nop.crossplane.io/v1alpha1, kind: NopResource, name: a}]\n", "", 1), "  writeConnectionSecretToRef: {namespace: loom-system, name: uid}\n", "", 1),
			cur:    strings.Replace(base, "generation: 1", "generation: 2", 1),
		},
		"Revision": {
			reason: "A new revision (the Automatic update policy) is read back to the claim.",
			old:    base,
			cur:    strings.Replace(base, "c-1", "c-2", 1),
			want:   true,
		},
		"FirstRevision": {
			reason: "A first revision is read back to the claim.",
			old:    strings.Replace(base, "  compositionRevisionRef: {name: c-1}\n", "", 1),
			cur:    base,
			want:   true,
		},
		"Selector": {
			reason: "A revision selector is read back to the claim.",
			old:    base,
			cur:    base + "  compositionRevisionSelector: {matchLabels: {channel: stable}}\n",
			want:   true,
		},
		"Policy": {
			reason: "The update policy decides whether the revision is read back.",
			old:    base,
			cur:    strings.Replace(base, "Automatic", "Manual", 1),
			want:   true,
		},
		"ExternalName": {
			reason: "The external name is read back to the claim.",
			old:    base,
			cur:    strings.Replace(base, "external-name: ext", "external-name: other", 1),
			want:   true,
		},
		"Labels": {
			reason: "Labels the binder applies from the claim may have drifted.",
			old:    base,
			cur:    strings.Replace(base, "claim-name: db", "claim-name: other", 1),
			want:   true,
		},
		"ClaimRef": {
			reason: "Another claim reference is a new binding.",
			old:    base,
			cur:    strings.Replace(base, "name: db}", "name: db2}", 1),
			want:   true,
		},
		"ModernLayout": {
			reason: "The same fields under spec.crossplane count.",
			old:    base + "  crossplane: {compositionRevisionRef: {name: c-1}}\n",
			cur:    base + "  crossplane: {compositionRevisionRef: {name: c-2}}\n",
			want:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old, cur := metaOfXR(t, parse(t, tc.old)), metaOfXR(t, parse(t, tc.cur))
			if got := BindingChanged(old, cur); got != tc.want {
				t.Errorf("%s\nBindingChanged(): got %t, want %t", tc.reason, got, tc.want)
			}
		})
	}

	t.Run("Cached", func(t *testing.T) {
		// Transform is idempotent: the summary of a cached XR, whose
		// shape keeps only some of the fields, stays.
		u := parse(t, base)
		once, err := Transform(ShapeXR)(u)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := MetaOf(u.GroupVersionKind(), once)
		twice, err := Transform(ShapeXR)(once)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := MetaOf(u.GroupVersionKind(), twice)
		if a.Binding == "" || a.Binding != b.Binding {
			t.Errorf("Transform() of a cached XR changed its binding summary from %q to %q", a.Binding, b.Binding)
		}
	})

	t.Run("Unknown", func(t *testing.T) {
		if !BindingChanged(Meta{}, metaOfXR(t, parse(t, base))) {
			t.Errorf("Without a summary of the old XR the binding counts as changed")
		}
	})
}
