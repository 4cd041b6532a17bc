package object

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestStatusChanges(t *testing.T) {
	base := `
apiVersion: example.org/v1
kind: XDatabase
metadata: {name: x, annotations: {a: b}}
status:
  tier: gold
  loom: {resources: 3}
  claimConditionTypes: [DatabaseReady]
  connectionDetails: {lastPublishedTime: "2026-01-01T00:00:00Z"}
  watchedResourceRefs: [{apiVersion: v1, kind: ConfigMap, name: c}]
  conditions:
  - {type: Synced, status: "True", reason: ReconcileSuccess}
  - {type: Ready, status: "False", reason: Creating, message: "1 of 3 ready"}
  - {type: DatabaseReady, status: "False", reason: Waiting}
  - {type: ReferencesResolved, status: "False", reason: Waiting}
`
	cases := map[string]struct {
		reason string
		base   string // the old object; the test's base when empty
		change string // a merge patch of the status
		want   StatusChange
	}{
		"Same": {
			reason: "The same status is no change.",
			change: `{}`,
		},
		"PatchedField": {
			reason: "A field that patches write concerns the renderer and the claim's mirror.",
			change: `{"tier": "silver"}`,
			want:   StatusPatchable | StatusClaim,
		},
		"NewField": {
			reason: "A new field that patches write concerns the renderer and the claim's mirror.",
			change: `{"endpoint": "db.example.org"}`,
			want:   StatusPatchable | StatusClaim,
		},
		"Ready": {
			reason: "Readiness concerns the secrets service and the claim's mirror; a Secret published before counts as published once the XR is Ready.",
			change: `{"conditions": [{"type": "Synced", "status": "True", "reason": "ReconcileSuccess"}, {"type": "Ready", "status": "True", "reason": "Available"}, {"type": "DatabaseReady", "status": "False", "reason": "Waiting"}, {"type": "ReferencesResolved", "status": "False", "reason": "Waiting"}]}`,
			want:   StatusReady | StatusReadyTrue | StatusClaim | StatusPublished,
		},
		"NotReadyAnymore": {
			reason: "A Ready XR turning not Ready concerns the secrets service and the claim's mirror.",
			base:   strings.Replace(base, `{type: Ready, status: "False", reason: Creating, message: "1 of 3 ready"}`, `{type: Ready, status: "True", reason: Available}`, 1),
			change: `{"conditions": [{"type": "Synced", "status": "True", "reason": "ReconcileSuccess"}, {"type": "Ready", "status": "False", "reason": "Unavailable"}, {"type": "DatabaseReady", "status": "False", "reason": "Waiting"}, {"type": "ReferencesResolved", "status": "False", "reason": "Waiting"}]}`,
			want:   StatusReady | StatusReadyTrue | StatusClaim | StatusPublished,
		},
		"FirstNotReady": {
			reason: "A first Ready condition that says the XR is not Ready (\"Creating\") concerns the claim's mirror only: the secrets service waits for True.",
			base:   strings.Replace(base, "  - {type: Ready, status: \"False\", reason: Creating, message: \"1 of 3 ready\"}\n", "", 1),
			change: `{"conditions": [{"type": "Synced", "status": "True", "reason": "ReconcileSuccess"}, {"type": "Ready", "status": "False", "reason": "Creating"}, {"type": "DatabaseReady", "status": "False", "reason": "Waiting"}, {"type": "ReferencesResolved", "status": "False", "reason": "Waiting"}]}`,
			want:   StatusReady | StatusClaim,
		},
		"Unknown": {
			reason: "Not Ready in another way (Unknown after False) concerns the claim's mirror only.",
			change: `{"conditions": [{"type": "Synced", "status": "True", "reason": "ReconcileSuccess"}, {"type": "Ready", "status": "Unknown", "reason": "Checking"}, {"type": "DatabaseReady", "status": "False", "reason": "Waiting"}, {"type": "ReferencesResolved", "status": "False", "reason": "Waiting"}]}`,
			want:   StatusReady | StatusClaim,
		},
		"ReadyMessage": {
			reason: "The message of a Ready condition whose status stays concerns no one.",
			change: `{"conditions": [{"type": "Synced", "status": "True", "reason": "ReconcileSuccess"}, {"type": "Ready", "status": "False", "reason": "Creating", "message": "2 of 3 ready"}, {"type": "DatabaseReady", "status": "False", "reason": "Waiting"}, {"type": "ReferencesResolved", "status": "False", "reason": "Waiting"}]}`,
		},
		"MirroredCondition": {
			reason: "A condition listed in claimConditionTypes concerns the claim's mirror only.",
			change: `{"conditions": [{"type": "Synced", "status": "True", "reason": "ReconcileSuccess"}, {"type": "Ready", "status": "False", "reason": "Creating", "message": "1 of 3 ready"}, {"type": "DatabaseReady", "status": "True", "reason": "Available"}, {"type": "ReferencesResolved", "status": "False", "reason": "Waiting"}]}`,
			want:   StatusClaim,
		},
		"OtherCondition": {
			reason: "A condition no one mirrors (the binder's own) concerns no one.",
			change: `{"conditions": [{"type": "Synced", "status": "True", "reason": "ReconcileSuccess"}, {"type": "Ready", "status": "False", "reason": "Creating", "message": "1 of 3 ready"}, {"type": "DatabaseReady", "status": "False", "reason": "Waiting"}, {"type": "ReferencesResolved", "status": "True", "reason": "Resolved"}]}`,
		},
		"ReferencesUnresolved": {
			reason: "The binder's ReferencesResolved turning False from none concerns the binder.",
			base:   strings.Replace(base, "  - {type: ReferencesResolved, status: \"False\", reason: Waiting}\n", "", 1),
			change: `{"conditions": [{"type": "Synced", "status": "True", "reason": "ReconcileSuccess"}, {"type": "Ready", "status": "False", "reason": "Creating", "message": "1 of 3 ready"}, {"type": "DatabaseReady", "status": "False", "reason": "Waiting"}, {"type": "ReferencesResolved", "status": "False", "reason": "Waiting"}]}`,
			want:   StatusUnresolved,
		},
		"ReferencesUnresolvedAgain": {
			reason: "The binder's ReferencesResolved turning False from True concerns the binder.",
			base:   strings.Replace(base, `{type: ReferencesResolved, status: "False", reason: Waiting}`, `{type: ReferencesResolved, status: "True", reason: Resolved}`, 1),
			change: `{"conditions": [{"type": "Synced", "status": "True", "reason": "ReconcileSuccess"}, {"type": "Ready", "status": "False", "reason": "Creating", "message": "1 of 3 ready"}, {"type": "DatabaseReady", "status": "False", "reason": "Waiting"}, {"type": "ReferencesResolved", "status": "False", "reason": "ReferenceError"}]}`,
			want:   StatusUnresolved,
		},
		"ReferencesStillUnresolved": {
			reason: "Another reason for unresolved references is no news to the binder, which wrote it.",
			change: `{"conditions": [{"type": "Synced", "status": "True", "reason": "ReconcileSuccess"}, {"type": "Ready", "status": "False", "reason": "Creating", "message": "1 of 3 ready"}, {"type": "DatabaseReady", "status": "False", "reason": "Waiting"}, {"type": "ReferencesResolved", "status": "Unknown", "reason": "ReferenceError"}]}`,
		},
		"ConnectionDetails": {
			reason: "The secrets service's connectionDetails concern no one.",
			change: `{"connectionDetails": {"lastPublishedTime": "2026-02-01T00:00:00Z"}}`,
		},
		"Summary": {
			reason: "Loom's summary is copied to the claim; the renderer wrote it.",
			change: `{"loom": {"resources": 4}}`,
			want:   StatusClaim,
		},
		"Watches": {
			reason: "The renderer's watch list concerns no one.",
			change: `{"watchedResourceRefs": []}`,
		},
		"MirroredTypes": {
			reason: "A changed list of mirrored condition types concerns the claim's mirror.",
			change: `{"claimConditionTypes": ["DatabaseReady", "ReferencesResolved"]}`,
			want:   StatusClaim,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			from := base
			if tc.base != "" {
				from = tc.base
			}
			old := parse(t, from)
			cur := parse(t, from)
			patch := parse(t, "status: "+tc.change)
			st := cur.Object["status"].(map[string]any)                 //nolint:forcetypeassert // Parsed above.
			for k, v := range patch.Object["status"].(map[string]any) { //nolint:forcetypeassert // Parsed above.
				st[k] = v
			}
			got := StatusChanges(metaOfXR(t, old), metaOfXR(t, cur))
			if got != tc.want {
				t.Errorf("%s\nStatusChanges(): got %06b, want %06b", tc.reason, got, tc.want)
			}
		})
	}

	t.Run("PublishedWhileReady", func(t *testing.T) {
		// While the XR is Ready, a new time of its connection Secret is
		// copied to the claim by the binder; before, it concerns no one
		// (case ConnectionDetails), and Ready brings it along.
		ready := strings.Replace(base, `{type: Ready, status: "False", reason: Creating, message: "1 of 3 ready"}`, `{type: Ready, status: "True", reason: Available}`, 1)
		old := parse(t, ready)
		cur := parse(t, strings.Replace(ready, "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", 1))
		if got := StatusChanges(metaOfXR(t, old), metaOfXR(t, cur)); got != StatusClaim|StatusPublished {
			t.Errorf("A Ready XR's new lastPublishedTime is a publication for the claim's mirror: got %05b, want %05b", got, StatusClaim|StatusPublished)
		}
	})

	t.Run("FirstStatus", func(t *testing.T) {
		// The renderer's first status may hold nothing but a Synced
		// condition (an error); the claim's first status waits for it.
		old := parse(t, "apiVersion: example.org/v1\nkind: XDatabase\nmetadata: {name: x}\n")
		cur := parse(t, "apiVersion: example.org/v1\nkind: XDatabase\nmetadata: {name: x}\nstatus: {conditions: [{type: Synced, status: \"False\", reason: ReconcileError}]}\n")
		if got := StatusChanges(metaOfXR(t, old), metaOfXR(t, cur)); got != StatusClaim {
			t.Errorf("An XR's first status concerns the claim's mirror: got %03b, want %03b", got, StatusClaim)
		}
	})

	t.Run("Unknown", func(t *testing.T) {
		if got := StatusChanges(Meta{}, metaOfXR(t, parse(t, base))); got != StatusAll {
			t.Errorf("Without a summary of the old status every part counts as changed: got %03b, want %03b", got, StatusAll)
		}
	})
}

