package composite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/services/renderer/internal/connection"
)

// detailsRecorder records what it is asked to publish.
type detailsRecorder struct {
	calls  []string
	err    error
	forgot []types.UID
}

func (d *detailsRecorder) Publish(_ context.Context, xr *unstructured.Unstructured, revision string, details map[string][]byte, force bool) error {
	d.calls = append(d.calls, fmt.Sprintf("%s %s keys=%d force=%t", xr.GetName(), revision, len(details), force))
	return d.err
}

func (d *detailsRecorder) Forget(uid types.UID) { d.forgot = append(d.forgot, uid) }

func TestPublishDetails(t *testing.T) {
	xr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	xr.SetName("db")
	ns := "crossplane-system"
	sel := &selection{composition: "xdbs", revision: &v1.CompositionRevision{ObjectMeta: metav1.ObjectMeta{Name: "xdbs-abc"}}}
	sel.revision.Spec.WriteConnectionSecretsToNamespace = &ns
	legacy := &v1.CompositeResourceDefinition{}
	some := map[string][]byte{"password": []byte("s3cr3t")}
	type want struct {
		calls     []string
		err       bool
		permanent bool
		message   string
	}
	cases := map[string]struct {
		reason    string
		publisher *detailsRecorder
		out       *rendered
		force     bool
		// noSecret: the XR has no connection Secret; modern: its XRD is
		// not of scope LegacyCluster.
		noSecret, modern bool
		want             want
	}{
		"NoConnectionSecret": {
			reason:    "An XR without a connection Secret publishes nothing: nobody would read it.",
			publisher: &detailsRecorder{},
			out:       &rendered{pipeline: true, connectionDetails: some},
			noSecret:  true,
		},
		"Modern": {
			reason:    "A modern (namespaced) XR composes its Secrets itself: nothing to publish.",
			publisher: &detailsRecorder{},
			out:       &rendered{pipeline: true, connectionDetails: some},
			modern:    true,
		},
		"NotConfiguredNoConnectionSecret": {
			reason:   "Without a secrets endpoint, details nobody reads are fine.",
			out:      &rendered{pipeline: true, connectionDetails: some},
			noSecret: true,
		},
		"Resources": {
			reason:    "A render in mode Resources publishes nothing: the secrets service computes those details itself.",
			publisher: &detailsRecorder{},
			out:       &rendered{},
		},
		"Published": {
			reason:    "A pipeline's details are handed over with the revision the XR was rendered with.",
			publisher: &detailsRecorder{},
			out:       &rendered{pipeline: true, connectionDetails: some},
			want:      want{calls: []string{"db xdbs-abc keys=1 force=false"}},
		},
		"NoneIsPublishedToo": {
			reason:    "A pipeline that returns no details hands an empty set over, so that keys disappear downstream.",
			publisher: &detailsRecorder{},
			out:       &rendered{pipeline: true},
			force:     true,
			want:      want{calls: []string{"db xdbs-abc keys=0 force=true"}},
		},
		"Unavailable": {
			reason:    "An unreachable secrets service is an error worth retrying.",
			publisher: &detailsRecorder{err: errors.New("connection refused")},
			out:       &rendered{pipeline: true, connectionDetails: some},
			want:      want{calls: []string{"db xdbs-abc keys=1 force=false"}, err: true},
		},
		"Invalid": {
			reason:    "Details the secrets service refuses as invalid wait for the functions to return others.",
			publisher: &detailsRecorder{err: fmt.Errorf("%w: data[bad key]: Invalid value", connection.ErrInvalid)},
			out:       &rendered{pipeline: true, connectionDetails: some},
			want:      want{calls: []string{"db xdbs-abc keys=1 force=false"}, err: true, permanent: true},
		},
		"NotConfigured": {
			reason: "Without a secrets endpoint, details a pipeline returns are reported, naming the flag.",
			out:    &rendered{pipeline: true, connectionDetails: some},
			want: want{err: true, permanent: true,
				message: `cannot publish the connection details that the functions of Composition "xdbs" returned: the renderer is not configured with a secrets endpoint (--secrets-endpoint)`},
		},
		"NotConfiguredNothingReturned": {
			reason: "Without a secrets endpoint, a pipeline that returns no details is fine.",
			out:    &rendered{pipeline: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var o []Option
			if tc.publisher != nil {
				o = append(o, WithConnectionDetails(tc.publisher))
			}
			r := NewReconciler(nil, nil, nil, o...)
			st := &state{xr: xr, xrd: legacy}
			s := *sel
			if tc.noSecret {
				rev := *sel.revision
				rev.Spec.WriteConnectionSecretsToNamespace = nil
				s.revision = &rev
			}
			if tc.modern {
				st.xrd = &v1.CompositeResourceDefinition{}
				st.xrd.Spec.Scope = v1.CompositeResourceScopeNamespaced
			}
			err := r.publishDetails(t.Context(), st, &s, tc.out, tc.force)
			if (err != nil) != tc.want.err {
				t.Fatalf("\n%s\npublishDetails(...): error %v, want error %t", tc.reason, err, tc.want.err)
			}
			if err != nil && permanent(err) != tc.want.permanent {
				t.Errorf("\n%s\npublishDetails(...): error %v permanent %t, want %t", tc.reason, err, permanent(err), tc.want.permanent)
			}
			if tc.want.message != "" && err.Error() != tc.want.message {
				t.Errorf("\n%s\npublishDetails(...): message:\n got %s\nwant %s", tc.reason, err, tc.want.message)
			}
			if err != nil && strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("\n%s\npublishDetails(...): the error carries a secret value", tc.reason)
			}
			var calls []string
			if tc.publisher != nil {
				calls = tc.publisher.calls
			}
			if diff := cmp.Diff(tc.want.calls, calls); diff != "" {
				t.Errorf("\n%s\npublishDetails(...): published -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestForgetForgetsDetails(t *testing.T) {
	d := &detailsRecorder{}
	r := NewReconciler(nil, nil, nil, WithConnectionDetails(d))
	if err := r.forget(t.Context(), "xr-1"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]types.UID{"xr-1"}, d.forgot); diff != "" {
		t.Errorf("forget(...): a gone XR's published details are forgotten: -want, +got:\n%s", diff)
	}
}
