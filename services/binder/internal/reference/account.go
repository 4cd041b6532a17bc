package reference

import (
	"context"
	"errors"
	"fmt"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	xv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/impersonate"
)

// account returns the ServiceAccount the XRD of XR kind gvk names, or nil.
// Without WithImpersonation no XRD is looked up and the binder writes as
// itself.
func (r *Reconciler) account(ctx context.Context, gvk schema.GroupVersionKind) (*xv1.ServiceAccountReference, error) {
	if r.defs == nil {
		return nil, nil
	}
	d, err := r.defs.ForComposite(ctx, gvk.GroupKind())
	if err != nil || d == nil {
		return nil, err
	}
	return d.Spec.ServiceAccountRef, nil
}

// impersonate returns the Writer that acts as sa.
func (r *Reconciler) impersonate(sa *xv1.ServiceAccountReference) (Writer, error) {
	w, err := r.as(impersonate.ServiceAccountUser(sa.Namespace, sa.Name))
	if err != nil {
		return nil, fmt.Errorf("cannot act as service account %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	return w, nil
}

// forbidden says that sa may not update obj, naming the resource as the API
// server did.
func forbidden(sa *xv1.ServiceAccountReference, obj *unstructured.Unstructured, err error) string {
	resource := obj.GetKind()
	var se kerrors.APIStatus
	if errors.As(err, &se) {
		if d := se.Status().Details; d != nil && d.Kind != "" {
			resource = d.Kind
			if d.Group != "" {
				resource = d.Group + "/" + d.Kind
			}
		}
	}
	return fmt.Sprintf("cannot be written: forbidden: service account %s/%s may not update %s", sa.Namespace, sa.Name, resource)
}
