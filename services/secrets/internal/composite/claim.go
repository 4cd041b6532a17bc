package composite

import (
	"context"
	"fmt"
	"slices"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kitkube "github.com/loomxr/loom/pkg/kube"
	"github.com/loomxr/loom/services/secrets/internal/secret"
)

// copyToClaim copies data to the Secret of the XR's claim, if it is bound
// to one that asks for it, and reports whether it wrote the Secret.
func (r *Reconciler) copyToClaim(ctx context.Context, st *xrState, data map[string][]byte) (bool, error) {
	apiVersion, _, _ := unstructured.NestedString(st.xr.Object, "spec", "claimRef", "apiVersion")
	kind, _, _ := unstructured.NestedString(st.xr.Object, "spec", "claimRef", "kind")
	ns, _, _ := unstructured.NestedString(st.xr.Object, "spec", "claimRef", "namespace")
	name, _, _ := unstructured.NestedString(st.xr.Object, "spec", "claimRef", "name")
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" || ns == "" || name == "" {
		return false, nil //nolint:nilerr // A claimRef that names no claim asks for no copy.
	}
	// The claim's status is written with server-side apply.
	claim, err := r.client.Get(kitkube.Guarded(ctx), gv.WithKind(kind), ns, name)
	if kerrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot get claim %s %s/%s: %w", kind, ns, name, err)
	}
	if bound, _, _ := unstructured.NestedString(claim.Object, "spec", "resourceRef", "name"); bound != st.xr.GetName() || claim.GetDeletionTimestamp() != nil {
		return false, nil
	}
	to, _, _ := unstructured.NestedString(claim.Object, "spec", fieldWriteConnection, "name")
	if to == "" {
		return false, nil
	}
	k := secret.Key{Namespace: ns, Name: to}
	deps := st.deps
	deps.Secrets = append(slices.Clone(st.deps.Secrets), k)
	r.tracker.Track(st.target, deps)
	// The claim's status.connectionDetails.lastPublishedTime is the
	// binder's: it copies the XR's with the rest of the claim's status,
	// one write of the claim's status instead of two.
	return r.store.Ensure(ctx, secret.Desired{Key: k, Owner: ownerRef(claim), Data: data})
}

// ownerRef makes o the controller of a Secret.
func ownerRef(o *unstructured.Unstructured) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), UID: o.GetUID(), Controller: &yes}
}
