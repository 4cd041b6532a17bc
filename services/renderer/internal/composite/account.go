package composite

import (
	"errors"
	"fmt"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loomxr/loom/pkg/impersonate"
)

// impersonate makes st's composer the client that acts as the ServiceAccount
// the XRD names, if it names one. Only writes of composed resources go
// through it: the renderer reads them, and writes the XR, as itself.
func (r *Reconciler) impersonate(st *state) error {
	sa := st.xrd.Spec.ServiceAccountRef
	if sa == nil {
		return nil
	}
	st.account = sa.Namespace + "/" + sa.Name
	if r.as == nil {
		return fmt.Errorf("%w: CompositeResourceDefinition %q names service account %s, and this renderer cannot impersonate", errInvalidSpec, st.xrd.GetName(), st.account)
	}
	c, err := r.as(impersonate.ServiceAccountUser(sa.Namespace, sa.Name))
	if err != nil {
		return fmt.Errorf("cannot act as service account %s: %w", st.account, err)
	}
	st.composer = c
	return nil
}

// writeError describes a failed write (verb create, update or delete) of
// the composed resource obj of template name. A write the XRD's
// ServiceAccount may not make says so, naming the account, the verb and the
// resource, so that whoever owns its RBAC can act on it.
func writeError(st *state, verb, name string, obj *unstructured.Unstructured, err error) error {
	var se kerrors.APIStatus
	if st.account != "" && kerrors.IsForbidden(err) && errors.As(err, &se) {
		resource := obj.GetKind()
		if d := se.Status().Details; d != nil && d.Kind != "" {
			resource = d.Kind
			if d.Group != "" {
				resource = d.Group + "/" + d.Kind
			}
		}
		return fmt.Errorf("composed resource %q: cannot %s %s %q: forbidden: service account %s may not %s %s",
			name, verb, obj.GetKind(), obj.GetName(), st.account, verb, resource)
	}
	if verb != "delete" {
		verb = "apply" // Server-side apply creates or updates.
	}
	return fmt.Errorf("cannot %s composed resource %q (%s %s): %w", verb, name, obj.GetKind(), obj.GetName(), err)
}
