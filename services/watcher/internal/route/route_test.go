package route

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loomxr/loom/services/watcher/internal/object"
)

// caches is a Lookup over fixed maps.
type caches struct {
	claims     map[string]Target // "group/kind/namespace/name"
	xrs        map[types.UID]Target
	requesters map[types.UID][]types.UID // object UID -> XR UIDs
	resources  map[types.UID]bool        // XRs known to compose in mode Resources
	// statusBlind are the XRs whose renders are known to read none of
	// their status; every other XR's may.
	statusBlind map[types.UID]bool
	// notReady are the XRs known not to be Ready; every other XR's
	// readiness is unknown.
	notReady map[types.UID]bool
	// unreferenced are the kinds no ReferenceRule names; every other
	// kind is referenced.
	unreferenced map[schema.GroupKind]bool
	// unresolved are the XRs known to show ReferencesResolved not True.
	unresolved map[types.UID]bool
	// settled are the XRs known to have no pending reference; every
	// other may.
	settled map[types.UID]bool
	// detailsBlind are "<XR UID>/<template>" of the templates whose
	// composed resources' status no connection detail of the XR reads;
	// every other may.
	detailsBlind map[types.UID]bool
	// composedSpecBlind are "<XR UID>/<template>" of the templates whose
	// composed resources no render of the XR reads outside their status;
	// every other may be read.
	composedSpecBlind map[types.UID]bool
	// composedStatusBlind are "<XR UID>/<template>" of the templates whose
	// composed resources' status no render of the XR reads beyond their
	// Ready condition; every other may be read.
	composedStatusBlind map[types.UID]bool
	// statusToSpecBlind are "<XR UID>/<template>" of the templates whose
	// composed resources' status no render of the XR reads into the XR's
	// spec or metadata or the environment; every other may be.
	statusToSpecBlind map[types.UID]bool
	// specDetailsBlind are "<XR UID>/<template>" of the templates whose
	// composed resources no connection detail of the XR reads outside
	// their status; every other may be read.
	specDetailsBlind map[types.UID]bool
	// propagated are the claims' summaries of what the binder copied from
	// their XRs (object.AnnotationPropagated), by claim UID.
	propagated map[types.UID]string
}

func (c caches) Claim(gk schema.GroupKind, namespace, name string) (Target, bool) {
	t, ok := c.claims[gk.Group+"/"+gk.Kind+"/"+namespace+"/"+name]
	return t, ok
}

func (c caches) ClaimPropagated(gk schema.GroupKind, namespace, name string) string {
	t, _ := c.Claim(gk, namespace, name)
	return c.propagated[t.UID]
}

func (c caches) XR(uid types.UID) (Target, bool) {
	t, ok := c.xrs[uid]
	return t, ok
}

func (c caches) Requesters(o object.Meta) []types.UID { return c.requesters[o.UID] }

func (c caches) ResourcesMode(uid types.UID) bool { return c.resources[uid] }

func (c caches) ReadsStatus(uid types.UID) bool { return !c.statusBlind[uid] }

func (c caches) NotReady(uid types.UID) bool { return c.notReady[uid] }

func (c caches) Referenced(gk schema.GroupKind) bool { return !c.unreferenced[gk] }

func (c caches) Unresolved(uid types.UID) bool { return c.unresolved[uid] }

func (c caches) ReferencesPending(uid types.UID) bool { return !c.settled[uid] }

func (c caches) DetailsFromStatus(uid types.UID, template string) bool {
	return !c.detailsBlind[uid+"/"+types.UID(template)]
}

func (c caches) ComposedStatusToSpec(uid types.UID, template string) bool {
	return !c.statusToSpecBlind[uid+"/"+types.UID(template)]
}

func (c caches) DetailsFromSpec(uid types.UID, template string) bool {
	return !c.specDetailsBlind[uid+"/"+types.UID(template)]
}

func (c caches) ReadsComposedSpec(uid types.UID, template string) bool {
	return !c.composedSpecBlind[uid+"/"+types.UID(template)]
}

func (c caches) ReadsComposedStatus(uid types.UID, template string) bool {
	return !c.composedStatusBlind[uid+"/"+types.UID(template)]
}

var (
	gvkXRD      = object.KindXRD
	gvkCRD      = object.KindCRD
	gvkComp     = object.KindComposition
	gvkRev      = object.KindRevision
	gvkEnv      = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1beta1", Kind: "EnvironmentConfig"}
	gvkFn       = object.KindFunction
	gvkRule     = object.KindReferenceRule
	gvkXR       = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "XDatabase"}
	gvkClaim    = schema.GroupVersionKind{Group: "example.org", Version: "v1alpha1", Kind: "Database"}
	gvkNop      = schema.GroupVersionKind{Group: "nop.crossplane.io", Version: "v1alpha1", Kind: "NopResource"}
	gvkCM       = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	xr          = Target{GVK: gvkXR, Name: "db-x7k2p", UID: "xr-uid"}
	claim       = Target{GVK: gvkClaim, Namespace: "team-a", Name: "db", UID: "claim-uid"}
	unboundXR   = Target{GVK: gvkXR, Name: "lonely", UID: "xr2-uid"}
	nsXR        = Target{GVK: gvkXR, Namespace: "team-b", Name: "ns-xr", UID: "xr3-uid"}
	resXR       = Target{GVK: gvkXR, Name: "res-xr", UID: "xr4-uid"}  // composes in mode Resources
	pendingXR   = Target{GVK: gvkXR, Name: "pending", UID: "xr5-uid"} // known not to be Ready
	composition = Target{GVK: gvkComp, Name: "db-aws", UID: "comp-uid"}
	xrd         = Target{GVK: gvkXRD, Name: "xdatabases.example.org", UID: "xrd-uid"}

	lookup = caches{
		claims:      map[string]Target{"example.org/Database/team-a/db": claim},
		xrs:         map[types.UID]Target{xr.UID: xr, unboundXR.UID: unboundXR, nsXR.UID: nsXR, resXR.UID: resXR, pendingXR.UID: pendingXR},
		notReady:    map[types.UID]bool{pendingXR.UID: true},
		resources:   map[types.UID]bool{resXR.UID: true},
		statusBlind: map[types.UID]bool{resXR.UID: true},
		propagated:  map[types.UID]string{claim.UID: "rev-1"},
		requesters: map[types.UID][]types.UID{
			"env-uid": {xr.UID, nsXR.UID, "gone-uid"},
			"nop-uid": {xr.UID},
		},
	}
)

// withholding returns lookup with xr composed in mode Resources, where no
// render reads the status of a resource of template "network" into the
// XR's spec or metadata or the environment.
func withholding() caches {
	c := lookup
	c.resources = map[types.UID]bool{xr.UID: true}
	c.statusToSpecBlind = map[types.UID]bool{xr.UID + "/network": true}
	return c
}

