package reference

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	xv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

type definitionsFn func(gk schema.GroupKind) *xv1.CompositeResourceDefinition

func (f definitionsFn) ForComposite(_ context.Context, gk schema.GroupKind) (*xv1.CompositeResourceDefinition, error) {
	return f(gk), nil
}

func TestAccount(t *testing.T) {
	sa := &xv1.ServiceAccountReference{Namespace: "loom-tenant-a", Name: "composer"}
	withSA := &xv1.CompositeResourceDefinition{}
	withSA.Spec.ServiceAccountRef = sa
	cases := map[string]struct {
		reason string
		defs   Definitions
		want   *xv1.ServiceAccountReference
	}{
		"NoImpersonation": {
			reason: "Without WithImpersonation no XRD is looked up.",
		},
		"NoDefinition": {
			reason: "A kind no XRD defines has no account.",
			defs:   definitionsFn(func(schema.GroupKind) *xv1.CompositeResourceDefinition { return nil }),
		},
		"NoServiceAccount": {
			reason: "An XRD without serviceAccountRef has no account.",
			defs:   definitionsFn(func(schema.GroupKind) *xv1.CompositeResourceDefinition { return &xv1.CompositeResourceDefinition{} }),
		},
		"ServiceAccount": {
			reason: "An XRD's serviceAccountRef is the account.",
			defs:   definitionsFn(func(schema.GroupKind) *xv1.CompositeResourceDefinition { return withSA }),
			want:   sa,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &Reconciler{defs: tc.defs}
			got, err := r.account(t.Context(), schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "XDB"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\naccount(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestForbidden(t *testing.T) {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("nop.crossplane.io/v1alpha1")
	obj.SetKind("NopResource")
	sa := &xv1.ServiceAccountReference{Namespace: "loom-tenant-a", Name: "composer"}
	cases := map[string]struct {
		reason string
		err    error
		want   string
	}{
		"APIStatus": {
			reason: "The resource is named as the API server named it.",
			err:    kerrors.NewForbidden(schema.GroupResource{Group: "nop.crossplane.io", Resource: "nopresources"}, "x", errors.New("no")),
			want:   "cannot be written: forbidden: service account loom-tenant-a/composer may not update nop.crossplane.io/nopresources",
		},
		"PlainError": {
			reason: "Without an API status the kind is named.",
			err:    errors.New("no"),
			want:   "cannot be written: forbidden: service account loom-tenant-a/composer may not update NopResource",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, forbidden(sa, obj, tc.err)); diff != "" {
				t.Errorf("%s\nforbidden(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
