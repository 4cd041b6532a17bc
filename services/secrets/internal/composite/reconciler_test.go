package composite

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loomxr/loom/pkg/condition"
	"github.com/loomxr/loom/pkg/event"
	"github.com/loomxr/loom/pkg/reconcile"
	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/secrets/internal/definition"
	"github.com/loomxr/loom/services/secrets/internal/fake"
	"github.com/loomxr/loom/services/secrets/internal/secret"
	"github.com/loomxr/loom/services/secrets/internal/tracker"
)

var (
	xrGVK    = schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "XDB"}
	claimGVK = schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "DB"}
	nopGVK   = schema.GroupVersionKind{Group: "nop.example.org", Version: "v1", Kind: "Nop"}
)

// testTracker records what is tracked; its cache is the cluster's.
type testTracker struct {
	*fake.Cluster
	tracked   map[types.UID]tracker.Deps
	handOvers int
	// lost, when set, drops hand-overs: a renderer that has not written
	// them (yet).
	lost []*eventsv1.Publication
	drop bool
}

func (t *testTracker) Track(xr tracker.Target, d tracker.Deps) { t.tracked[xr.UID] = d }

func (t *testTracker) Forget(uid types.UID) { delete(t.tracked, uid) }

// HandOver plays the renderer: it applies p to the XR's status as the
// renderer would (counted as fake.ApplyStatus), and counts the hand-over.
func (t *testTracker) HandOver(ctx context.Context, xr tracker.Target, _ string, p *eventsv1.Publication) error {
	t.handOvers++
	if t.drop {
		t.lost = append(t.lost, p)
		return nil
	}
	status := map[string]any{}
	if p.GetStatus() != "" {
		status["conditions"] = []any{map[string]any{"type": string(TypeConnectionDetailsReady), "status": p.GetStatus(), "reason": p.GetReason(), "message": p.GetMessage()}}
	}
	if p.GetLastPublishedTime() != nil {
		status["connectionDetails"] = map[string]any{"lastPublishedTime": p.GetLastPublishedTime().AsTime().UTC().Format(time.RFC3339)}
	}
	_, err := t.ApplyStatus(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": xr.GVK.GroupVersion().String(), "kind": xr.GVK.Kind, "metadata": map[string]any{"name": xr.Name}, "status": status,
	}})
	return err
}

// recorded is one Event.
type recorded struct{ Type, Reason, Message string }

const xrd = `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xdbs.example.org}
spec:
  group: example.org
  names: {kind: XDB, plural: xdbs}
  claimNames: {kind: DB, plural: dbs}
  connectionSecretKeys: [username, password, endpoint]
  versions: [{name: v1, served: true, referenceable: true}]
`

const revision = `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositionRevision
metadata: {name: db-abc, labels: {crossplane.io/composition-name: db}}
spec:
  revision: 1
  compositeTypeRef: {apiVersion: example.org/v1, kind: XDB}
  writeConnectionSecretsToNamespace: system
  resources:
  - name: server
    base: {apiVersion: nop.example.org/v1, kind: Nop}
    connectionDetails:
    - {name: password, fromConnectionSecretKey: pw}
    - {name: username, type: FromValue, value: admin}
    - {name: port, type: FromValue, value: "3306"}
  - name: rule
    base: {apiVersion: nop.example.org/v1, kind: Nop}
    connectionDetails:
    - {name: endpoint, fromFieldPath: status.endpoint}
`

const aggregating = `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositionRevision
metadata: {name: db-agg, labels: {crossplane.io/composition-name: db}}
spec:
  revision: 2
  compositeTypeRef: {apiVersion: example.org/v1, kind: XDB}
  writeConnectionSecretsToNamespace: system
  resources:
  - name: server
    base: {apiVersion: nop.example.org/v1, kind: Nop}
  - name: rule
    base: {apiVersion: nop.example.org/v1, kind: Nop, metadata: {annotations: {loom.dev/connection-secret-prefix: "rule-"}}}
  - name: replica
    base: {apiVersion: nop.example.org/v1, kind: Nop}
`

