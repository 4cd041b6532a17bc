package composite

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

func TestWriteError(t *testing.T) {
	nop := &unstructured.Unstructured{}
	nop.SetAPIVersion("nop.crossplane.io/v1alpha1")
	nop.SetKind("NopResource")
	nop.SetName("x")
	forbidden := kerrors.NewForbidden(schema.GroupResource{Group: "nop.crossplane.io", Resource: "nopresources"}, "x",
		errors.New(`User "system:serviceaccount:loom-tenant-a:composer" cannot patch resource "nopresources"`))
	type args struct {
		account string
		verb    string
		err     error
	}
	cases := map[string]struct {
		reason string
		args   args
		want   string
	}{
		"ForbiddenToAccount": {
			reason: "A write the XRD's service account may not make names the account, the verb and the resource.",
			args:   args{account: "loom-tenant-a/composer", verb: "create", err: forbidden},
			want:   `composed resource "db": cannot create NopResource "x": forbidden: service account loom-tenant-a/composer may not create nop.crossplane.io/nopresources`,
		},
		"ForbiddenToLoom": {
			reason: "Without a service account a forbidden write keeps the API server's words.",
			args:   args{verb: "create", err: forbidden},
			want:   `cannot apply composed resource "db" (NopResource x): ` + forbidden.Error(),
		},
		"OtherError": {
			reason: "Errors other than forbidden are quoted as they are.",
			args:   args{account: "loom-tenant-a/composer", verb: "delete", err: errors.New("boom")},
			want:   `cannot delete composed resource "db" (NopResource x): boom`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := writeError(&state{account: tc.args.account}, tc.args.verb, "db", nop, tc.args.err).Error()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nwriteError(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestImpersonate(t *testing.T) {
	xrd := func(sa *v1.ServiceAccountReference) *v1.CompositeResourceDefinition {
		d := &v1.CompositeResourceDefinition{}
		d.SetName("xdbs.example.org")
		d.Spec.ServiceAccountRef = sa
		return d
	}
	own := &Reconciler{}
	var asked []string
	as := func(user string) (Client, error) {
		asked = append(asked, user)
		return own.client, nil
	}
	cases := map[string]struct {
		reason      string
		xrd         *v1.CompositeResourceDefinition
		as          func(string) (Client, error)
		wantAccount string
		wantAsked   []string
		wantInvalid bool
	}{
		"NoServiceAccount": {
			reason: "Without serviceAccountRef the renderer composes as itself.",
			xrd:    xrd(nil),
			as:     as,
		},
		"ServiceAccount": {
			reason:      "With serviceAccountRef the renderer composes as that ServiceAccount's user.",
			xrd:         xrd(&v1.ServiceAccountReference{Namespace: "loom-tenant-a", Name: "composer"}),
			as:          as,
			wantAccount: "loom-tenant-a/composer",
			wantAsked:   []string{"system:serviceaccount:loom-tenant-a:composer"},
		},
		"CannotImpersonate": {
			reason:      "A renderer that cannot impersonate refuses rather than compose as itself.",
			xrd:         xrd(&v1.ServiceAccountReference{Namespace: "loom-tenant-a", Name: "composer"}),
			wantAccount: "loom-tenant-a/composer",
			wantInvalid: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			asked = nil
			r := &Reconciler{as: tc.as}
			st := &state{xrd: tc.xrd}
			err := r.impersonate(st)
			if got := errors.Is(err, errInvalidSpec); got != tc.wantInvalid {
				t.Errorf("%s\nimpersonate(...): invalid input %t (%v), want %t", tc.reason, got, err, tc.wantInvalid)
			}
			if diff := cmp.Diff(tc.wantAccount, st.account); diff != "" {
				t.Errorf("%s\naccount: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantAsked, asked); diff != "" {
				t.Errorf("%s\nimpersonated users: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
