// Package route decides which services must react to a change of an object,
// and which object each of them reconciles because of it (the target). It is
// pure: the caller supplies the object as the watcher caches it, the roles its
// kind plays, and lookups into the watcher's caches.
//
// The routing table:
//
//	object (role)                 service   target
//	XRD                           renderer  the XRD
//	CRD controlled by an XRD      renderer  the controlling XRD
//	Composition                   renderer  the Composition
//	CompositionRevision           renderer  the controlling Composition
//	EnvironmentConfig             renderer  the EnvironmentConfig
//	Function (loom.dev)           renderer  the Function
//	ReferenceRule (loom.dev)      binder    the ReferenceRule
//	XR                            renderer  the XR
//	                              secrets   the XR, not when the binder
//	                                        created it
//	                              binder    the XR (*) (**)
//	                              binder    its claim (spec.claimRef, if cached)
//	claim                         binder    the claim (*)
//	                              secrets   the claim (*), not when created
//	composed resource (labelled   renderer  the controlling XR, not for a
//	crossplane.io/composite, with           change of the status that
//	a controller reference)                 leaves the Ready condition
//	                                        as it was, where no patch or
//	                                        readiness check of the
//	                                        resource's template reads its
//	                                        status
//	                                        (nor, while the XR has no
//	                                        Ready condition yet, for a
//	                                        change of the Ready condition
//	                                        while another resource of it
//	                                        has no status: see Withheld)
//	                              binder    the controlling XR (**)
//	                              secrets   the controlling XR, not for a
//	                                        change of the status's
//	                                        conditions alone, nor of the
//	                                        status of a resource whose
//	                                        template reads none of it
//	                                        into connection details, nor
//	                                        for a creation while the XR
//	                                        is not Ready
//	watched on request of XRs     renderer  each requesting XR
//
// (**) Only where a ReferenceRule names the composed resource's kind (or,
// for an XR, one of the kinds its resourceRefs name), as the kind whose
// references it resolves or as a target: the binder reconciles an XR only
// to resolve references among its composed resources. And for a composed
// resource, only for a change the binder can act on (referenceNews): the
// creation or spec of one holding a reference or selector of a rule, or a
// target showing the condition its rules wait for (or without waitFor)
// while a reference of its XR has not resolved. So a target's creation and
// its status before it turns Ready wake no binder, nor does anything of an
// XR whose references all resolved but a resource's own references. A rule made later
// reaches the XRs it concerns through the binder's fan-out of the rule.
// Platforms moved from Crossplane have no ReferenceRules at all, and their
// composed resources' changes then never wake the binder.
//
// (*) Not for a change of the status alone (Object.StatusOnly): the binder
// reads nothing from a claim's status, or from its XR target's status, but
// what it wrote there itself, and the secrets service reads nothing from a
// claim's status, so such a change (typically their own write) would only
// cost them a reconcile of reads.
//
// A change of an XR's status alone goes only where a part of the status
// that a service reads changed (Object.StatusChanged):
//
//	renderer          the status outside the machinery's own fields
//	                  (conditions, connectionDetails, claimConditionTypes,
//	                  loom, watchedResourceRefs, crossplane): what
//	                  ToCompositeFieldPath patches and functions wrote, and
//	                  FromCompositeFieldPath patches may read; and the
//	                  XR's first Ready condition, when it is not True and
//	                  a composed resource's readiness was withheld
//	                  (Object.ReadinessWithheld), even by its own write
//	secrets           whether the Ready condition is True (it copies the
//	                  XR's Secret to the claim once the XR is Ready)
//	binder (claim)    what it mirrors to the claim: the Ready condition's
//	                  status, the conditions listed in claimConditionTypes
//	                  and the status outside conditions, connectionDetails
//	                  and watchedResourceRefs
//	binder (XR)       whether its ReferencesResolved condition turned
//	                  from True or none to anything else
//	                  (object.StatusUnresolved), even by its own write
//
// So the services' own writes of conditions (Synced and Ready's message,
// ReferencesResolved turning True, ConnectionDetailsReady) and of
// connectionDetails wake no one. The cost: a patch that reads one of the
// machinery fields of its XR (status.conditions, say) is re-run with the
// XR's next other change rather than at once.
//
// A change that a service's field manager made alone (Object.Writers) does
// not go back to that service, for claims, XRs (but for the status parts
// above, which the renderer's patches and the claim's mirror read even when
// they wrote them) and composed resources: its own write is what it just
// decided, and the reconcile that wrote it carries on with the result
// (except that the renderer hears of the composed resources it created for
// an XR composed by a function pipeline: functions judge them in the next
// render). The
// binder's two writers (claims and references) write apart: claims and XR
// specs, and composed resources' references.
//
// Urgent deliveries report progress of work under way: a change of an XR's
// readiness, to the secrets service and to the binder's mirror of the claim,
// a new publication of a Ready XR's connection Secret, to the binder's
// mirror of the claim (a claim that asks for a Secret turns Ready with it),
// and a composed resource turning Ready (its Ready condition's status turned
// True, Object.TurnedReady), to the renderer and, when it reads the
// resource's status into connection details, to the secrets service (the
// XR's Ready waits for their publication). The bus serves them before the
// rest of their tenants' requests (eventsv1.Event.Urgent), so that a claim whose
// resources are Ready does not wait behind the backlog of new claims. Other
// changes of a composed resource's status are not urgent: a status that
// never settles would take the lane from everyone; and the watcher bounds
// the urgent deliveries one target gets in a minute (see package watch), so
// that neither can resources whose readiness flaps.
//
// A kind may play several roles (an XR composed by another XR is both an XR
// and a composed resource); its deliveries are the union, one per service and
// target. Such a nested XR is the one object whose renderer writes are news
// to the renderer: its parent's render writes its spec and metadata, which
// its own render has yet to see, and its own render writes the status its
// parent reads (readiness, patchable fields). So the renderer hears of the
// renderer's writes of a nested XR, for itself (any change but of the status
// alone) and for its parent (a change of the Ready condition's status or of
// the patchable status). A plain composed resource's writes by the renderer
// still do not go back to it.
package route

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	eventsv1 "github.com/loomxr/loom/proto/events/v1"
	"github.com/loomxr/loom/services/watcher/internal/object"
)