// world is an XR named db (UID xr-1) with a claim, two composed resources
// and the server's connection Secret.
func world(t *testing.T, c *fake.Cluster, rev string, ready bool, mutate ...func(xr *unstructured.Unstructured)) *unstructured.Unstructured {
	t.Helper()
	c.Add(xrd)
	c.Add(revision)
	c.Add(aggregating)
	status := "False"
	if ready {
		status = "True"
	}
	xr := c.Add(`
apiVersion: example.org/v1
kind: XDB
metadata: {name: db, uid: xr-1}
spec:
  compositionRevisionRef: {name: ` + rev + `}
  claimRef: {apiVersion: example.org/v1, kind: DB, namespace: team, name: db}
  resourceRefs:
  - {apiVersion: nop.example.org/v1, kind: Nop, name: db-server}
  - {apiVersion: nop.example.org/v1, kind: Nop, name: db-rule}
  - {apiVersion: nop.example.org/v1, kind: Nop, name: stranger}
status:
  conditions:
  - {type: Ready, status: "` + status + `", reason: Creating, lastTransitionTime: "2026-01-01T00:00:00Z"}
`)[0]
	for _, m := range mutate {
		m(xr)
	}
	c.Put(xr)
	c.Add(`
apiVersion: example.org/v1
kind: DB
metadata: {name: db, namespace: team, uid: claim-1}
spec:
  resourceRef: {apiVersion: example.org/v1, kind: XDB, name: db}
  writeConnectionSecretToRef: {name: db-conn}
---
apiVersion: nop.example.org/v1
kind: Nop
metadata:
  name: db-server
  uid: nop-1
  annotations: {crossplane.io/composition-resource-name: server}
  ownerReferences: [{apiVersion: example.org/v1, kind: XDB, name: db, uid: xr-1, controller: true}]
spec:
  writeConnectionSecretToRef: {namespace: system, name: server-conn}
---
apiVersion: nop.example.org/v1
kind: Nop
metadata:
  name: db-rule
  uid: nop-2
  annotations: {crossplane.io/composition-resource-name: rule}
  ownerReferences: [{apiVersion: example.org/v1, kind: XDB, name: db, uid: xr-1, controller: true}]
spec:
  writeConnectionSecretToRef: {namespace: system, name: rule-conn}
status:
  endpoint: db.example.org:3306
---
apiVersion: nop.example.org/v1
kind: Nop
metadata:
  name: stranger
  uid: nop-3
  annotations: {crossplane.io/composition-resource-name: server}
  ownerReferences: [{apiVersion: example.org/v1, kind: XDB, name: other, uid: xr-2, controller: true}]
spec:
  writeConnectionSecretToRef: {namespace: system, name: stranger-conn}
`)
	c.PutSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: "server-conn"}, Type: secret.TypeConnection,
		Data: map[string][]byte{"pw": []byte("s3cr3t"), "user": []byte("root")}})
	c.PutSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: "rule-conn"}, Type: secret.TypeConnection,
		Data: map[string][]byte{"user": []byte("rule-user"), "password": []byte("rule-pw")}})
	c.PutSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: "stranger-conn"}, Type: secret.TypeConnection,
		Data: map[string][]byte{"password": []byte("not-ours")}})
	return xr
}

