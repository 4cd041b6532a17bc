// Package roles computes the rules of the ClusterRoles the RBAC manager
// keeps: for each of Loom's services, the rights it needs on the XR and
// claim kinds of every XRD; for users, edit and view rights on the claim
// kinds, aggregated into Kubernetes' built-in admin, edit and view roles.
//
// The roles have fixed names (Names) and are installed empty, with their
// aggregation labels, by the chart or the local stack. The RBAC manager only
// ever updates their rules, which is what lets its own ClusterRole restrict
// patch and escalate to exactly these names (resourceNames): RBAC cannot
// restrict create by name, and a per-XRD role would need both create and an
// unrestricted escalate, that is the right to grant anything.
package roles

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

// Names of the ClusterRoles the RBAC manager keeps.
const (
	Watcher   = "loom:xrds:watcher"
	Renderer  = "loom:xrds:renderer"
	Binder    = "loom:xrds:binder"
	Secrets   = "loom:xrds:secrets" //nolint:gosec // A role name, not a credential.
	Admission = "loom:xrds:admission"
	Edit      = "loom:xrds:aggregate-to-edit"
	View      = "loom:xrds:aggregate-to-view"
)

// Names returns the names of every ClusterRole the RBAC manager keeps, in a
// fixed order.
func Names() []string { return []string{Watcher, Renderer, Binder, Secrets, Admission, Edit, View} }

// Verbs of the user-facing roles, as Crossplane's RBAC manager grants them
// on an XRD's kinds: everything to editors (and admins), read to viewers.
var (
	verbsEdit = []string{rbacv1.VerbAll}         //nolint:gochecknoglobals // Treated as a constant.
	verbsView = []string{"get", "list", "watch"} //nolint:gochecknoglobals // Treated as a constant.
)

// A grant is the verbs one role needs on one kind of an XRD.
type grant struct {
	role  string
	claim bool // the claim kind, else the XR kind
	sub   string
	verbs []string
}

// grants are the rights of each role, per kind; see the comments of
// deploy/helm/loom/files/rbac/<service>.yaml for why each verb is needed.
var grants = []grant{ //nolint:gochecknoglobals // Treated as a constant.
	{role: Watcher, verbs: []string{"get", "list", "watch"}},
	{role: Watcher, claim: true, verbs: []string{"get", "list", "watch"}},

	// Claims: resourceRef, finalizer and spec back-propagation; status by
	// server-side apply. XRs: name-then-create by server-side apply, delete
	// or release on claim deletion, Bound and ReferencesResolved conditions.
	{role: Binder, claim: true, verbs: []string{"get", "update", "patch"}},
	{role: Binder, claim: true, sub: "status", verbs: []string{"get", "patch"}},
	{role: Binder, verbs: []string{"get", "create", "patch", "delete"}},
	{role: Binder, sub: "status", verbs: []string{"get", "patch"}},

	// XRs: spec machinery by merge patch, list to requeue XRs after a
	// Composition changed, delete (and claims too) when the XRD is deleted;
	// status by server-side apply. Create: an XR composed by another XR's
	// Composition (a nested XR) is a composed resource, applied by the
	// renderer like any other.
	{role: Renderer, verbs: []string{"get", "list", "create", "patch", "delete"}},
	{role: Renderer, sub: "status", verbs: []string{"get", "patch"}},
	{role: Renderer, claim: true, verbs: []string{"list", "delete"}},

	// Connection Secret references, readiness. A claim is read for where
	// its copy goes; its lastPublishedTime is the binder's. The status
	// right is for replicas of the previous version during an upgrade:
	// the renderer now writes the ConnectionDetailsReady condition and
	// lastPublishedTime that the secrets service hands over.
	{role: Secrets, verbs: []string{"get"}},
	{role: Secrets, sub: "status", verbs: []string{"get", "patch"}},
	{role: Secrets, claim: true, verbs: []string{"get"}},

	// XRs that Usages name (cluster-scoped, so never claims): read and
	// selected by label; the in-use label and the refused deletion's
	// annotation; the replayed deletion.
	{role: Admission, verbs: []string{"get", "list", "patch", "delete"}},

	// Users author claims in their namespaces with kubectl.
	{role: Edit, claim: true, verbs: verbsEdit},
	{role: Edit, claim: true, sub: "status", verbs: verbsEdit},
	{role: View, claim: true, verbs: verbsView},
	{role: View, claim: true, sub: "status", verbs: verbsView},
}

// Rules returns the rules of each role of Names for the supplied XRDs. It
// is deterministic: XRDs are taken in order of name, whatever order they
// come in, and rules with the same group and verbs share one rule. Every
// role of Names has an entry, empty when no XRD needs it. XRDs being
// deleted keep their rules: the renderer still lists and deletes their
// claims and XRs.
func Rules(xrds []*v1.CompositeResourceDefinition) map[string][]rbacv1.PolicyRule {
	sorted := slices.Clone(xrds)
	slices.SortFunc(sorted, func(a, b *v1.CompositeResourceDefinition) int { return strings.Compare(a.GetName(), b.GetName()) })
	out := make(map[string][]rbacv1.PolicyRule, len(Names()))
	for _, n := range Names() {
		out[n] = []rbacv1.PolicyRule{}
	}
	for _, xrd := range sorted {
		g := xrd.Spec.Group
		if g == "" || xrd.Spec.Names.Plural == "" {
			continue
		}
		for _, gr := range grants {
			plural := xrd.Spec.Names.Plural
			if gr.claim {
				if !xrd.OffersClaim() || xrd.Spec.ClaimNames.Plural == "" {
					continue
				}
				plural = xrd.Spec.ClaimNames.Plural
			}
			res := plural
			if gr.sub != "" {
				res += "/" + gr.sub
			}
			out[gr.role] = add(out[gr.role], g, res, gr.verbs)
		}
	}
	return out
}

// add adds resource of group with verbs to rules: to the rule of the same
// group and verbs if there is one, else as a new rule.
func add(rules []rbacv1.PolicyRule, group, resource string, verbs []string) []rbacv1.PolicyRule {
	for i := range rules {
		r := &rules[i]
		if slices.Equal(r.APIGroups, []string{group}) && slices.Equal(r.Verbs, verbs) {
			if !slices.Contains(r.Resources, resource) {
				r.Resources = append(r.Resources, resource)
			}
			return rules
		}
	}
	return append(rules, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: slices.Clone(verbs)})
}