// Services that receive events, named as the bus names their streams.
const (
	Renderer = "renderer"
	Binder   = "binder"
	Secrets  = "secrets"
)

// Role is a part an object's kind plays for the watcher. Roles combine with |.
type Role uint16

// Roles.
const (
	RoleXRD Role = 1 << iota
	RoleCRD
	RoleComposition
	RoleRevision
	RoleEnvironmentConfig
	RoleFunction
	RoleReferenceRule
	RoleXR
	RoleClaim
	RoleComposed
	RoleRequested
)

var roleNames = []string{ //nolint:gochecknoglobals // Treated as a constant.
	"XRD", "CRD", "Composition", "CompositionRevision", "EnvironmentConfig", "Function", "ReferenceRule", "XR", "Claim", "Composed", "Requested"}

// Has reports whether r includes all of roles.
func (r Role) Has(roles Role) bool { return r&roles == roles }

// String lists the roles, for logs.
func (r Role) String() string {
	var names []string
	for i, n := range roleNames {
		if r&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, "|")
}

// Target names the object a service reconciles.
type Target struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
	UID       types.UID
}

// Delivery says that a service must reconcile a target, and why.
type Delivery struct {
	Service string
	Target  Target
	Reason  string
	// Urgent marks progress of work under way, which the bus serves
	// before the rest of the target's tenant's requests
	// (eventsv1.Event.Urgent).
	Urgent bool
}