func strs(m map[string][]byte) map[string]string {
	if m == nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

// xrCondition returns the XR's ConnectionDetailsReady condition as
// "status/reason: message", or "".
func xrCondition(c *fake.Cluster) string {
	xr := c.Object(xrGVK, "", "db")
	if xr == nil {
		return ""
	}
	got, ok := condition.Find(condition.Observed(xr), TypeConnectionDetailsReady)
	if !ok {
		return ""
	}
	return string(got.Status) + "/" + string(got.Reason) + ": " + got.Message
}

func TestReconcile(t *testing.T) {
	full := map[string]string{"username": "admin", "password": "s3cr3t", "endpoint": "db.example.org:3306"}
	type want struct {
		err        bool
		xrSecret   map[string]string
		claim      map[string]string
		condition  string
		published  bool
		events     []recorded
		calls      map[string]int
		againCalls map[string]int
	}
	cases := map[string]struct {
		reason string
		setup  func(t *testing.T, c *fake.Cluster)
		want   want
	}{
		"ReadyPublishesAndCopies": {
			reason: "A Ready XR gets its Secret (renamed key, FromValue, FromFieldPath; port filtered out, a stranger's resource ignored) and its claim a copy; handling it again writes nothing.",
			setup:  func(t *testing.T, c *fake.Cluster) { world(t, c, "db-abc", true) },
			want: want{
				xrSecret: full, claim: full, published: true,
				condition:  "True/Published: Connection Secret system/xr-1 is published",
				calls:      map[string]int{fake.Get: 7, fake.GetSecret: 1, fake.CreateSecret: 2, fake.ApplyStatus: 1},
				againCalls: map[string]int{fake.Get: 5},
			},
		},
		"CompleteBeforeReady": {
			reason: "A complete Secret is published before the XR is Ready; the claim gets nothing yet.",
			setup:  func(t *testing.T, c *fake.Cluster) { world(t, c, "db-abc", false) },
			want: want{
				xrSecret: full, published: true,
				condition:  "True/Published: Connection Secret system/xr-1 is published",
				calls:      map[string]int{fake.Get: 6, fake.GetSecret: 1, fake.CreateSecret: 1, fake.ApplyStatus: 1},
				againCalls: map[string]int{fake.Get: 4},
			},
		},
		"IncompleteWaits": {
			reason: "While keys are still coming and the XR is not Ready nothing is written, not even a condition.",
			setup: func(t *testing.T, c *fake.Cluster) {
				world(t, c, "db-abc", false)
				c.Delete(nopGVK, "", "db-rule")
			},
			want: want{
				calls:      map[string]int{fake.Get: 6, fake.GetSecret: 1},
				againCalls: map[string]int{fake.Get: 4},
			},
		},
		"ReadyIncomplete": {
			reason: "A Ready XR publishes what there is and says which keys it waits for.",
			setup: func(t *testing.T, c *fake.Cluster) {
				world(t, c, "db-abc", true)
				c.Delete(nopGVK, "", "db-rule")
			},
			want: want{
				xrSecret: map[string]string{"username": "admin", "password": "s3cr3t"}, claim: map[string]string{"username": "admin", "password": "s3cr3t"}, published: true,
				condition:  "False/WaitingForKeys: Connection Secret system/xr-1 waits for keys: endpoint",
				calls:      map[string]int{fake.Get: 7, fake.GetSecret: 1, fake.CreateSecret: 2, fake.ApplyStatus: 1},
				againCalls: map[string]int{fake.Get: 5},
			},
		},
		"MissingKey": {
			reason: "A key the XRD declares that the Composition cannot provide is reported on the XR and as an event, once.",
			setup: func(t *testing.T, c *fake.Cluster) {
				world(t, c, "db-abc", true)
				x := c.Add(strings.Replace(xrd, "[username, password, endpoint]", "[username, password, endpoint, ca.crt]", 1))[0]
				c.Put(x)
			},
			want: want{
				xrSecret: full, claim: full, published: true,
				condition:  `False/MissingKeys: CompositionRevision "db-abc" cannot provide the connection secret keys that CompositeResourceDefinition "xdbs.example.org" declares: ca.crt`,
				events:     []recorded{{event.TypeWarning, "MissingKeys", `CompositionRevision "db-abc" cannot provide the connection secret keys that CompositeResourceDefinition "xdbs.example.org" declares: ca.crt`}},
				calls:      map[string]int{fake.Get: 7, fake.GetSecret: 1, fake.CreateSecret: 2, fake.ApplyStatus: 1},
				againCalls: map[string]int{fake.Get: 5},
			},
		},
		"Aggregate": {
			reason: "A Composition without connection details publishes the union of the composed Secrets in template order, prefixed per template, and warns of each conflict once.",
			setup: func(t *testing.T, c *fake.Cluster) {
				world(t, c, "db-agg", true)
				x := c.Add(strings.Replace(xrd, "  connectionSecretKeys: [username, password, endpoint]\n", "", 1))[0]
				c.Put(x)
				c.PutSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: "rule-conn"}, Type: secret.TypeConnection,
					Data: map[string][]byte{"user": []byte("rule-user"), "pw": []byte("rule-pw")}})
				// A third resource whose Secret clashes with the server's.
				c.Add(`
apiVersion: nop.example.org/v1
kind: Nop
metadata:
  name: db-replica
  uid: nop-4
  annotations: {crossplane.io/composition-resource-name: replica}
  ownerReferences: [{apiVersion: example.org/v1, kind: XDB, name: db, uid: xr-1, controller: true}]
spec:
  writeConnectionSecretToRef: {namespace: system, name: replica-conn}
`)
				c.PutSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: "replica-conn"}, Type: secret.TypeConnection,
					Data: map[string][]byte{"pw": []byte("replica-pw")}})
				xr := c.Object(xrGVK, "", "db")
				refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "resourceRefs")
				refs = append(refs, map[string]any{"apiVersion": "nop.example.org/v1", "kind": "Nop", "name": "db-replica"})
				_ = unstructured.SetNestedSlice(xr.Object, refs, "spec", "resourceRefs")
				c.Put(xr)
			},
			want: want{
				xrSecret:   map[string]string{"pw": "replica-pw", "user": "root", "rule-user": "rule-user", "rule-pw": "rule-pw"},
				claim:      map[string]string{"pw": "replica-pw", "user": "root", "rule-user": "rule-user", "rule-pw": "rule-pw"},
				published:  true,
				condition:  "True/Published: Connection Secret system/xr-1 is published",
				events:     []recorded{{event.TypeWarning, ReasonKeyConflict, `connection secret key "pw" is held by the connection Secrets of "server", "replica"; "replica" wins (template order)`}},
				calls:      map[string]int{fake.Get: 8, fake.GetSecret: 3, fake.CreateSecret: 2, fake.ApplyStatus: 1},
				againCalls: map[string]int{fake.Get: 6},
			},
		},
		"ExplicitRef": {
			reason: "The XR's own writeConnectionSecretToRef wins over the Composition's namespace.",
			setup: func(t *testing.T, c *fake.Cluster) {
				world(t, c, "db-abc", false, func(xr *unstructured.Unstructured) {
					_ = unstructured.SetNestedStringMap(xr.Object, map[string]string{"name": "db-conn", "namespace": "elsewhere"}, "spec", "writeConnectionSecretToRef")
				})
			},
			want: want{
				published:  true,
				condition:  "True/Published: Connection Secret elsewhere/db-conn is published",
				calls:      map[string]int{fake.Get: 6, fake.GetSecret: 1, fake.CreateSecret: 1, fake.ApplyStatus: 1},
				againCalls: map[string]int{fake.Get: 4},
			},
		},
		"NoConnectionSecret": {
			reason: "An XR whose Composition names no namespace and that names no Secret gets nothing at all.",
			setup: func(t *testing.T, c *fake.Cluster) {
				world(t, c, "db-abc", true)
				c.Add(strings.Replace(revision, "  writeConnectionSecretsToNamespace: system\n", "", 1))
			},
			want: want{
				calls:      map[string]int{fake.Get: 3},
				againCalls: map[string]int{fake.Get: 1},
			},
		},
		"NotControllable": {
			reason: "An XR Secret that another object controls is not written; the XR says why, once.",
			setup: func(t *testing.T, c *fake.Cluster) {
				world(t, c, "db-abc", true)
				yes := true
				c.PutSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: "xr-1",
					OwnerReferences: []metav1.OwnerReference{{Kind: "Thing", Name: "thing", UID: "thing-1", Controller: &yes}}}, Type: secret.TypeConnection})
			},
			want: want{
				condition:  "False/PublishFailed: cannot establish control of existing connection Secret system/xr-1: it is controlled by Thing \"thing\"",
				events:     []recorded{{event.TypeWarning, "PublishFailed", "cannot establish control of existing connection Secret system/xr-1: it is controlled by Thing \"thing\""}},
				calls:      map[string]int{fake.Get: 6, fake.GetSecret: 2, fake.ApplyStatus: 1},
				againCalls: map[string]int{fake.Get: 4, fake.GetSecret: 1},
			},
		},
		"Gone": {
			reason: "An XR that is gone is forgotten.",
			setup:  func(t *testing.T, c *fake.Cluster) {},
			want: want{
				calls:      map[string]int{fake.Get: 1},
				againCalls: map[string]int{fake.Get: 1},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fake.New(claimGVK.GroupKind())
			tc.setup(t, c)
			trk := &testTracker{Cluster: c, tracked: map[types.UID]tracker.Deps{}}
			var events []recorded
			rec := event.RecorderFn(func(_ runtime.Object, typ, reason, msg string) { events = append(events, recorded{typ, reason, msg}) })
			r := NewReconciler(c, definition.New(c, time.Hour), secret.New(c, c), trk, WithRecorder(rec))
			target := tracker.Target{GVK: xrGVK, Name: "db", UID: "xr-1"}

			_, err := r.Reconcile(t.Context(), target)
			if (err != nil) != tc.want.err {
				t.Fatalf("\n%s\nReconcile(...): error %v, want error %t", tc.reason, err, tc.want.err)
			}
			if diff := cmp.Diff(tc.want.calls, c.Calls(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nReconcile(...): requests -want, +got:\n%s", tc.reason, diff)
			}
			ns, n := "system", "xr-1"
			if name == "ExplicitRef" {
				ns, n = "elsewhere", "db-conn"
			}
			var gotXR map[string]string
			if s := c.Secret(ns, n); s != nil && slices.ContainsFunc(s.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == "xr-1" }) {
				gotXR = strs(s.Data)
				if gotXR == nil {
					gotXR = map[string]string{}
				}
			}
			wantXR := tc.want.xrSecret
			if wantXR == nil && tc.want.published {
				wantXR = full
			}
			if diff := cmp.Diff(wantXR, gotXR); diff != "" {
				t.Errorf("\n%s\nReconcile(...): XR Secret data -want, +got:\n%s", tc.reason, diff)
			}
			var gotClaim map[string]string
			if s := c.Secret("team", "db-conn"); s != nil {
				gotClaim = strs(s.Data)
				if ctl := metav1.GetControllerOf(s); ctl == nil || ctl.UID != "claim-1" {
					t.Errorf("\n%s\nReconcile(...): claim Secret controlled by %v, want the claim", tc.reason, ctl)
				}
			}
			if diff := cmp.Diff(tc.want.claim, gotClaim); diff != "" {
				t.Errorf("\n%s\nReconcile(...): claim Secret data -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.condition, xrCondition(c)); diff != "" {
				t.Errorf("\n%s\nReconcile(...): condition -want, +got:\n%s", tc.reason, diff)
			}
			if xr := c.Object(xrGVK, "", "db"); xr != nil {
				last, _, _ := unstructured.NestedString(xr.Object, "status", "connectionDetails", "lastPublishedTime")
				if (last != "") != tc.want.published {
					t.Errorf("\n%s\nReconcile(...): lastPublishedTime %q, want set: %t", tc.reason, last, tc.want.published)
				}
			}

			// Level triggered: handling the same XR again changes nothing.
			if _, err := r.Reconcile(t.Context(), target); (err != nil) != tc.want.err {
				t.Fatalf("\n%s\nReconcile(...) again: error %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.againCalls, c.Calls(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nReconcile(...) again: requests -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.events, events, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nReconcile(...) twice: events -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestHandOverOnce: a publication is handed over to the renderer once, not
// on every reconcile until the XR shows it; again only when the XR changed
// without showing it (the hand-over was lost), with the time of the
// publication, not of the repetition.
func TestHandOverOnce(t *testing.T) {
	c := fake.New(claimGVK.GroupKind())
	world(t, c, "db-abc", true)
	trk := &testTracker{Cluster: c, tracked: map[types.UID]tracker.Deps{}, drop: true}
	r := NewReconciler(c, definition.New(c, time.Hour), secret.New(c, c), trk)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	target := tracker.Target{GVK: xrGVK, Name: "db", UID: "xr-1"}
	for range 2 {
		if _, err := r.Reconcile(t.Context(), target); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
	}
	if trk.handOvers != 1 {
		t.Fatalf("%d hand-overs after two reconciles of an unchanged XR, want 1", trk.handOvers)
	}
	if c.Calls()[fake.ApplyStatus] != 0 {
		t.Errorf("the secrets service wrote the XR's status; the renderer writes it")
	}

	// The XR changes (another writer) without showing the publication.
	c.Put(c.Object(xrGVK, "", "db"))
	if _, err := r.Reconcile(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	if trk.handOvers != 2 {
		t.Fatalf("%d hand-overs after the XR changed without showing the first, want 2", trk.handOvers)
	}
	first, again := trk.lost[0], trk.lost[1]
	if first.GetStatus() != "True" || first.GetReason() != string(ReasonPublished) {
		t.Errorf("hand-over %s/%s, want True/Published", first.GetStatus(), first.GetReason())
	}
	if want := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); !first.GetLastPublishedTime().AsTime().Equal(want) || !again.GetLastPublishedTime().AsTime().Equal(want) {
		t.Errorf("lastPublishedTime handed over %v, then %v; want the publication's time %v both times",
			first.GetLastPublishedTime().AsTime(), again.GetLastPublishedTime().AsTime(), want)
	}

	// Once the renderer writes it, nothing more is handed over.
	trk.drop = false
	c.Put(c.Object(xrGVK, "", "db"))
	if _, err := r.Reconcile(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	n := trk.handOvers
	if _, err := r.Reconcile(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	if trk.handOvers != n {
		t.Errorf("a hand-over for an XR that shows it")
	}
	if got := xrCondition(c); got != "True/Published: Connection Secret system/xr-1 is published" {
		t.Errorf("condition %q", got)
	}
}

func TestRotation(t *testing.T) {
	c := fake.New(claimGVK.GroupKind())
	world(t, c, "db-abc", true)
	trk := &testTracker{Cluster: c, tracked: map[types.UID]tracker.Deps{}}
	r := NewReconciler(c, definition.New(c, time.Hour), secret.New(c, c), trk)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	target := tracker.Target{GVK: xrGVK, Name: "db", UID: "xr-1"}
	if _, err := r.Reconcile(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	wantTracked := tracker.Deps{
		Secrets:  []secret.Key{{Namespace: "system", Name: "xr-1"}, {Namespace: "team", Name: "db-conn"}},
		Composed: []types.UID{"nop-1", "nop-2"},
		Observed: []secret.Key{{Namespace: "system", Name: "server-conn"}, {Namespace: "system", Name: "rule-conn"}},
	}
	if diff := cmp.Diff(wantTracked, trk.tracked["xr-1"]); diff != "" {
		t.Errorf("tracked: -want, +got:\n%s", diff)
	}

	c.SetSecretData("system", "server-conn", map[string][]byte{"pw": []byte("rotated")})
	now = now.Add(time.Minute)
	c.Calls()
	if _, err := r.Reconcile(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{fake.Get: 5, fake.GetSecret: 1, fake.UpdateSecret: 2, fake.ApplyStatus: 1}, c.Calls()); diff != "" {
		t.Errorf("rotation: requests -want, +got:\n%s", diff)
	}
	for _, k := range []secret.Key{{Namespace: "system", Name: "xr-1"}, {Namespace: "team", Name: "db-conn"}} {
		if got := string(c.Secret(k.Namespace, k.Name).Data["password"]); got != "rotated" {
			t.Errorf("Secret %s: password not rotated", k)
		}
	}
	last, _, _ := unstructured.NestedString(c.Object(xrGVK, "", "db").Object, "status", "connectionDetails", "lastPublishedTime")
	if last != "2026-01-01T00:01:00Z" {
		t.Errorf("lastPublishedTime %q, want the rotation's time", last)
	}
	// The claim's time is the binder's to copy from the XR's: this
	// service writes no claim.
	if _, ok := c.Object(claimGVK, "team", "db").Object["status"]; ok {
		t.Errorf("the claim has a status %v; the secrets service writes none", c.Object(claimGVK, "team", "db").Object["status"])
	}

	// Keys that disappear upstream disappear downstream.
	c.SetSecretData("system", "server-conn", map[string][]byte{})
	if _, err := r.Reconcile(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	for _, k := range []secret.Key{{Namespace: "system", Name: "xr-1"}, {Namespace: "team", Name: "db-conn"}} {
		got := slices.Sorted(maps.Keys(c.Secret(k.Namespace, k.Name).Data))
		if diff := cmp.Diff([]string{"endpoint", "username"}, got); diff != "" {
			t.Errorf("Secret %s keys: -want, +got:\n%s", k, diff)
		}
	}
	if got := xrCondition(c); got != "False/WaitingForKeys: Connection Secret system/xr-1 waits for keys: password" {
		t.Errorf("condition %q", got)
	}

	// A gone XR is forgotten.
	c.Delete(xrGVK, "", "db")
	if _, err := r.Reconcile(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	if _, ok := trk.tracked["xr-1"]; ok {
		t.Errorf("a gone XR is still tracked")
	}
}

func TestInvalidDetails(t *testing.T) {
	c := fake.New(claimGVK.GroupKind())
	world(t, c, "db-abc", true)
	c.Add(strings.Replace(revision, "    - {name: endpoint, fromFieldPath: status.endpoint}", "    - {fromFieldPath: status.endpoint}", 1))
	trk := &testTracker{Cluster: c, tracked: map[types.UID]tracker.Deps{}}
	r := NewReconciler(c, definition.New(c, time.Hour), secret.New(c, c), trk)
	_, err := r.Reconcile(t.Context(), tracker.Target{GVK: xrGVK, Name: "db", UID: "xr-1"})
	if !reconcile.IsTerminal(err) {
		t.Errorf("Reconcile(...): error %v, want a permanent error", err)
	}
	want := `False/InvalidConnectionDetails: cannot compute the connection details of CompositionRevision "db-abc": invalid connection details: template "rule": connectionDetails[0]: name is required by type FromFieldPath`
	if got := xrCondition(c); got != want {
		t.Errorf("condition:\n got %s\nwant %s", got, want)
	}
}

func TestSkipsTemplatesWithoutDetails(t *testing.T) {
	c := fake.New(claimGVK.GroupKind())
	world(t, c, "db-abc", true, func(xr *unstructured.Unstructured) {
		refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "resourceRefs")
		refs = append(refs, map[string]any{"apiVersion": "nop.example.org/v1", "kind": "Nop", "name": "db-group"})
		_ = unstructured.SetNestedSlice(xr.Object, refs, "spec", "resourceRefs")
	})
	c.Add(`
apiVersion: nop.example.org/v1
kind: Nop
metadata:
  name: db-group
  uid: nop-5
  annotations: {crossplane.io/composition-resource-name: group}
  ownerReferences: [{apiVersion: example.org/v1, kind: XDB, name: db, uid: xr-1, controller: true}]
`)
	trk := &testTracker{Cluster: c, tracked: map[types.UID]tracker.Deps{}}
	r := NewReconciler(c, definition.New(c, time.Hour), secret.New(c, c), trk)
	target := tracker.Target{GVK: xrGVK, Name: "db", UID: "xr-1"}
	for i, want := range []int{8, 5} {
		if _, err := r.Reconcile(t.Context(), target); err != nil {
			t.Fatal(err)
		}
		// XR, XRD, revision, 4 composed, claim; then XR, 3 composed, claim.
		if got := c.Calls()[fake.Get]; got != want {
			t.Errorf("reconcile %d: %d GETs, want %d: a resource whose template has no connection details is read once", i+1, got, want)
		}
	}
}

const pipelineRevision = `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositionRevision
metadata: {name: db-fn, labels: {crossplane.io/composition-name: db}}
spec:
  revision: 3
  compositeTypeRef: {apiVersion: example.org/v1, kind: XDB}
  writeConnectionSecretsToNamespace: system
  mode: Pipeline
  pipeline:
  - step: compose
    functionRef: {name: function-compose}
`

// TestPipeline publishes what a Pipeline XR's functions returned, as its
// staging Secret holds it.
func TestPipeline(t *testing.T) {
	c := fake.New(claimGVK.GroupKind())
	c.Add(pipelineRevision)
	world(t, c, "db-fn", true)
	trk := &testTracker{Cluster: c, tracked: map[types.UID]tracker.Deps{}}
	r := NewReconciler(c, definition.New(c, time.Hour), secret.New(c, c), trk, WithStagingNamespace("loom-system"))
	target := tracker.Target{GVK: xrGVK, Name: "db", UID: "xr-1"}
	stagingKey := secret.Key{Namespace: "loom-system", Name: "loom-fn-xr-1"}
	yes := true
	stage := func(owner types.UID, data map[string]string) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: stagingKey.Namespace, Name: stagingKey.Name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.org/v1", Kind: "XDB", Name: "db", UID: owner, Controller: &yes}}},
			Type: secret.TypeConnection, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		c.PutSecret(s)
	}
	data := func(k secret.Key) map[string]string {
		if s := c.Secret(k.Namespace, k.Name); s != nil {
			return strs(s.Data)
		}
		return nil
	}
	xrKey, claimKey := secret.Key{Namespace: "system", Name: "xr-1"}, secret.Key{Namespace: "team", Name: "db-conn"}

	steps := []struct {
		name      string
		reason    string
		setup     func()
		xr, claim map[string]string
		condition string
		calls     map[string]int
	}{
		{
			name:      "NotHandedOver",
			reason:    "Before the renderer handed the functions' details over, nothing is published; the Ready XR says what it waits for.",
			condition: `False/WaitingForKeys: Connection Secret system/xr-1 waits for the connection details that the functions of CompositionRevision "db-fn" return, which the renderer hands over after it renders the XR`,
			// XR, XRD, revision, three composed resources; the staging Secret.
			calls: map[string]int{fake.Get: 6, fake.GetSecret: 1, fake.ApplyStatus: 1},
		},
		{
			name:   "HandedOver",
			reason: "What the functions returned is published, filtered by the XRD's keys, and copied to the claim; composed resources' Secrets play no part.",
			setup: func() {
				stage("xr-1", map[string]string{"username": "fn-user", "password": "fn-pw", "endpoint": "fn-host:5432", "debug": "x"})
			},
			xr:        map[string]string{"username": "fn-user", "password": "fn-pw", "endpoint": "fn-host:5432"},
			claim:     map[string]string{"username": "fn-user", "password": "fn-pw", "endpoint": "fn-host:5432"},
			condition: "True/Published: Connection Secret system/xr-1 is published",
			calls:     map[string]int{fake.Get: 5, fake.GetSecret: 1, fake.CreateSecret: 2, fake.ApplyStatus: 1},
		},
		{
			name:      "KeyRemoved",
			reason:    "A key the functions no longer return disappears from both Secrets.",
			setup:     func() { stage("xr-1", map[string]string{"username": "fn-user", "password": "rotated"}) },
			xr:        map[string]string{"username": "fn-user", "password": "rotated"},
			claim:     map[string]string{"username": "fn-user", "password": "rotated"},
			condition: "False/WaitingForKeys: Connection Secret system/xr-1 waits for keys: endpoint",
			calls:     map[string]int{fake.Get: 5, fake.GetSecret: 1, fake.UpdateSecret: 2, fake.ApplyStatus: 1},
		},
		{
			name:      "NotOurs",
			reason:    "A staging Secret controlled by another object is not trusted; the XR's Secrets keep what they hold.",
			setup:     func() { stage("xr-2", map[string]string{"password": "mallory"}) },
			xr:        map[string]string{"username": "fn-user", "password": "rotated"},
			claim:     map[string]string{"username": "fn-user", "password": "rotated"},
			condition: `False/WaitingForKeys: Connection Secret system/xr-1 waits for the connection details that the functions of CompositionRevision "db-fn" return, which the renderer hands over after it renders the XR`,
			calls:     map[string]int{fake.Get: 4, fake.GetSecret: 1, fake.ApplyStatus: 1},
		},
	}
	for _, s := range steps {
		if s.setup != nil {
			s.setup()
		}
		c.Calls()
		if _, err := r.Reconcile(t.Context(), target); err != nil {
			t.Fatalf("%s: Reconcile(...): %v", s.name, err)
		}
		if diff := cmp.Diff(s.calls, c.Calls(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: %s\nrequests -want, +got:\n%s", s.name, s.reason, diff)
		}
		if diff := cmp.Diff(s.xr, data(xrKey)); diff != "" {
			t.Errorf("%s: %s\nXR Secret -want, +got:\n%s", s.name, s.reason, diff)
		}
		if diff := cmp.Diff(s.claim, data(claimKey)); diff != "" {
			t.Errorf("%s: %s\nclaim Secret -want, +got:\n%s", s.name, s.reason, diff)
		}
		if diff := cmp.Diff(s.condition, xrCondition(c)); diff != "" {
			t.Errorf("%s: %s\ncondition -want, +got:\n%s", s.name, s.reason, diff)
		}
	}
	want := tracker.Deps{
		Secrets:  []secret.Key{xrKey, stagingKey},
		Composed: []types.UID{"nop-1", "nop-2"},
		Observed: []secret.Key{{Namespace: "system", Name: "server-conn"}, {Namespace: "system", Name: "rule-conn"}},
		Pipeline: true,
	}
	if diff := cmp.Diff(want, trk.tracked["xr-1"]); diff != "" {
		t.Errorf("tracked: the XR's and staging Secrets, and the composed resources' Secrets, which the functions observe: -want, +got:\n%s", diff)
	}
}
