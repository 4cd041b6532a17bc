package object

import (
	"strings"
	"testing"
)

func TestPropagated(t *testing.T) {
	xr := `
apiVersion: example.org/v1
kind: XDatabase
metadata:
  name: db-x7k2p
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
	claim := `
apiVersion: example.org/v1
kind: Database
metadata:
  name: db
  namespace: ns
  annotations: {crossplane.io/external-name: ext}
spec:
  size: large
  compositionRef: {name: c}
  compositionRevisionRef: {name: c-1}
  resourceRef: {apiVersion: example.org/v1, kind: XDatabase, name: db-x7k2p}
  writeConnectionSecretToRef: {name: db-conn}
`
	cases := map[string]struct {
		reason    string
		xr, claim string
		want      bool // the summaries are equal
	}{
		"Same": {
			reason: "A claim that holds the XR's Composition, revision and external name has nothing to copy; the XR's other fields do not count.",
			xr:     xr, claim: claim, want: true,
		},
		"Revision": {
			reason: "A revision the claim does not hold is copied.",
			xr:     strings.Replace(xr, "c-1", "c-2", 1), claim: claim,
		},
		"RevisionMissing": {
			reason: "A claim without the XR's revision gets it.",
			xr:     xr, claim: strings.Replace(claim, "  compositionRevisionRef: {name: c-1}\n", "", 1),
		},
		"Selector": {
			reason: "A revision selector the claim lacks is copied.",
			xr:     xr + "  compositionRevisionSelector: {matchLabels: {channel: stable}}\n", claim: claim,
		},
		"ExternalName": {
			reason: "An external name the claim does not hold is copied.",
			xr:     strings.Replace(xr, "external-name: ext", "external-name: other", 1), claim: claim,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			x := cachedMeta(t, ShapeXR, parse(t, tc.xr).GroupVersionKind(), parse(t, tc.xr))
			c := cachedMeta(t, ShapeClaim, parse(t, tc.claim).GroupVersionKind(), parse(t, tc.claim))
			if x.Propagated == "" || c.Propagated == "" {
				t.Fatalf("no summary: XR %q, claim %q", x.Propagated, c.Propagated)
			}
			if got := x.Propagated == c.Propagated; got != tc.want {
				t.Errorf("%s\nsummaries equal: got %t, want %t", tc.reason, got, tc.want)
			}
		})
	}

	t.Run("Cached", func(t *testing.T) {
		// Transform is idempotent: the summary of a cached XR, whose
		// shape keeps only some of the fields, stays.
		u := parse(t, xr)
		once, err := Transform(ShapeXR)(u)
		if err != nil {
			t.Fatal(err)
		}
		twice, err := Transform(ShapeXR)(once)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := MetaOf(u.GroupVersionKind(), once)
		b, _ := MetaOf(u.GroupVersionKind(), twice)
		if a.Propagated == "" || a.Propagated != b.Propagated {
			t.Errorf("Transform() of a cached XR changed its summary from %q to %q", a.Propagated, b.Propagated)
		}
	})
}