// Object is a changed object as the watcher caches it.
type Object struct {
	object.Meta
	// ClaimRef is the claim an XR is bound to, if any.
	ClaimRef *object.Reference
	// StatusOnly is true for an update that changed nothing but the
	// object's status (see object.StatusOnly).
	StatusOnly bool
	// StatusChanged says, for an XR's StatusOnly update, which parts of
	// its status changed (object.StatusChanges).
	StatusChanged object.StatusChange
	// Writers are the field managers that made the change
	// (object.Writers); nil when unknown.
	Writers []string
	// Created is true for the creation of the object.
	Created bool
	// TurnedReady is true for an update that turned the Ready condition of
	// an XR or of an object cached in full True (object.TurnedReady).
	TurnedReady bool
	// StatusFieldsChanged is, for a StatusOnly update of an object other
	// than an XR, whether its status changed outside its conditions
	// (object.StatusFieldsChanged: true when that is not known).
	StatusFieldsChanged bool
	// ReadyConditionChanged is, for a StatusOnly update of an object other
	// than an XR, whether the status, reason or message of its Ready
	// condition changed (object.ReadyConditionChanged: true when that is
	// not known).
	ReadyConditionChanged bool
	// ComposedKinds are, for an XR, the kinds its spec.resourceRefs name.
	ComposedKinds []schema.GroupKind
	// Template is, for a composed resource (not an XR), the name of the
	// template it was composed from (its crossplane.io/composition-
	// resource-name annotation); empty when not known.
	Template string
	// References is what a composed resource (not an XR) is to the
	// ReferenceRules as it is now (object.ReferencesOf); nil when that is
	// not known (a deletion, no full object at hand), which routes the
	// change to the binder wherever a rule names its kind.
	References *object.References
	// AwaitsSiblings is, for a composed resource (not an XR), whether its
	// XR is known to have no Ready condition yet while another of its
	// composed resources, of a template whose readiness requires the Ready
	// condition (object.AnnotationReadyRequired), is known to have no
	// status yet (see Withheld).
	AwaitsSiblings bool
	// ReadinessWithheld is, for an XR, whether the change gives it its
	// first Ready condition, not True, after the renderer was not told of
	// a composed resource's readiness (Withheld): the render that wrote
	// that status may have read the resource before the change.
	ReadinessWithheld bool
}

// Withheld reports whether a change of a composed resource's status is
// withheld from the renderer although its Ready condition changed: the
// change cannot change what a render of its XR does. That is so while the
// XR has no Ready condition and another of its resources, one that must
// be Ready, has no status yet (o.AwaitsSiblings): the XR cannot turn Ready,
// and its first status waits for the resource with no status (the
// renderer's wait for unobserved resources, timed from the resources'
// creation, which a sibling's progress leaves as it was) and is then
// written by a render that reads every resource anew. It takes an XR
// composed in mode Resources (functions judge readiness otherwise) whose
// template of the resource reads nothing of its status into what a render
// writes before the XR's status (ComposedStatusToSpec): what patches read
// into the XR's status waits with the rest of it.
func Withheld(o Object, l Lookup) bool {
	return o.AwaitsSiblings && MayWithhold(o, l)
}

// MayWithhold reports whether Withheld would hold a change of a composed
// resource's status back if o.AwaitsSiblings were true: a change of its
// status alone, of its Ready condition, of a resource of an XR composed in
// mode Resources whose template reads nothing of its status into the XR's
// spec or metadata or the environment.
func MayWithhold(o Object, l Lookup) bool {
	c := o.Controller
	return c != nil && o.StatusOnly && (o.TurnedReady || o.ReadyConditionChanged) &&
		l.ResourcesMode(c.UID) && !l.ComposedStatusToSpec(c.UID, o.Template)
}

// fieldManagers are the field managers of the services' writes.
var fieldManagers = map[string]string{ //nolint:gochecknoglobals // Treated as a constant.
	Renderer: "loom-renderer",
	Binder:   "loom-binder",
	Secrets:  "loom-secrets",
}

// writtenOnlyBy reports whether the change is known to be the service's
// own write alone.
func (o Object) writtenOnlyBy(service string) bool {
	m := fieldManagers[service]
	if len(o.Writers) == 0 || m == "" {
		return false
	}
	for _, w := range o.Writers {
		if w != m {
			return false
		}
	}
	return true
}

// Self returns the object as a target.
func (o Object) Self() Target {
	return Target{GVK: o.GVK, Namespace: o.Namespace, Name: o.Name, UID: o.UID}
}

