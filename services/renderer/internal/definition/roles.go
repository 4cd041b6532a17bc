package definition

import (
	"context"
	"fmt"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/apply"
	"github.com/loomxr/loom/services/renderer/internal/kube"
)

// AggregationLabel returns the label that aggregates a ClusterRole into the
// role of a Loom service, for example loom.dev/aggregate-to-binder.
func AggregationLabel(service string) string { return "loom.dev/aggregate-to-" + service }

var clusterRoleGVK = schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}

// Roles returns the ClusterRoles that give Loom's services their rights on
// the XR and claim kinds of xrd, one per service, each labelled to
// aggregate into that service's role and controlled by the XRD (so that the
// garbage collector removes them with it):
//
//	watcher   XRs, claims: get, list, watch
//	binder    claims: get, update, patch; claims/status: get, patch;
//	          XRs: get, create, patch, delete; XRs/status: get, patch
//	renderer  XRs: get, list, patch, delete; XRs/status: get, patch;
//	          claims: list, delete
//	secrets   XRs, claims: get; XRs/status, claims/status: get, patch
func Roles(xrd *v1.CompositeResourceDefinition) []*unstructured.Unstructured {
	g := xrd.Spec.Group
	xrs := xrd.Spec.Names.Plural
	claims := ""
	if xrd.OffersClaim() {
		claims = xrd.Spec.ClaimNames.Plural
	}
	rule := func(verbs []string, resources ...string) map[string]any {
		var rs []any
		for _, r := range resources {
			if r != "" && r != "/status" {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			return nil
		}
		vs := make([]any, len(verbs))
		for i, v := range verbs {
			vs[i] = v
		}
		return map[string]any{"apiGroups": []any{g}, "resources": rs, "verbs": vs}
	}
	status := func(r string) string {
		if r == "" {
			return ""
		}
		return r + "/status"
	}
	perService := []struct {
		service string
		rules   []map[string]any
	}{
		{"watcher", []map[string]any{rule([]string{"get", "list", "watch"}, xrs, claims)}},
		{"binder", []map[string]any{
			rule([]string{"get", "update", "patch"}, claims),
			rule([]string{"get", "patch"}, status(claims), status(xrs)),
			rule([]string{"get", "create", "patch", "delete"}, xrs),
		}},
		{"renderer", []map[string]any{
			rule([]string{"get", "list", "patch", "delete"}, xrs),
			rule([]string{"get", "patch"}, status(xrs)),
			rule([]string{"list", "delete"}, claims),
		}},
		{"secrets", []map[string]any{
			rule([]string{"get"}, xrs, claims),
			rule([]string{"get", "patch"}, status(xrs), status(claims)),
		}},
	}
	out := make([]*unstructured.Unstructured, 0, len(perService))
	for _, s := range perService {
		var rules []any
		for _, r := range s.rules {
			if r != nil {
				rules = append(rules, r)
			}
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": clusterRoleGVK.GroupVersion().String(),
			"kind":       clusterRoleGVK.Kind,
			"metadata": map[string]any{
				"name":   "loom:xrd:" + xrd.GetName() + ":" + s.service,
				"labels": map[string]any{AggregationLabel(s.service): "true"},
				"ownerReferences": []any{map[string]any{
					"apiVersion": v1.SchemeGroupVersion.String(), "kind": v1.CompositeResourceDefinitionKind,
					"name": xrd.GetName(), "uid": string(xrd.GetUID()), "controller": true, "blockOwnerDeletion": true,
				}},
			},
			"rules": rules,
		}}
		out = append(out, u)
	}
	return out
}

// applyRoles applies the XRD's ClusterRoles (see Roles) that differ from
// what the cluster holds.
func (r *Reconciler) applyRoles(ctx context.Context, xrd *v1.CompositeResourceDefinition) error {
	for _, intent := range Roles(xrd) {
		cur, err := r.client.Get(ctx, clusterRoleGVK, "", intent.GetName())
		if kerrors.IsNotFound(err) {
			cur, err = nil, nil
		}
		if err != nil {
			return fmt.Errorf("cannot get ClusterRole %q: %w", intent.GetName(), err)
		}
		change, err := apply.Changes(cur, intent, kube.FieldManager, "")
		if err != nil {
			return err
		}
		if !change {
			continue
		}
		if _, err := r.client.Apply(ctx, intent); err != nil {
			return fmt.Errorf("cannot apply ClusterRole %q: %w", intent.GetName(), err)
		}
	}
	return nil
}