// metaOfXR returns the watcher's metadata of an XR, as cached.
func metaOfXR(t *testing.T, u *unstructured.Unstructured) Meta {
	t.Helper()
	return cachedMeta(t, ShapeXR, u.GroupVersionKind(), u)
}

// cachedMeta returns the watcher's metadata of an object of kind gvk, as
// cached with the given shape.
func cachedMeta(t *testing.T, s Shape, gvk schema.GroupVersionKind, obj any) Meta {
	t.Helper()
	cached, err := Transform(s)(obj)
	if err != nil {
		t.Fatalf("Transform(): %v", err)
	}
	m, err := MetaOf(gvk, cached)
	if err != nil {
		t.Fatalf("MetaOf(): %v", err)
	}
	return m
}

func TestStatusFieldsChanged(t *testing.T) {
	base := `
apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata: {name: n}
status:
  atProvider: {fields: {selfLink: a}}
  conditions:
  - {type: Synced, status: "True", reason: ReconcileSuccess}
  - {type: Ready, status: "False", reason: Creating}
`
	cases := map[string]struct {
		reason   string
		old, cur string
		unknown  bool // the old version was not cached in full
		want     bool
	}{
		"Same": {
			reason: "The same status is no change.",
			old:    base, cur: base,
		},
		"ConditionsOnly": {
			reason: "A change of the conditions alone (a provider's Ready) changes no other field.",
			old:    base, cur: strings.Replace(base, `{type: Ready, status: "False", reason: Creating}`, `{type: Ready, status: "True", reason: Available}`, 1),
		},
		"FirstConditions": {
			reason: "A first status of conditions alone is no change of the other fields: they are as absent as before.",
			old:    "apiVersion: nop.crossplane.io/v1alpha1\nkind: NopResource\nmetadata: {name: n}\n",
			cur:    "apiVersion: nop.crossplane.io/v1alpha1\nkind: NopResource\nmetadata: {name: n}\nstatus: {conditions: [{type: Ready, status: \"True\"}]}\n",
		},
		"AtProvider": {
			reason: "A changed field outside the conditions is what a FromFieldPath connection detail may read.",
			old:    base, cur: strings.Replace(base, "selfLink: a", "selfLink: b", 1),
			want: true,
		},
		"Unknown": {
			reason: "A version not cached in full may have changed anything.",
			old:    base, cur: base, unknown: true,
			want: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old, cur := nopMeta(t, tc.old), nopMeta(t, tc.cur)
			if tc.unknown {
				old.StatusFields = ""
			}
			if got := StatusFieldsChanged(old, cur); got != tc.want {
				t.Errorf("%s\nStatusFieldsChanged(): got %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

// nopMeta returns the Meta of a NopResource given in YAML as the watcher
// caches it (transformed twice: a cached object keeps its summaries).
func nopMeta(t *testing.T, y string) Meta {
	t.Helper()
	got, err := Transform(0)(parse(t, y))
	if err != nil {
		t.Fatalf("Transform(): %v", err)
	}
	again, err := Transform(0)(got)
	if err != nil {
		t.Fatalf("Transform() again: %v", err)
	}
	m, err := MetaOf(schema.GroupVersionKind{Group: "nop.crossplane.io", Version: "v1alpha1", Kind: "NopResource"}, again)
	if err != nil {
		t.Fatalf("MetaOf(): %v", err)
	}
	return m
}

func TestReadyConditionChanged(t *testing.T) {
	base := `
apiVersion: nop.crossplane.io/v1alpha1
kind: NopResource
metadata: {name: n}
status:
  atProvider: {fields: {selfLink: a}}
  conditions:
  - {type: Synced, status: "True", reason: ReconcileSuccess, observedGeneration: 1}
  - {type: Ready, status: "False", reason: Creating, message: waiting for the network}
`
	cases := map[string]struct {
		reason   string
		old, cur string
		unknown  bool // the old version was not cached in full
		want     bool
	}{
		"Same":       {reason: "The same status is no change.", old: base, cur: base},
		"AtProvider": {reason: "What a provider writes under atProvider leaves the Ready condition as it was.", old: base, cur: strings.Replace(base, "selfLink: a", "selfLink: b", 1)},
		"Synced":     {reason: "So does a change of another condition.", old: base, cur: strings.Replace(base, "observedGeneration: 1", "observedGeneration: 2", 1)},
		"Status": {
			reason: "A Ready condition turning True changes it.",
			old:    base, cur: strings.Replace(base, `status: "False", reason: Creating`, `status: "True", reason: Creating`, 1),
			want: true,
		},
		"Reason": {
			reason: "So does its reason, which the XR's summary of resources not Ready shows.",
			old:    base, cur: strings.Replace(base, "reason: Creating", "reason: Unavailable", 1),
			want: true,
		},
		"Message": {
			reason: "And its message.",
			old:    base, cur: strings.Replace(base, "waiting for the network", "waiting for the subnet", 1),
			want: true,
		},
		"Unknown": {
			reason: "A version not cached in full may have changed anything.",
			old:    base, cur: base, unknown: true,
			want: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old, cur := nopMeta(t, tc.old), nopMeta(t, tc.cur)
			if tc.unknown {
				old.ReadyCondition = ""
			}
			if got := ReadyConditionChanged(old, cur); got != tc.want {
				t.Errorf("%s\nReadyConditionChanged(): got %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

func TestNotReady(t *testing.T) {
	cases := map[string]struct {
		reason      string
		annotations map[string]string
		want        bool
	}{
		"Unknown":   {reason: "Without a status summary readiness is not known.", annotations: nil},
		"Ready":     {reason: "A Ready XR is Ready.", annotations: map[string]string{AnnotationStatus: "True/1/2/3"}},
		"False":     {reason: "Ready False is not Ready.", annotations: map[string]string{AnnotationStatus: "False/1/2/"}, want: true},
		"NoStatus":  {reason: "An XR without a Ready condition is not Ready.", annotations: map[string]string{AnnotationStatus: "/1/2/"}, want: true},
		"UnknownRC": {reason: "Ready Unknown is not Ready.", annotations: map[string]string{AnnotationStatus: "Unknown/1/2/"}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := NotReady(tc.annotations); got != tc.want {
				t.Errorf("%s\nNotReady(): got %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

func TestUnresolved(t *testing.T) {
	xr := func(conds string) map[string]string {
		u := parse(t, "apiVersion: example.org/v1\nkind: XDatabase\nmetadata: {name: x}\nstatus: {conditions: "+conds+"}\n")
		return map[string]string{AnnotationStatus: statusSummary(u)}
	}
	cases := map[string]struct {
		reason      string
		annotations map[string]string
		want        bool
	}{
		"Unknown":  {reason: "Without a status summary it is not known.", annotations: nil},
		"Old":      {reason: "A summary of four parts (an older watcher's) says nothing of references.", annotations: map[string]string{AnnotationStatus: "True/1/2/3"}},
		"None":     {reason: "An XR without the condition has no reference waiting.", annotations: xr(`[{type: Ready, status: "True"}]`)},
		"Resolved": {reason: "ReferencesResolved True says they resolved.", annotations: xr(`[{type: ReferencesResolved, status: "True"}]`)},
		"Waiting":  {reason: "ReferencesResolved False says one waits.", annotations: xr(`[{type: ReferencesResolved, status: "False"}]`), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Unresolved(tc.annotations); got != tc.want {
				t.Errorf("%s\nUnresolved(): got %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}