// Lookup reads the watcher's caches. Implementations must be safe to call
// concurrently.
type Lookup interface {
	// Claim returns the cached claim of the given group, kind, namespace and
	// name.
	Claim(gk schema.GroupKind, namespace, name string) (Target, bool)
	// XR returns the cached XR with the given UID.
	XR(uid types.UID) (Target, bool)
	// Requesters returns the UIDs of the XRs that asked to watch the object.
	Requesters(o object.Meta) []types.UID
	// ResourcesMode reports whether the cached XR with the given UID is
	// known to compose in mode Resources: its compositionRevisionRef names
	// a cached CompositionRevision whose spec.mode is Resources or unset.
	// It is false when that is not known.
	ResourcesMode(uid types.UID) bool
	// NotReady reports whether the cached XR with the given UID is known
	// not to be Ready (its Ready condition is not True); false when that is
	// not known.
	NotReady(uid types.UID) bool
	// ReadsStatus reports whether a render of the cached XR with the given
	// UID may read the XR's status (object.AnnotationReadsStatus of the
	// revision or Composition it is composed with); true when that is not
	// known.
	ReadsStatus(uid types.UID) bool
	// ClaimPropagated returns the summary of what the binder copied from
	// its XR to the cached claim of the given group, kind, namespace and
	// name (object.AnnotationPropagated); empty when that is not known.
	ClaimPropagated(gk schema.GroupKind, namespace, name string) string
	// DetailsFromStatus reports whether the connection details of what the
	// cached XR with the given UID is composed with may read the status of
	// a composed resource of the named template (a FromFieldPath detail
	// under status; object.AnnotationDetailsFromStatus); true when that is
	// not known.
	DetailsFromStatus(uid types.UID, template string) bool
	// ReadsComposedSpec reports whether a render of the cached XR with
	// the given UID may read a composed resource of the named template
	// outside its status (a patch or readiness check;
	// object.AnnotationReadsComposedSpec); true when that is not known.
	ReadsComposedSpec(uid types.UID, template string) bool
	// ReadsComposedStatus reports whether a render of the cached XR with
	// the given UID may read the status of a composed resource of the named
	// template beyond its Ready condition (a patch or readiness check;
	// object.AnnotationReadsComposedStatus); true when that is not known.
	ReadsComposedStatus(uid types.UID, template string) bool
	// ComposedStatusToSpec reports whether a render of the cached XR with
	// the given UID may read the status of a composed resource of the named
	// template into the XR's spec or metadata or the environment (a patch;
	// object.AnnotationStatusToSpec); true when that is not known.
	ComposedStatusToSpec(uid types.UID, template string) bool
	// DetailsFromSpec reports whether the connection details of what the
	// cached XR with the given UID is composed with may read a composed
	// resource of the named template outside its status
	// (object.AnnotationDetailsFromSpec); true when that is not known.
	DetailsFromSpec(uid types.UID, template string) bool
	// ReferencesPending reports whether a composed resource of the XR with
	// the given UID holds a reference or selector that has not resolved
	// yet or resolves again whenever a target changes
	// (object.References.Pending); true when that is not known.
	ReferencesPending(uid types.UID) bool
	// Unresolved reports whether the cached XR with the given UID is
	// known to show ReferencesResolved not True (a reference waits or
	// failed); false when that is not known.
	Unresolved(uid types.UID) bool
	// Referenced reports whether a ReferenceRule names kind gk, as the
	// kind whose references it resolves (spec.for) or as a target, or
	// whether that is not known (the rules are not listed yet).
	Referenced(gk schema.GroupKind) bool
}