// unreferenced returns lookup with kinds no ReferenceRule names.
func unreferenced(gvks ...schema.GroupVersionKind) caches {
	c := lookup
	c.unreferenced = map[schema.GroupKind]bool{}
	for _, g := range gvks {
		c.unreferenced[g.GroupKind()] = true
	}
	return c
}

func controller(apiVersion, kind, name string, uid types.UID) *metav1.OwnerReference {
	t := true
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &t}
}

// obj returns an object of kind gvk; an XR composes NopResources.
func obj(gvk schema.GroupVersionKind, namespace, name string, uid types.UID) Object {
	o := Object{Meta: object.Meta{GVK: gvk, Namespace: namespace, Name: name, UID: uid, ResourceVersion: "1"}}
	if gvk == gvkXR {
		o.ComposedKinds = []schema.GroupKind{gvkNop.GroupKind()}
	}
	return o
}

func with(o Object, f func(*Object)) Object { f(&o); return o }

func TestRoute(t *testing.T) {
	nop := with(obj(gvkNop, "", "db-x7k2p-bucket", "nop-uid"), func(o *Object) {
		o.Labels = map[string]string{object.LabelComposite: "db-x7k2p"}
		o.Controller = controller("example.org/v1alpha1", "XDatabase", "db-x7k2p", xr.UID)
	})
	cases := map[string]struct {
		reason string
		o      Object
		roles  Role
		// l is the lookup; nil for lookup, where every kind is referenced.
		l    Lookup
		want []Delivery
	}{
		"XRD": {
			reason: "An XRD goes to the renderer, targeting itself.",
			o:      obj(gvkXRD, "", xrd.Name, xrd.UID),
			roles:  RoleXRD,
			want:   []Delivery{{Service: Renderer, Target: xrd, Reason: "definition changed"}},
		},
		"GeneratedCRD": {
			reason: "A CRD an XRD controls goes to the renderer, targeting the XRD.",
			o: with(obj(gvkCRD, "", "xdatabases.example.org", "crd-uid"), func(o *Object) {
				o.Controller = controller("apiextensions.crossplane.io/v1", "CompositeResourceDefinition", xrd.Name, xrd.UID)
			}),
			roles: RoleCRD,
			want:  []Delivery{{Service: Renderer, Target: xrd, Reason: "generated CRD changed"}},
		},
		"OtherCRD": {
			reason: "A CRD nothing of Loom controls goes nowhere.",
			o:      obj(gvkCRD, "", "nopresources.nop.crossplane.io", "crd2-uid"),
			roles:  RoleCRD,
		},
		"Composition": {
			reason: "A Composition goes to the renderer, targeting itself.",
			o:      obj(gvkComp, "", composition.Name, composition.UID),
			roles:  RoleComposition,
			want:   []Delivery{{Service: Renderer, Target: composition, Reason: "composition changed"}},
		},
		"Revision": {
			reason: "A CompositionRevision goes to the renderer, targeting its controlling Composition.",
			o: with(obj(gvkRev, "", "db-aws-1a2b3c4", "rev-uid"), func(o *Object) {
				o.Controller = controller("apiextensions.crossplane.io/v1", "Composition", composition.Name, composition.UID)
			}),
			roles: RoleRevision,
			want:  []Delivery{{Service: Renderer, Target: composition, Reason: "composition revision changed"}},
		},
		"OrphanRevision": {
			reason: "A CompositionRevision without a controlling Composition goes nowhere.",
			o:      obj(gvkRev, "", "db-aws-1a2b3c4", "rev-uid"),
			roles:  RoleRevision,
		},
		"EnvironmentConfig": {
			reason: "An EnvironmentConfig goes to the renderer, targeting itself.",
			o:      obj(gvkEnv, "", "prod", "env-uid"),
			roles:  RoleEnvironmentConfig,
			want:   []Delivery{{Service: Renderer, Target: Target{GVK: gvkEnv, Name: "prod", UID: "env-uid"}, Reason: "environment config changed"}},
		},
		"Function": {
			reason: "A Function goes to the renderer, targeting itself.",
			o:      obj(gvkFn, "", "fn-pt", "fn-uid"),
			roles:  RoleFunction,
			want:   []Delivery{{Service: Renderer, Target: Target{GVK: gvkFn, Name: "fn-pt", UID: "fn-uid"}, Reason: "function changed"}},
		},
		"ReferenceRule": {
			reason: "A ReferenceRule goes to the binder, targeting itself.",
			o:      obj(gvkRule, "", "subnetwork", "rule-uid"),
			roles:  RoleReferenceRule,
			want:   []Delivery{{Service: Binder, Target: Target{GVK: gvkRule, Name: "subnetwork", UID: "rule-uid"}, Reason: "reference rule changed"}},
		},
		"BoundXR": {
			reason: "A bound XR goes to the renderer, secrets and binder targeting itself, and to the binder targeting its claim.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
			}),
			roles: RoleXR,
			want: []Delivery{
				{Service: Binder, Target: claim, Reason: "bound composite resource changed"},
				{Service: Binder, Target: xr, Reason: "composite resource changed"},
				{Service: Renderer, Target: xr, Reason: "composite resource changed"},
				{Service: Secrets, Target: xr, Reason: "composite resource changed"},
			},
		},
		"BoundXRStatus": {
			reason: "A change of every part of a bound XR's status goes to the renderer and secrets, and to the binder targeting its claim (the status mirror) and the XR (its ReferencesResolved condition may say unresolved).",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
				o.StatusOnly = true
				o.StatusChanged = object.StatusAll
			}),
			roles: RoleXR,
			want: []Delivery{
				{Service: Binder, Target: claim, Reason: "bound composite resource readiness changed", Urgent: true},
				{Service: Binder, Target: xr, Reason: "composite resource references unresolved"},
				{Service: Renderer, Target: xr, Reason: "composite resource status changed"},
				{Service: Secrets, Target: xr, Reason: "composite resource readiness changed", Urgent: true},
			},
		},
		"BoundXRPatchableStatus": {
			reason: "A status field that patches write goes to the renderer and to the claim's mirror; the secrets service waits for Ready only.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
				o.StatusOnly = true
				o.StatusChanged = object.StatusPatchable | object.StatusClaim
			}),
			roles: RoleXR,
			want: []Delivery{
				{Service: Binder, Target: claim, Reason: "bound composite resource changed"},
				{Service: Renderer, Target: xr, Reason: "composite resource status changed"},
			},
		},
		"PatchableStatusByRendererReadsStatus": {
			reason: "A status field the renderer wrote itself (a ToCompositeFieldPath patch's result) goes back to it when its render may read the XR's status.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.Writers = []string{"loom-renderer"}
				o.StatusOnly = true
				o.StatusChanged = object.StatusPatchable
			}),
			roles: RoleXR,
			want: []Delivery{
				{Service: Renderer, Target: xr, Reason: "composite resource status changed"},
			},
		},
		"PatchableStatusByRendererStatusBlind": {
			reason: "A status field the renderer wrote itself is no news to it when its render reads none of the XR's status: the render would be the same.",
			o: with(obj(gvkXR, "", resXR.Name, resXR.UID), func(o *Object) {
				o.Writers = []string{"loom-renderer"}
				o.StatusOnly = true
				o.StatusChanged = object.StatusPatchable
			}),
			roles: RoleXR,
		},
		"PatchableStatusByOtherStatusBlind": {
			reason: "A status field someone else wrote goes to the renderer, which owns the status fields its patches write, whatever its render reads.",
			o: with(obj(gvkXR, "", resXR.Name, resXR.UID), func(o *Object) {
				o.Writers = []string{"kubectl"}
				o.StatusOnly = true
				o.StatusChanged = object.StatusPatchable
			}),
			roles: RoleXR,
			want: []Delivery{
				{Service: Renderer, Target: resXR, Reason: "composite resource status changed"},
			},
		},
		"BoundXRReady": {
			reason: "Readiness alone goes to secrets and to the claim's mirror, not to the renderer, which wrote it.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
				o.StatusOnly = true
				o.StatusChanged = object.StatusReady | object.StatusReadyTrue | object.StatusClaim
			}),
			roles: RoleXR,
			want: []Delivery{
				{Service: Binder, Target: claim, Reason: "bound composite resource readiness changed", Urgent: true},
				{Service: Secrets, Target: xr, Reason: "composite resource readiness changed", Urgent: true},
			},
		},
		"BoundXRCreating": {
			reason: "A readiness that stays short of True (a first \"Creating\") goes to the claim's mirror, not to secrets, which waits for True.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
				o.StatusOnly = true
				o.StatusChanged = object.StatusReady | object.StatusClaim
			}),
			roles: RoleXR,
			want: []Delivery{
				{Service: Binder, Target: claim, Reason: "bound composite resource readiness changed", Urgent: true},
			},
		},
		"BoundXRSpecByRenderer": {
			reason: "The renderer's write of a bound XR's spec (its resourceRefs) is no news to the claim when the claim holds what the binder copies back from the XR; it still goes to the binder for references and to the secrets service.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
				o.Writers = []string{"loom-renderer"}
				o.Propagated = "rev-1"
			}),
			roles: RoleXR,
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composite resource changed"},
				{Service: Secrets, Target: xr, Reason: "composite resource changed"},
			},
		},
		"BoundXRBindingByRenderer": {
			reason: "The renderer's write of a field the binder copies back to the claim (a revision the claim does not hold) goes to the claim.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
				o.Writers = []string{"loom-renderer"}
				o.Propagated = "rev-2"
			}),
			roles: RoleXR,
			want: []Delivery{
				{Service: Binder, Target: claim, Reason: "bound composite resource changed"},
				{Service: Binder, Target: xr, Reason: "composite resource changed"},
				{Service: Secrets, Target: xr, Reason: "composite resource changed"},
			},
		},
		"BoundXRDeletingByRenderer": {
			reason: "The renderer's write of a bound XR being deleted goes to the claim.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
				o.Writers = []string{"loom-renderer"}
				o.Propagated = "rev-1"
				o.Deleting = true
			}),
			roles: RoleXR,
			want: []Delivery{
				{Service: Binder, Target: claim, Reason: "bound composite resource changed"},
				{Service: Binder, Target: xr, Reason: "composite resource changed"},
				{Service: Secrets, Target: xr, Reason: "composite resource changed"},
			},
		},
		"BoundXRSpecByOther": {
			reason: "Anyone else's write of a bound XR's spec goes to the claim: it may undo what the binder applied from the claim.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
				o.Writers = []string{"kubectl-edit"}
				o.Propagated = "rev-1"
			}),
			roles: RoleXR,
			want: []Delivery{
				{Service: Binder, Target: claim, Reason: "bound composite resource changed"},
				{Service: Binder, Target: xr, Reason: "composite resource changed"},
				{Service: Renderer, Target: xr, Reason: "composite resource changed"},
				{Service: Secrets, Target: xr, Reason: "composite resource changed"},
			},
		},
		"XRReferencesUnresolvedByBinder": {
			reason: "The binder's own ReferencesResolved=False comes back to it (for the XR, not the claim): it turns the condition True only where the XR shows it.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
				o.StatusOnly = true
				o.StatusChanged = object.StatusUnresolved
				o.Writers = []string{"loom-binder"}
			}),
			roles: RoleXR,
			want:  []Delivery{{Service: Binder, Target: xr, Reason: "composite resource references unresolved"}},
		},
		"XRReferencesUnresolvedNoRules": {
			reason: "Where no ReferenceRule names the kinds the XR composes, the condition is no one's news.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.StatusOnly = true
				o.StatusChanged = object.StatusUnresolved
			}),
			roles: RoleXR,
			l:     unreferenced(gvkNop),
		},
		"BoundXRPublished": {
			reason: "A Ready XR's new connection Secret publication goes to the claim's mirror, urgent: the claim turns Ready with it.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
				o.StatusOnly = true
				o.StatusChanged = object.StatusClaim | object.StatusPublished
			}),
			roles: RoleXR,
			want: []Delivery{
				{Service: Binder, Target: claim, Reason: "bound composite resource published its connection Secret", Urgent: true},
			},
		},
		"BoundXRMachineryStatus": {
			reason: "A change of the machinery's own status fields alone (a condition no one mirrors, connectionDetails) goes nowhere.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
				o.StatusOnly = true
			}),
			roles: RoleXR,
		},
		"ComposedXRStatus": {
			reason: "A change of a composed XR's status alone still reaches every service of its parent XR.",
			o: with(obj(gvkXR, "", "child", "child-uid"), func(o *Object) {
				o.Labels = map[string]string{object.LabelComposite: xr.Name}
				o.Controller = controller("example.org/v1alpha1", "XDatabase", xr.Name, xr.UID)
				o.StatusOnly = true
				o.StatusChanged = object.StatusAll
			}),
			roles: RoleXR | RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: Target{GVK: gvkXR, Name: "child", UID: "child-uid"}, Reason: "composite resource references unresolved"},
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: Target{GVK: gvkXR, Name: "child", UID: "child-uid"}, Reason: "composite resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource status changed"},
				{Service: Secrets, Target: Target{GVK: gvkXR, Name: "child", UID: "child-uid"}, Reason: "composite resource readiness changed", Urgent: true},
				{Service: Secrets, Target: xr, Reason: "composed resource status changed"},
			},
		},
		"ComposedStatus": {
			reason: "A change of a composed resource's status alone is not urgent: it may never settle.",
			o:      with(nop, func(o *Object) { o.StatusOnly = true; o.StatusFieldsChanged = true }),
			roles:  RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource status changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource status changed"},
			},
		},
		"ComposedTurnedReady": {
			reason: "A composed resource turning Ready is readiness progress: urgent for the renderer, which decides whether the XR is Ready, and for the secrets service, which reads its status into connection details whose publication the XR's Ready waits for; not for the binder.",
			o:      with(nop, func(o *Object) { o.StatusOnly = true; o.TurnedReady = true; o.StatusFieldsChanged = true }),
			roles:  RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource turned Ready", Urgent: true},
				{Service: Secrets, Target: xr, Reason: "composed resource turned Ready", Urgent: true},
			},
		},
		"ComposedConditionsOnly": {
			reason: "A change of a composed resource's conditions alone is no news to the secrets service, which reads no condition of it.",
			o:      with(nop, func(o *Object) { o.StatusOnly = true }),
			roles:  RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource status changed"},
			},
		},
		"ComposedTurnedReadyConditionsOnly": {
			reason: "A provider's Ready condition alone goes to the renderer (urgent) and the binder, whose references may wait for it, not to the secrets service.",
			o:      with(nop, func(o *Object) { o.StatusOnly = true; o.TurnedReady = true }),
			roles:  RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource turned Ready", Urgent: true},
			},
		},
		"ComposedTurnedReadyWithheld": {
			reason: "While its XR has no Ready condition and a sibling that must be Ready has no status yet, a composed resource turning Ready cannot change a render of the XR (mode Resources, a template that reads no status into the XR's spec or the environment): the renderer does not hear of it; the others do as before.",
			o: with(nop, func(o *Object) {
				o.StatusOnly, o.TurnedReady, o.ReadyConditionChanged, o.StatusFieldsChanged = true, true, true, true
				o.Template, o.AwaitsSiblings = "network", true
			}),
			roles: RoleComposed,
			l:     withholding(),
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource turned Ready", Urgent: true},
			},
		},
		"ComposedReadyConditionWithheld": {
			reason: "Nor of another change of its Ready condition then.",
			o: with(nop, func(o *Object) {
				o.StatusOnly, o.ReadyConditionChanged = true, true
				o.Template, o.AwaitsSiblings = "network", true
			}),
			roles: RoleComposed,
			l:     withholding(),
			want:  []Delivery{{Service: Binder, Target: xr, Reason: "composed resource status changed"}},
		},
		"ComposedTurnedReadyNoSiblingAwaited": {
			reason: "Without a sibling awaited, it is readiness progress as ever.",
			o: with(nop, func(o *Object) {
				o.StatusOnly, o.TurnedReady, o.ReadyConditionChanged = true, true, true
				o.Template = "network"
			}),
			roles: RoleComposed,
			l:     withholding(),
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource turned Ready", Urgent: true},
			},
		},
		"ComposedTurnedReadyAwaitedStatusToSpec": {
			reason: "Nor is it withheld where the template's patches read the resource's status into the XR's spec or the environment, which a render writes at once.",
			o: with(nop, func(o *Object) {
				o.StatusOnly, o.TurnedReady, o.ReadyConditionChanged = true, true, true
				o.Template, o.AwaitsSiblings = "database", true
			}),
			roles: RoleComposed,
			l:     withholding(),
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource turned Ready", Urgent: true},
			},
		},
		"ComposedTurnedReadyAwaitedPipeline": {
			reason: "Nor for an XR not known to compose in mode Resources: functions judge readiness.",
			o: with(nop, func(o *Object) {
				o.StatusOnly, o.TurnedReady, o.ReadyConditionChanged = true, true, true
				o.Template, o.AwaitsSiblings = "network", true
			}),
			roles: RoleComposed,
			l:     func() caches { c := withholding(); c.resources = nil; return c }(),
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource turned Ready", Urgent: true},
			},
		},
		"XRReadinessWithheld": {
			reason: "An XR's first Ready condition, not True, written after a resource's readiness was withheld goes back to the renderer, even as its own write: the render that wrote it may have read that resource before it turned Ready.",
			o: with(obj(gvkXR, "", unboundXR.Name, unboundXR.UID), func(o *Object) {
				o.StatusOnly, o.Writers, o.ReadinessWithheld = true, []string{"loom-renderer"}, true
			}),
			roles: RoleXR,
			want:  []Delivery{{Service: Renderer, Target: unboundXR, Reason: "composite resource readiness withheld"}},
		},
		"XRBoundToUnknownClaim": {
			reason: "An XR whose claim is not cached still goes to every service, targeting itself.",
			o: with(obj(gvkXR, "", unboundXR.Name, unboundXR.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "gone"}
			}),
			roles: RoleXR,
			want: []Delivery{
				{Service: Binder, Target: unboundXR, Reason: "composite resource changed"},
				{Service: Renderer, Target: unboundXR, Reason: "composite resource changed"},
				{Service: Secrets, Target: unboundXR, Reason: "composite resource changed"},
			},
		},
		"Claim": {
			reason: "A claim goes to the binder and secrets, targeting itself.",
			o:      obj(gvkClaim, claim.Namespace, claim.Name, claim.UID),
			roles:  RoleClaim,
			want: []Delivery{
				{Service: Binder, Target: claim, Reason: "claim changed"},
				{Service: Secrets, Target: claim, Reason: "claim changed"},
			},
		},
		"ClaimCreated": {
			reason: "A new claim goes to the binder only: the secrets service hears of it through its XR, which the binder creates with a claimRef.",
			o:      with(obj(gvkClaim, claim.Namespace, claim.Name, claim.UID), func(o *Object) { o.Created = true }),
			roles:  RoleClaim,
			want:   []Delivery{{Service: Binder, Target: claim, Reason: "claim changed"}},
		},
		"ClaimStatus": {
			reason: "A change of a claim's status alone goes nowhere: the binder wrote it.",
			o:      with(obj(gvkClaim, claim.Namespace, claim.Name, claim.UID), func(o *Object) { o.StatusOnly = true }),
			roles:  RoleClaim,
		},
		"ComposedReferenceIdleCreated": {
			reason: "The creation of a composed resource that no ReferenceRule can do anything with yet (a target not Ready, holding no reference) is no news to the binder, even while a reference of its XR is pending.",
			o: with(nop, func(o *Object) {
				o.Writers = []string{"loom-renderer"}
				o.Created = true
				o.References = &object.References{}
			}),
			roles: RoleComposed,
			want: []Delivery{
				{Service: Renderer, Target: xr, Reason: "composed resource changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource changed"},
			},
		},
		"ComposedReferenceIdleCreatedWhileUnresolved": {
			reason: "But such a creation reaches the binder while the XR says a reference waits: it may have waited for no target to match.",
			o: with(obj(gvkNop, "", "res-xr-network", "nop3-uid"), func(o *Object) {
				o.Labels = map[string]string{object.LabelComposite: resXR.Name}
				o.Controller = controller("example.org/v1alpha1", "XDatabase", resXR.Name, resXR.UID)
				o.Writers = []string{"loom-renderer"}
				o.Created = true
				o.References = &object.References{}
			}),
			roles: RoleComposed,
			l:     func() caches { c := lookup; c.unresolved = map[types.UID]bool{resXR.UID: true}; return c }(),
			want: []Delivery{
				{Service: Binder, Target: resXR, Reason: "composed resource changed"},
				{Service: Secrets, Target: resXR, Reason: "composed resource changed"},
			},
		},
		"ComposedStatusNoDetails": {
			reason: "A change of the status of a composed resource whose template reads none of it into connection details is no news to the secrets service.",
			o:      with(nop, func(o *Object) { o.StatusOnly = true; o.StatusFieldsChanged = true; o.Template = "cache" }),
			roles:  RoleComposed,
			l:      func() caches { c := lookup; c.detailsBlind = map[types.UID]bool{xr.UID + "/cache": true}; return c }(),
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource status changed"},
			},
		},
		"ComposedStatusDetails": {
			reason: "One of a template that reads it still is.",
			o:      with(nop, func(o *Object) { o.StatusOnly = true; o.StatusFieldsChanged = true; o.Template = "network" }),
			roles:  RoleComposed,
			l:      func() caches { c := lookup; c.detailsBlind = map[types.UID]bool{xr.UID + "/cache": true}; return c }(),
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource status changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource status changed"},
			},
		},
		"ComposedStatusNoRenderRead": {
			reason: "A change of the status of a composed resource that leaves its Ready condition as it was (a provider's atProvider, its Synced condition) is no news to the renderer where no patch or readiness check of its template reads its status.",
			o:      with(nop, func(o *Object) { o.StatusOnly = true; o.StatusFieldsChanged = true; o.Template = "database" }),
			roles:  RoleComposed,
			l: func() caches {
				c := lookup
				c.composedStatusBlind = map[types.UID]bool{xr.UID + "/database": true}
				return c
			}(),
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource status changed"},
			},
		},
		"ComposedReadyConditionChanged": {
			reason: "A change of its Ready condition's reason or message still is: the XR's summary of resources not Ready shows them.",
			o: with(nop, func(o *Object) {
				o.StatusOnly = true
				o.StatusFieldsChanged = true
				o.ReadyConditionChanged = true
				o.Template = "database"
			}),
			roles: RoleComposed,
			l: func() caches {
				c := lookup
				c.composedStatusBlind = map[types.UID]bool{xr.UID + "/database": true}
				return c
			}(),
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource status changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource status changed"},
			},
		},
		"ComposedStatusRenderRead": {
			reason: "So is any change of the status of a template whose patches or readiness checks read it.",
			o:      with(nop, func(o *Object) { o.StatusOnly = true; o.StatusFieldsChanged = true; o.Template = "network" }),
			roles:  RoleComposed,
			l: func() caches {
				c := lookup
				c.composedStatusBlind = map[types.UID]bool{xr.UID + "/database": true}
				return c
			}(),
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource status changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource status changed"},
			},
		},
		"ComposedReferenceResolvedNoRenderRead": {
			reason: "The binder's write of a resolved reference into a resource whose template the render reads only in its status is no news to the renderer.",
			o: with(nop, func(o *Object) {
				o.Writers = []string{"loom-binder"}
				o.Template = "database"
				o.References = &object.References{Source: true}
			}),
			roles: RoleComposed,
			l: func() caches {
				c := lookup
				c.composedSpecBlind = map[types.UID]bool{xr.UID + "/database": true}
				return c
			}(),
			want: []Delivery{
				{Service: Secrets, Target: xr, Reason: "composed resource changed"},
			},
		},
		"ComposedReferenceResolvedNoDetailRead": {
			reason: "Nor is it news to the secrets service when no connection detail of the template reads the resource outside its status (a detail from its connection Secret needs only the Secret's reference, which the binder does not write).",
			o: with(nop, func(o *Object) {
				o.Writers = []string{"loom-binder"}
				o.Template = "database"
				o.References = &object.References{Source: true}
			}),
			roles: RoleComposed,
			l: func() caches {
				c := lookup
				c.composedSpecBlind = map[types.UID]bool{xr.UID + "/database": true}
				c.specDetailsBlind = map[types.UID]bool{xr.UID + "/database": true}
				return c
			}(),
		},
		"ComposedChangedByOthersDetailBlind": {
			reason: "A change by another writer still reaches the secrets service (it may have written the connection Secret's reference).",
			o: with(nop, func(o *Object) {
				o.Writers = []string{"kubectl-edit"}
				o.Template = "database"
			}),
			roles: RoleComposed,
			l: func() caches {
				c := lookup
				c.composedSpecBlind = map[types.UID]bool{xr.UID + "/database": true}
				c.specDetailsBlind = map[types.UID]bool{xr.UID + "/database": true}
				return c
			}(),
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource changed"},
			},
		},
		"ComposedReferenceResolvedRenderReads": {
			reason: "It is when a patch or readiness check of the template reads the resource outside its status.",
			o: with(nop, func(o *Object) {
				o.Writers = []string{"loom-binder"}
				o.Template = "network"
				o.References = &object.References{Source: true}
			}),
			roles: RoleComposed,
			l: func() caches {
				c := lookup
				c.composedSpecBlind = map[types.UID]bool{xr.UID + "/database": true}
				return c
			}(),
			want: []Delivery{
				{Service: Renderer, Target: xr, Reason: "composed resource changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource changed"},
			},
		},
		"ComposedChangedByOthersRenderBlind": {
			reason: "A change by anyone but the binder (a user's edit the render would undo) reaches the renderer whatever the render reads.",
			o: with(nop, func(o *Object) {
				o.Writers = []string{"kubectl-edit"}
				o.Template = "database"
				o.References = &object.References{Source: true}
			}),
			roles: RoleComposed,
			l: func() caches {
				c := lookup
				c.composedSpecBlind = map[types.UID]bool{xr.UID + "/database": true}
				return c
			}(),
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource changed"},
			},
		},
		"ComposedSourceCreated": {
			reason: "The creation of a resource holding a reference to resolve is news to the binder, with nothing pending yet.",
			o: with(nop, func(o *Object) {
				o.Writers = []string{"loom-renderer"}
				o.Created = true
				o.References = &object.References{Source: true, Pending: true}
			}),
			roles: RoleComposed,
			l:     func() caches { c := lookup; c.settled = map[types.UID]bool{xr.UID: true}; return c }(),
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource changed"},
			},
		},
		"ComposedSourceStatus": {
			reason: "A change of the status alone of a resource that only holds references is no news to the binder: it reads their targets, not its status.",
			o:      with(nop, func(o *Object) { o.StatusOnly = true; o.References = &object.References{Source: true, Pending: true} }),
			roles:  RoleComposed,
			want: []Delivery{
				{Service: Renderer, Target: xr, Reason: "composed resource status changed"},
			},
		},
		"ComposedTargetReadyPending": {
			reason: "A target that shows what the references wait for is news to the binder while a reference of its XR is pending.",
			o: with(nop, func(o *Object) {
				o.StatusOnly = true
				o.TurnedReady = true
				o.References = &object.References{Target: true}
			}),
			roles: RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource turned Ready", Urgent: true},
			},
		},
		"ComposedTargetReadySettled": {
			reason: "Once every reference of its XR resolved, it is not.",
			o: with(nop, func(o *Object) {
				o.StatusOnly = true
				o.TurnedReady = true
				o.References = &object.References{Target: true, Source: true}
			}),
			roles: RoleComposed,
			l:     func() caches { c := lookup; c.settled = map[types.UID]bool{xr.UID: true}; return c }(),
			want: []Delivery{
				{Service: Renderer, Target: xr, Reason: "composed resource turned Ready", Urgent: true},
			},
		},
		"ComposedTargetReadySettledUnresolved": {
			reason: "Unless the XR says a reference waits or failed.",
			o: with(nop, func(o *Object) {
				o.StatusOnly = true
				o.TurnedReady = true
				o.References = &object.References{Target: true}
			}),
			roles: RoleComposed,
			l: func() caches {
				c := lookup
				c.settled = map[types.UID]bool{xr.UID: true}
				c.unresolved = map[types.UID]bool{xr.UID: true}
				return c
			}(),
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource turned Ready", Urgent: true},
			},
		},
		"ComposedReferenceIdleStatus": {
			reason: "Nor is a change of its status after which it still does not show what the rules wait for.",
			o: with(nop, func(o *Object) {
				o.StatusOnly = true
				o.StatusFieldsChanged = true
				o.References = &object.References{}
			}),
			roles: RoleComposed,
			want: []Delivery{
				{Service: Renderer, Target: xr, Reason: "composed resource status changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource status changed"},
			},
		},
		"ComposedByRenderer": {
			reason: "A composed resource the renderer alone wrote (its own apply) does not go back to the renderer.",
			o:      with(nop, func(o *Object) { o.Writers = []string{"loom-renderer"} }),
			roles:  RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource changed"},
			},
		},
		"ComposedCreatedByRendererResources": {
			reason: "The creation of a composed resource of an XR composed in mode Resources does not go back to the renderer that made it: the render that created it judged the API server's answer.",
			o: with(obj(gvkNop, "", "res-xr-bucket", "nop2-uid"), func(o *Object) {
				o.Labels = map[string]string{object.LabelComposite: resXR.Name}
				o.Controller = controller("example.org/v1alpha1", "XDatabase", resXR.Name, resXR.UID)
				o.Writers = []string{"loom-renderer"}
				o.Created = true
			}),
			roles: RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: resXR, Reason: "composed resource changed"},
				{Service: Secrets, Target: resXR, Reason: "composed resource changed"},
			},
		},
		"ComposedCreatedByRenderer": {
			reason: "The creation of a composed resource goes back to the renderer that made it when its XR is not known to compose in mode Resources (functions judge it in the next render).",
			o: with(nop, func(o *Object) {
				o.Writers = []string{"loom-renderer"}
				o.Created = true
			}),
			roles: RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource changed"},
			},
		},
		"ComposedCreatedBeforeReady": {
			reason: "The creation of a composed resource of an XR that is not Ready yet is no news to the secrets service, which reads every composed resource when the XR turns Ready.",
			o: with(obj(gvkNop, "", "pending-bucket", "nop2-uid"), func(o *Object) {
				o.Labels = map[string]string{object.LabelComposite: pendingXR.Name}
				o.Controller = controller("example.org/v1alpha1", "XDatabase", pendingXR.Name, pendingXR.UID)
				o.Writers = []string{"loom-renderer"}
				o.Created = true
			}),
			roles: RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: pendingXR, Reason: "composed resource changed"},
				{Service: Renderer, Target: pendingXR, Reason: "composed resource changed"},
			},
		},
		"ComposedChangedBeforeReady": {
			reason: "A later change of a composed resource of an XR that is not Ready yet goes to the secrets service as before.",
			o: with(obj(gvkNop, "", "pending-bucket", "nop2-uid"), func(o *Object) {
				o.Labels = map[string]string{object.LabelComposite: pendingXR.Name}
				o.Controller = controller("example.org/v1alpha1", "XDatabase", pendingXR.Name, pendingXR.UID)
				o.Writers = []string{"kubectl"}
			}),
			roles: RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: pendingXR, Reason: "composed resource changed"},
				{Service: Renderer, Target: pendingXR, Reason: "composed resource changed"},
				{Service: Secrets, Target: pendingXR, Reason: "composed resource changed"},
			},
		},
		"ComposedByRendererAndUser": {
			reason: "A change of several writers goes to each service.",
			o:      with(nop, func(o *Object) { o.Writers = []string{"kubectl", "loom-renderer"} }),
			roles:  RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource changed"},
			},
		},
		"ClaimByBinder": {
			reason: "A claim the binder alone wrote goes nowhere: the secrets service follows claims through their XRs.",
			o:      with(obj(gvkClaim, claim.Namespace, claim.Name, claim.UID), func(o *Object) { o.Writers = []string{"loom-binder"} }),
			roles:  RoleClaim,
		},
		"ClaimByUserAndBinder": {
			reason: "A claim the binder and someone else wrote goes to both services.",
			o:      with(obj(gvkClaim, claim.Namespace, claim.Name, claim.UID), func(o *Object) { o.Writers = []string{"kubectl", "loom-binder"} }),
			roles:  RoleClaim,
			want: []Delivery{
				{Service: Binder, Target: claim, Reason: "claim changed"},
				{Service: Secrets, Target: claim, Reason: "claim changed"},
			},
		},
		"BoundXRByBinder": {
			reason: "An XR the binder alone wrote (created, or propagated the claim to) goes to neither of the binder's targets.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
				o.Writers = []string{"loom-binder"}
			}),
			roles: RoleXR,
			want: []Delivery{
				{Service: Renderer, Target: xr, Reason: "composite resource changed"},
				{Service: Secrets, Target: xr, Reason: "composite resource changed"},
			},
		},
		"BoundXRStatusByBinder": {
			reason: "The binder's own write of a condition the claim mirrors still reaches the mirror.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
				o.StatusOnly = true
				o.StatusChanged = object.StatusClaim
				o.Writers = []string{"loom-binder"}
			}),
			roles: RoleXR,
			want:  []Delivery{{Service: Binder, Target: claim, Reason: "bound composite resource changed"}},
		},
		"BoundXRPatchableStatusByRenderer": {
			reason: "The renderer's own write of a status field that patches read still reaches the renderer (patches chain through the XR's status).",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
				o.StatusOnly = true
				o.StatusChanged = object.StatusPatchable
				o.Writers = []string{"loom-renderer"}
			}),
			roles: RoleXR,
			want:  []Delivery{{Service: Renderer, Target: xr, Reason: "composite resource status changed"}},
		},
		"Composed": {
			reason: "A composed resource goes to the renderer, binder and secrets, targeting its controlling XR.",
			o:      nop,
			roles:  RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource changed"},
			},
		},
		"ComposedByUncachedXR": {
			reason: "A composed resource whose XR is not cached targets the XR its controller reference names.",
			o: with(nop, func(o *Object) {
				o.Controller = controller("example.org/v1alpha1", "XDatabase", "gone", "gone-uid")
			}),
			roles: RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: Target{GVK: gvkXR, Name: "gone", UID: "gone-uid"}, Reason: "composed resource changed"},
				{Service: Renderer, Target: Target{GVK: gvkXR, Name: "gone", UID: "gone-uid"}, Reason: "composed resource changed"},
				{Service: Secrets, Target: Target{GVK: gvkXR, Name: "gone", UID: "gone-uid"}, Reason: "composed resource changed"},
			},
		},
		"ComposedInNamespace": {
			reason: "A composed resource of a namespaced XR targets the XR in its namespace, as cached.",
			o: with(obj(gvkCM, "team-b", "cfg", "cm-uid"), func(o *Object) {
				o.Labels = map[string]string{object.LabelComposite: nsXR.Name}
				o.Controller = controller("example.org/v1alpha1", "XDatabase", nsXR.Name, nsXR.UID)
			}),
			roles: RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: nsXR, Reason: "composed resource changed"},
				{Service: Renderer, Target: nsXR, Reason: "composed resource changed"},
				{Service: Secrets, Target: nsXR, Reason: "composed resource changed"},
			},
		},
		"UnlabelledComposedKind": {
			reason: "An object of a composed kind without the composite label is not a composed resource.",
			o: with(nop, func(o *Object) {
				o.Labels = nil
			}),
			roles: RoleComposed,
		},
		"ComposedWithoutController": {
			reason: "A labelled object without a controller reference has no XR to target.",
			o: with(nop, func(o *Object) {
				o.Controller = nil
			}),
			roles: RoleComposed,
		},
		"Requested": {
			reason: "A watched object goes to the renderer once per requesting XR that is cached.",
			o:      obj(gvkEnv, "", "prod", "env-uid"),
			roles:  RoleRequested,
			want: []Delivery{
				{Service: Renderer, Target: xr, Reason: "watched resource changed"},
				{Service: Renderer, Target: nsXR, Reason: "watched resource changed"},
			},
		},
		"RequestedEnvironmentConfig": {
			reason: "An EnvironmentConfig that XRs asked to watch goes to the renderer targeting itself and each requesting XR.",
			o:      obj(gvkEnv, "", "prod", "env-uid"),
			roles:  RoleEnvironmentConfig | RoleRequested,
			want: []Delivery{
				{Service: Renderer, Target: Target{GVK: gvkEnv, Name: "prod", UID: "env-uid"}, Reason: "environment config changed"},
				{Service: Renderer, Target: xr, Reason: "watched resource changed"},
				{Service: Renderer, Target: nsXR, Reason: "watched resource changed"},
			},
		},
		"ComposedAndRequestedBySameXR": {
			reason: "A composed resource its own XR also asked to watch goes to the renderer once.",
			o:      nop,
			roles:  RoleComposed | RoleRequested,
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource changed"},
			},
		},
		"NestedXR": {
			reason: "An XR composed by another XR goes to every service for itself and for its parent.",
			o: with(obj(gvkXR, "", "child", "child-uid"), func(o *Object) {
				o.Labels = map[string]string{object.LabelComposite: xr.Name}
				o.Controller = controller("example.org/v1alpha1", "XDatabase", xr.Name, xr.UID)
			}),
			roles: RoleXR | RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: Target{GVK: gvkXR, Name: "child", UID: "child-uid"}, Reason: "composite resource changed"},
				{Service: Binder, Target: xr, Reason: "composed resource changed"},
				{Service: Renderer, Target: Target{GVK: gvkXR, Name: "child", UID: "child-uid"}, Reason: "composite resource changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource changed"},
				{Service: Secrets, Target: Target{GVK: gvkXR, Name: "child", UID: "child-uid"}, Reason: "composite resource changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource changed"},
			},
		},
		"NestedXRByRenderer": {
			reason: "The renderer's write of a nested XR's spec (its parent's render) goes to the renderer for the nested XR, not for the parent (its own composed-resource write).",
			o: with(obj(gvkXR, "", "child", "child-uid"), func(o *Object) {
				o.Labels = map[string]string{object.LabelComposite: xr.Name}
				o.Controller = controller("example.org/v1alpha1", "XDatabase", xr.Name, xr.UID)
				o.Writers = []string{"loom-renderer"}
			}),
			roles: RoleXR | RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: Target{GVK: gvkXR, Name: "child", UID: "child-uid"}, Reason: "composite resource changed"},
				{Service: Binder, Target: xr, Reason: "composed resource changed"},
				{Service: Renderer, Target: Target{GVK: gvkXR, Name: "child", UID: "child-uid"}, Reason: "composite resource changed"},
				{Service: Secrets, Target: Target{GVK: gvkXR, Name: "child", UID: "child-uid"}, Reason: "composite resource changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource changed"},
			},
		},
		"NestedXRCreatedByRenderer": {
			reason: "The renderer's creation of a nested XR goes to the renderer for the nested XR and for its parent.",
			o: with(obj(gvkXR, "", "child", "child-uid"), func(o *Object) {
				o.Labels = map[string]string{object.LabelComposite: xr.Name}
				o.Controller = controller("example.org/v1alpha1", "XDatabase", xr.Name, xr.UID)
				o.Writers = []string{"loom-renderer"}
				o.Created = true
			}),
			roles: RoleXR | RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: Target{GVK: gvkXR, Name: "child", UID: "child-uid"}, Reason: "composite resource changed"},
				{Service: Binder, Target: xr, Reason: "composed resource changed"},
				{Service: Renderer, Target: Target{GVK: gvkXR, Name: "child", UID: "child-uid"}, Reason: "composite resource changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource changed"},
				{Service: Secrets, Target: Target{GVK: gvkXR, Name: "child", UID: "child-uid"}, Reason: "composite resource changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource changed"},
			},
		},
		"NestedXRReadyByRenderer": {
			reason: "The renderer's write of a nested XR's readiness goes to the renderer for its parent, as to the parent's binder and secrets.",
			o: with(obj(gvkXR, "", "child", "child-uid"), func(o *Object) {
				o.Labels = map[string]string{object.LabelComposite: xr.Name}
				o.Controller = controller("example.org/v1alpha1", "XDatabase", xr.Name, xr.UID)
				o.Writers = []string{"loom-renderer"}
				o.StatusOnly = true
				o.StatusChanged = object.StatusReady | object.StatusReadyTrue
			}),
			roles: RoleXR | RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource status changed"},
				{Service: Secrets, Target: Target{GVK: gvkXR, Name: "child", UID: "child-uid"}, Reason: "composite resource readiness changed", Urgent: true},
				{Service: Secrets, Target: xr, Reason: "composed resource status changed"},
			},
		},
		"NestedXRTurnedReadyByRenderer": {
			reason: "A nested XR turning Ready is readiness progress for its parent: urgent for the parent's renderer.",
			o: with(obj(gvkXR, "", "child", "child-uid"), func(o *Object) {
				o.Labels = map[string]string{object.LabelComposite: xr.Name}
				o.Controller = controller("example.org/v1alpha1", "XDatabase", xr.Name, xr.UID)
				o.Writers = []string{"loom-renderer"}
				o.StatusOnly = true
				o.StatusChanged = object.StatusReady | object.StatusReadyTrue
				o.TurnedReady = true
			}),
			roles: RoleXR | RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource status changed", Urgent: true},
				{Service: Secrets, Target: Target{GVK: gvkXR, Name: "child", UID: "child-uid"}, Reason: "composite resource readiness changed", Urgent: true},
				{Service: Secrets, Target: xr, Reason: "composed resource status changed"},
			},
		},
		"NestedXRPatchableStatusByRenderer": {
			reason: "The renderer's write of a nested XR's patchable status goes to the renderer for itself and for its parent.",
			o: with(obj(gvkXR, "", "child", "child-uid"), func(o *Object) {
				o.Labels = map[string]string{object.LabelComposite: xr.Name}
				o.Controller = controller("example.org/v1alpha1", "XDatabase", xr.Name, xr.UID)
				o.Writers = []string{"loom-renderer"}
				o.StatusOnly = true
				o.StatusChanged = object.StatusPatchable
			}),
			roles: RoleXR | RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Renderer, Target: Target{GVK: gvkXR, Name: "child", UID: "child-uid"}, Reason: "composite resource status changed"},
				{Service: Renderer, Target: xr, Reason: "composed resource status changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource status changed"},
			},
		},
		"NestedXRMachineryStatusByRenderer": {
			reason: "The renderer's write of a nested XR's machinery status alone (Synced, the summary) does not go back to the renderer.",
			o: with(obj(gvkXR, "", "child", "child-uid"), func(o *Object) {
				o.Labels = map[string]string{object.LabelComposite: xr.Name}
				o.Controller = controller("example.org/v1alpha1", "XDatabase", xr.Name, xr.UID)
				o.Writers = []string{"loom-renderer"}
				o.StatusOnly = true
			}),
			roles: RoleXR | RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource status changed"},
			},
		},
		"ComposedStatusByRenderer": {
			reason: "A plain composed resource's status the renderer alone wrote does not go back to the renderer.",
			o: with(nop, func(o *Object) {
				o.Writers = []string{"loom-renderer"}
				o.StatusOnly = true
				o.StatusChanged = object.StatusAll
				o.StatusFieldsChanged = true
			}),
			roles: RoleComposed,
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composed resource status changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource status changed"},
			},
		},
		"NoRoles": {
			reason: "An object whose kind plays no role goes nowhere.",
			o:      nop,
		},
		"BoundXRNoRules": {
			reason: "Where no ReferenceRule names the kinds an XR composes, the binder hears of the XR for its claim only.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
			}),
			roles: RoleXR,
			l:     unreferenced(gvkNop),
			want: []Delivery{
				{Service: Binder, Target: claim, Reason: "bound composite resource changed"},
				{Service: Renderer, Target: xr, Reason: "composite resource changed"},
				{Service: Secrets, Target: xr, Reason: "composite resource changed"},
			},
		},
		"XROneReferencedKind": {
			reason: "One referenced kind among an XR's composed kinds is enough for the binder.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ComposedKinds = []schema.GroupKind{gvkCM.GroupKind(), gvkNop.GroupKind()}
			}),
			roles: RoleXR,
			l:     unreferenced(gvkCM),
			want: []Delivery{
				{Service: Binder, Target: xr, Reason: "composite resource changed"},
				{Service: Renderer, Target: xr, Reason: "composite resource changed"},
				{Service: Secrets, Target: xr, Reason: "composite resource changed"},
			},
		},
		"XRCreatedByBinder": {
			reason: "A claim's XR, just created by the binder, goes to the renderer only: the secrets service hears of it with the renderer's first write.",
			o: with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) {
				o.ComposedKinds, o.Created, o.Writers = nil, true, []string{"loom-binder"}
				o.ClaimRef = &object.Reference{APIVersion: "example.org/v1alpha1", Kind: "Database", Namespace: "team-a", Name: "db"}
			}),
			roles: RoleXR,
			want:  []Delivery{{Service: Renderer, Target: xr, Reason: "composite resource changed"}},
		},
		"NewXRNoResources": {
			reason: "An XR that composes nothing yet has no references to resolve.",
			o:      with(obj(gvkXR, "", xr.Name, xr.UID), func(o *Object) { o.ComposedKinds = nil }),
			roles:  RoleXR,
			want: []Delivery{
				{Service: Renderer, Target: xr, Reason: "composite resource changed"},
				{Service: Secrets, Target: xr, Reason: "composite resource changed"},
			},
		},
		"ComposedNoRules": {
			reason: "A composed resource whose kind no ReferenceRule names does not go to the binder.",
			o:      nop,
			roles:  RoleComposed,
			l:      unreferenced(gvkNop),
			want: []Delivery{
				{Service: Renderer, Target: xr, Reason: "composed resource changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource changed"},
			},
		},
		"ComposedStatusNoRules": {
			reason: "Nor does its status.",
			o:      with(nop, func(o *Object) { o.StatusOnly = true; o.StatusFieldsChanged = true }),
			roles:  RoleComposed,
			l:      unreferenced(gvkNop),
			want: []Delivery{
				{Service: Renderer, Target: xr, Reason: "composed resource status changed"},
				{Service: Secrets, Target: xr, Reason: "composed resource status changed"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := tc.l
			if l == nil {
				l = lookup
			}
			got := Route(tc.o, tc.roles, l)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nRoute(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRoleString(t *testing.T) {
	if got, want := (RoleXR | RoleComposed).String(), "XR|Composed"; got != want {
		t.Errorf("String(): want %q, got %q", want, got)
	}
}
