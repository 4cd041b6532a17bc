package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestHandler(t *testing.T) {
	allow := ValidatorFn(func(context.Context, *admissionv1.AdmissionRequest) ([]string, error) {
		return []string{"careful"}, nil
	})
	deny := ValidatorFn(func(context.Context, *admissionv1.AdmissionRequest) ([]string, error) {
		return nil, errors.New("in use")
	})
	invalid := ValidatorFn(func(context.Context, *admissionv1.AdmissionRequest) ([]string, error) {
		return nil, kerrors.NewConflict(schema.GroupResource{Resource: "things"}, "a", errors.New("busy"))
	})
	review := func(uid types.UID) []byte {
		b, _ := json.Marshal(admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{UID: uid}})
		return b
	}
	type want struct {
		code int
		resp *admissionv1.AdmissionResponse
	}
	cases := map[string]struct {
		reason string
		v      Validator
		method string
		body   []byte
		want   want
	}{
		"Allowed": {
			reason: "An admitted request is answered with its UID and the warnings.",
			v:      allow, method: http.MethodPost, body: review("u1"),
			want: want{code: http.StatusOK, resp: &admissionv1.AdmissionResponse{UID: "u1", Allowed: true, Warnings: []string{"careful"}}},
		},
		"Denied": {
			reason: "A plain error denies the request as Forbidden with its message.",
			v:      deny, method: http.MethodPost, body: review("u2"),
			want: want{code: http.StatusOK, resp: &admissionv1.AdmissionResponse{UID: "u2", Result: &metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: "in use"}}},
		},
		"StatusError": {
			reason: "An API status error keeps its code and reason.",
			v:      invalid, method: http.MethodPost, body: review("u3"),
			want: want{code: http.StatusOK, resp: &admissionv1.AdmissionResponse{UID: "u3", Result: &metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusConflict, Reason: metav1.StatusReasonConflict,
				Message: `Operation cannot be fulfilled on things "a": busy`, Details: &metav1.StatusDetails{Name: "a", Kind: "things"}}}},
		},
		"NoRequest": {
			reason: "A review without a request is a bad request.",
			v:      allow, method: http.MethodPost, body: []byte(`{}`),
			want: want{code: http.StatusBadRequest},
		},
		"NotJSON": {
			reason: "A body that is not a review is a bad request.",
			v:      allow, method: http.MethodPost, body: []byte(`nope`),
			want: want{code: http.StatusBadRequest},
		},
		"Get": {
			reason: "Reviews are POSTed.",
			v:      allow, method: http.MethodGet,
			want: want{code: http.StatusMethodNotAllowed},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(t.Context(), tc.method, "/", bytes.NewReader(tc.body))
			Handler(tc.v, slog.New(slog.NewTextHandler(io.Discard, nil))).ServeHTTP(rec, req)
			if rec.Code != tc.want.code {
				t.Fatalf("%s\nstatus: want %d, got %d: %s", tc.reason, tc.want.code, rec.Code, rec.Body)
			}
			if tc.want.resp == nil {
				return
			}
			got := &admissionv1.AdmissionReview{}
			if err := json.Unmarshal(rec.Body.Bytes(), got); err != nil {
				t.Fatal(err)
			}
			if got.Kind != "AdmissionReview" || got.APIVersion != "admission.k8s.io/v1" {
				t.Errorf("%s\nresponse is a %s %s, want an admission.k8s.io/v1 AdmissionReview", tc.reason, got.APIVersion, got.Kind)
			}
			if diff := cmp.Diff(tc.want.resp, got.Response); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