// Route returns the deliveries a change of o causes, given the roles its kind
// plays. The result is sorted by service, then target UID, and holds at most
// one delivery per service and target.
func Route(o Object, roles Role, l Lookup) []Delivery {
	var ds []Delivery
	// deliver sends the change to each service; with unlessOwn, not to a
	// service whose field manager alone made it (for a change of a claim,
	// an XR's spec or metadata, or a composed resource).
	deliver := func(urgent, unlessOwn bool, reason string, t Target, services ...string) {
		for _, s := range services {
			if !unlessOwn || !o.writtenOnlyBy(s) {
				ds = append(ds, Delivery{Service: s, Target: t, Reason: reason, Urgent: urgent})
			}
		}
	}
	add := func(reason string, t Target, services ...string) { deliver(false, false, reason, t, services...) }
	self := o.Self()

	if roles.Has(RoleXRD) {
		add("definition changed", self, Renderer)
	}
	if roles.Has(RoleCRD) {
		if c := o.Controller; c != nil && isKind(c.APIVersion, c.Kind, object.KindXRD.GroupKind()) {
			add("generated CRD changed", controllerTarget(o, l), Renderer)
		}
	}
	if roles.Has(RoleComposition) {
		add("composition changed", self, Renderer)
	}
	if roles.Has(RoleRevision) {
		if c := o.Controller; c != nil && isKind(c.APIVersion, c.Kind, object.KindComposition.GroupKind()) {
			add("composition revision changed", controllerTarget(o, l), Renderer)
		}
	}
	if roles.Has(RoleEnvironmentConfig) {
		add("environment config changed", self, Renderer)
	}
	if roles.Has(RoleFunction) {
		add("function changed", self, Renderer)
	}
	if roles.Has(RoleReferenceRule) {
		add("reference rule changed", self, Binder)
	}
	nested := roles.Has(RoleXR|RoleComposed) && o.Controller != nil && hasLabel(o.Labels, object.LabelComposite)
	if roles.Has(RoleXR) {
		// The binder reconciles an XR (as opposed to its claim) only to
		// resolve the references among its composed resources: an XR
		// none of whose composed kinds a ReferenceRule names has none.
		var resolvers []string
		if !o.Created || !o.writtenOnlyBy(Binder) {
			// The binder creates a claim's XR with nothing composed and
			// no connection Secret to publish: the secrets service hears
			// of it with the renderer's first write of it.
			resolvers = append(resolvers, Secrets)
		}
		if slices.ContainsFunc(o.ComposedKinds, l.Referenced) {
			resolvers = append(resolvers, Binder)
		}
		switch {
		case !o.StatusOnly && nested:
			// The renderer's write of a nested XR is its parent's render
			// (or the nested XR's own machinery patch, which costs a
			// reconcile that writes nothing): the nested XR's render has
			// yet to see it.
			add("composite resource changed", self, Renderer)
			deliver(false, true, "composite resource changed", self, resolvers...)
		case !o.StatusOnly:
			deliver(false, true, "composite resource changed", self, append([]string{Renderer}, resolvers...)...)
		default:
			if o.StatusChanged&object.StatusPatchable != 0 && (!o.writtenOnlyBy(Renderer) || l.ReadsStatus(o.UID)) {
				// Patchable fields the renderer wrote itself (the results
				// of ToCompositeFieldPath patches, say) are news to it
				// only when its render reads the XR's status.
				add("composite resource status changed", self, Renderer)
			}
			if o.StatusChanged&object.StatusReadyTrue != 0 {
				// The secrets service tells only a Ready XR from one that
				// is not (a first "Creating" is no news to it).
				deliver(true, false, "composite resource readiness changed", self, Secrets)
			}
			if o.StatusChanged&object.StatusUnresolved != 0 && slices.Contains(resolvers, Binder) {
				// The binder's own write, back once the mirror holds it:
				// it turns the condition True when the references
				// resolve only where the XR shows it said otherwise, so
				// a binder that forgot the write (a restart) must read it
				// from the mirror rather than from its memory. Rare: a
				// reference that resolves at once writes no condition.
				add("composite resource references unresolved", self, Binder)
			}
		}
		if o.ReadinessWithheld {
			// The first status, not Ready, may name a resource as not
			// Ready whose turn to Ready was withheld: a render now
			// reads it anew.
			add("composite resource readiness withheld", self, Renderer)
		}
		if r := o.ClaimRef; r != nil && (!o.StatusOnly || o.StatusChanged&object.StatusClaim != 0) {
			if claim, ok := l.Claim(r.GroupKind(), r.Namespace, r.Name); ok {
				switch {
				case o.StatusOnly && o.StatusChanged&object.StatusReady != 0:
					deliver(true, false, "bound composite resource readiness changed", claim, Binder)
				case o.StatusOnly && o.StatusChanged&object.StatusPublished != 0:
					// A claim that asks for a connection Secret turns
					// Ready with its publication: progress, like Ready.
					deliver(true, false, "bound composite resource published its connection Secret", claim, Binder)
				case o.StatusOnly:
					// The mirror copies the binder's own conditions too.
					add("bound composite resource changed", claim, Binder)
				case o.writtenOnlyBy(Renderer) && !o.Deleting && o.Propagated != "" &&
					o.Propagated == l.ClaimPropagated(r.GroupKind(), r.Namespace, r.Name):
					// The renderer's write of the XR's spec (its
					// resourceRefs, the connection Secret's reference,
					// the revision the binder named on the claim when
					// it bound it) leaves the binder nothing to copy
					// back to the claim: the claim holds what the XR
					// does.
				default:
					deliver(false, true, "bound composite resource changed", claim, Binder)
				}
			}
		}
	}
	if roles.Has(RoleClaim) && !o.StatusOnly && !o.writtenOnlyBy(Binder) {
		// What the binder alone writes to a claim (its resourceRef and
		// finalizer, the fields it propagates back) is news to neither
		// service: the secrets service finds a claim through its XR's
		// claimRef, a change of the XR. So is a claim's creation to the
		// secrets service: its XR, created after it, brings the claim
		// along; only a later change of the claim (a new
		// writeConnectionSecretToRef) is news.
		add("claim changed", self, Binder)
		if !o.Created {
			add("claim changed", self, Secrets)
		}
	}
	if roles.Has(RoleComposed) && o.Controller != nil && hasLabel(o.Labels, object.LabelComposite) {
		xr := controllerTarget(o, l)
		// The binder hears of a composed resource only where a
		// ReferenceRule names its kind (see the XR's case above), and
		// only of a change it can act on (referenceNews).
		readers := []string{Secrets}
		if l.Referenced(o.GVK.GroupKind()) && referenceNews(o, l) {
			readers = append(readers, Binder)
		}
		// The readers other than the secrets service, for changes that
		// are no news to it (below).
		notSecrets := readers[1:]
		// The secrets service reads a composed resource's status only
		// through connection details of type FromFieldPath, never its
		// conditions: a change of the conditions alone (a provider's
		// Ready and Synced) is no news to it, nor is any change of the
		// status of a resource whose template has no such detail under
		// status. (A nested XR's status is summarised otherwise, see
		// the XR's case.)
		statusReaders := readers
		if (!o.StatusFieldsChanged || !l.DetailsFromStatus(o.Controller.UID, o.Template)) && !roles.Has(RoleXR) {
			statusReaders = notSecrets
		}
		switch {
		case o.StatusOnly && nested && o.StatusChanged&(object.StatusReady|object.StatusPatchable) != 0:
			// The renderer wrote the nested XR's status in the nested
			// XR's render; its parent reads readiness and patchable
			// fields from it (its turn to Ready is urgent).
			deliver(o.TurnedReady, false, eventsv1.ReasonComposedStatusChanged, xr, Renderer)
			deliver(false, true, eventsv1.ReasonComposedStatusChanged, xr, readers...)
		case o.StatusOnly && o.TurnedReady:
			// Readiness progress: the XR may be Ready now. Urgent for
			// the renderer, which decides it, so that a claim whose
			// resources are Ready does not wait behind the backlog of
			// new claims (the watcher bounds how often one target gets
			// urgent deliveries); unless a sibling with no status yet
			// keeps the XR from it (Withheld).
			if !Withheld(o, l) {
				deliver(true, true, eventsv1.ReasonComposedTurnedReady, xr, Renderer)
			}
			if len(statusReaders) > 0 && statusReaders[0] == Secrets {
				// Urgent for the secrets service too when it reads
				// this status into connection details: the XR's Ready
				// waits for their publication (the renderer's
				// publication wait).
				deliver(true, true, eventsv1.ReasonComposedTurnedReady, xr, Secrets)
				statusReaders = statusReaders[1:]
			}
			deliver(false, true, eventsv1.ReasonComposedStatusChanged, xr, statusReaders...)
		case o.StatusOnly:
			// Not urgent: any other change of a status, which may be
			// one that never settles. The renderer reads a composed
			// resource's status through its Ready condition (readiness,
			// the XR's summary of resources not Ready), and beyond it
			// only where its Composition does (a patch or readiness
			// check under status): what a provider writes under
			// atProvider, or its Synced condition, is no news to it
			// otherwise.
			if (o.ReadyConditionChanged || l.ReadsComposedStatus(o.Controller.UID, o.Template)) && !Withheld(o, l) {
				deliver(false, true, eventsv1.ReasonComposedStatusChanged, xr, Renderer)
			}
			deliver(false, true, eventsv1.ReasonComposedStatusChanged, xr, statusReaders...)
		default:
			// The renderer hears of the creations it made in mode
			// Pipeline: functions see a composed resource (to judge it
			// ready, say) only in the render after the one that created
			// it. In mode Resources the render that created it judged the
			// API server's answer already, so the creation would cost a
			// render that changes nothing.
			//
			// Nor does it hear of the binder's own changes (a resolved
			// reference) of a resource whose template it reads only in
			// its status: the render's inputs are the XR, its
			// environment and what its patches and readiness checks read
			// of composed resources, and the binder writes only fields
			// the render does not set.
			byBinder := !o.Created && o.writtenOnlyBy(Binder)
			if !byBinder || l.ReadsComposedSpec(o.Controller.UID, o.Template) {
				deliver(false, !o.Created || l.ResourcesMode(o.Controller.UID), "composed resource changed", xr, Renderer)
			}
			if o.Created && l.NotReady(o.Controller.UID) {
				// The secrets service reads every composed resource of
				// an XR when the XR turns Ready, and copies nothing to
				// the claim before; a resource created earlier has no
				// status and no connection Secret yet, which its later
				// changes bring (the tracker finds the Secret by its
				// own watch). A creation once the XR is Ready (a new
				// template) is news.
				readers = notSecrets
			}
			if byBinder && !l.DetailsFromSpec(o.Controller.UID, o.Template) {
				// The binder writes resolved references, which the
				// secrets service reads only into a detail of type
				// FromFieldPath outside status.
				readers = notSecrets
			}
			deliver(false, true, "composed resource changed", xr, readers...)
		}
	}
	if roles.Has(RoleRequested) {
		for _, uid := range l.Requesters(o.Meta) {
			if xr, ok := l.XR(uid); ok {
				add("watched resource changed", xr, Renderer)
			}
		}
	}
	return normalize(ds)
}

// referenceNews reports whether a change of o, a composed resource of a
// kind a ReferenceRule names, is news to the binder: the creation or a
// change of the spec of a resource holding a reference or selector to
// resolve; a change of a target that shows what the references wait for,
// while a reference of its XR has not resolved (once every one resolved, a
// target's progress changes nothing: references resolve if not present,
// unless a policy says Always, which keeps them pending); and a creation or
// a usable target while the XR says a reference waits or failed (a
// reference that waited for no target to match may match the new one, and
// the condition then says what it waits for now). A target that does not
// show what the references wait for cannot resolve anything yet: the
// change that shows it can.
func referenceNews(o Object, l Lookup) bool {
	r := o.References
	if r == nil {
		return true
	}
	xr := o.Controller.UID
	switch {
	case r.Source && !o.StatusOnly:
		return true
	case r.Target && l.ReferencesPending(xr):
		return true
	}
	return (r.Target || o.Created) && l.Unresolved(xr)
}

// controllerTarget names the controller of o. The controller's namespace is
// not in its owner reference; an XR's comes from the cache, and any other
// controller is taken to be cluster scoped (XRDs and Compositions are).
func controllerTarget(o Object, l Lookup) Target {
	c := o.Controller
	if xr, ok := l.XR(c.UID); ok {
		return xr
	}
	gv, _ := schema.ParseGroupVersion(c.APIVersion)
	return Target{GVK: gv.WithKind(c.Kind), Name: c.Name, UID: c.UID}
}

func isKind(apiVersion, kind string, gk schema.GroupKind) bool {
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && gv.Group == gk.Group && kind == gk.Kind
}

func hasLabel(l map[string]string, k string) bool {
	_, ok := l[k]
	return ok
}

// normalize sorts deliveries and keeps the first of each service and target,
// urgent if any of them is.
func normalize(ds []Delivery) []Delivery {
	if len(ds) == 0 {
		return nil
	}
	slices.SortStableFunc(ds, func(a, b Delivery) int {
		if c := strings.Compare(a.Service, b.Service); c != 0 {
			return c
		}
		return strings.Compare(string(a.Target.UID), string(b.Target.UID))
	})
	out := ds[:1]
	for _, d := range ds[1:] {
		last := &out[len(out)-1]
		if d.Service == last.Service && d.Target.UID == last.Target.UID {
			last.Urgent = last.Urgent || d.Urgent
			continue
		}
		out = append(out, d)
	}
	return out
}
