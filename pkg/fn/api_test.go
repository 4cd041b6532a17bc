package fn

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	xpv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	loomv1alpha1 "github.com/loomxr/loom/pkg/apis/loom/v1alpha1"
	"github.com/loomxr/loom/pkg/watchreq"
	fnv1 "github.com/loomxr/loom/proto/fn/v1"
)

func TestStepsFromPipeline(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     []xpv1.PipelineStep
		want   []Step
	}{
		"Full": {
			reason: "Every field of a step carries over.",
			in: []xpv1.PipelineStep{{
				Step: "compose", FunctionRef: xpv1.FunctionReference{Name: "fn"},
				Input:       &runtime.RawExtension{Raw: []byte(`{"apiVersion":"a/v1","kind":"I"}`)},
				Credentials: []xpv1.FunctionCredentials{{Name: "db", Source: xpv1.FunctionCredentialsSourceSecret, SecretRef: &xpv1.SecretReference{Namespace: "ns", Name: "s"}}},
				AllowedExtraResources: []xpv1.AllowedExtraResource{
					{APIVersion: "v1", Kind: "ConfigMap", NameRegex: ptr.To("a.*")},
					{APIVersion: "v1", Kind: "Secret", LabelRegexes: map[string]string{"a": "b"}},
				},
			}},
			want: []Step{{
				Name: "compose", Function: "fn", Input: []byte(`{"apiVersion":"a/v1","kind":"I"}`),
				Credentials: []Credential{{Name: "db", Source: CredentialSourceSecret, SecretRef: &SecretRef{Namespace: "ns", Name: "s"}}},
				AllowedExtraResources: []AllowedResource{
					{APIVersion: "v1", Kind: "ConfigMap", NameRegex: "a.*"},
					{APIVersion: "v1", Kind: "Secret", LabelRegexes: map[string]string{"a": "b"}},
				},
			}},
		},
		"UnsetPolicy": {
			reason: "An unset allowedExtraResources stays nil: no limit.",
			in:     []xpv1.PipelineStep{{Step: "s", FunctionRef: xpv1.FunctionReference{Name: "fn"}}},
			want:   []Step{{Name: "s", Function: "fn"}},
		},
		"EmptyPolicy": {
			reason: "An empty allowedExtraResources stays empty: nothing allowed.",
			in:     []xpv1.PipelineStep{{Step: "s", FunctionRef: xpv1.FunctionReference{Name: "fn"}, AllowedExtraResources: []xpv1.AllowedExtraResource{}}},
			want:   []Step{{Name: "s", Function: "fn", AllowedExtraResources: []AllowedResource{}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := StepsFromPipeline(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			// EquateEmpty is deliberately not used: nil and empty differ.
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nStepsFromPipeline(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTargetFromFunction(t *testing.T) {
	p := testPKI(t)
	target := serve(t, func(s *grpc.Server) { fnv1.RegisterFunctionRunnerServiceServer(s, &v1Server{handle: echo}) })
	secrets := CredentialFetcherFn(func(_ context.Context, ref SecretRef) (map[string][]byte, error) {
		switch ref {
		case SecretRef{Namespace: "loom-system", Name: "fn-ca"}:
			return map[string][]byte{"ca.crt": p.caPEM}, nil
		case SecretRef{Namespace: "loom-system", Name: "fn-client"}:
			return map[string][]byte{"tls.crt": p.clientCert, "tls.key": p.clientKey}, nil
		case SecretRef{Namespace: "loom-system", Name: "empty"}:
			return map[string][]byte{}, nil
		}
		return nil, fmt.Errorf("secrets %q not found", ref.Name)
	})
	fn := func(spec loomv1alpha1.FunctionSpec) *loomv1alpha1.Function {
		return &loomv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: "fn"}, Spec: spec}
	}
	tlsSpec := &loomv1alpha1.FunctionTLS{
		CASecretRef:     &loomv1alpha1.SecretReference{Namespace: "loom-system", Name: "fn-ca"},
		ClientSecretRef: &loomv1alpha1.SecretReference{Namespace: "loom-system", Name: "fn-client"},
	}

	t.Run("MutualTLS", func(t *testing.T) {
		got, err := TargetFromFunction(t.Context(), fn(loomv1alpha1.FunctionSpec{
			Endpoint: target.Endpoint, TLS: tlsSpec,
			Timeout: &metav1.Duration{Duration: 5 * time.Second}, MaxConcurrency: ptr.To[int32](4),
		}), secrets)
		if err != nil {
			t.Fatal(err)
		}
		want := Target{Endpoint: target.Endpoint, TLS: p.clientTLS(), Timeout: 5 * time.Second, MaxConcurrency: 4}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("TargetFromFunction(...): -want, +got:\n%s", diff)
		}
		c := NewClient(StaticResolver{"fn": got})
		defer func() { _ = c.Close() }()
		if _, err := c.RunFunction(t.Context(), "fn", &fnv1.RunFunctionRequest{Meta: &fnv1.RequestMeta{Tag: "t"}}); err != nil {
			t.Errorf("calling the function at the Target: %v", err)
		}
	})
	errs := map[string]struct {
		reason string
		spec   loomv1alpha1.FunctionSpec
		want   string
	}{
		"NoTLS": {
			reason: "Without TLS settings a Function must be marked insecure.",
			spec:   loomv1alpha1.FunctionSpec{Endpoint: "x:1"},
			want:   `function "fn" needs tls.caSecretRef and tls.clientSecretRef unless insecure is true`,
		},
		"MissingSecret": {
			reason: "A Secret that cannot be read is named.",
			spec: loomv1alpha1.FunctionSpec{Endpoint: "x:1", TLS: &loomv1alpha1.FunctionTLS{
				CASecretRef: &loomv1alpha1.SecretReference{Namespace: "loom-system", Name: "nope"}, ClientSecretRef: tlsSpec.ClientSecretRef,
			}},
			want: `cannot read Secret loom-system/nope of function "fn": secrets "nope" not found`,
		},
		"MissingKey": {
			reason: "A Secret without the expected key is named with the key.",
			spec: loomv1alpha1.FunctionSpec{Endpoint: "x:1", TLS: &loomv1alpha1.FunctionTLS{
				CASecretRef: tlsSpec.CASecretRef, ClientSecretRef: &loomv1alpha1.SecretReference{Namespace: "loom-system", Name: "empty"},
			}},
			want: `secret loom-system/empty of function "fn" has no key "tls.crt"`,
		},
	}
	for name, tc := range errs {
		t.Run(name, func(t *testing.T) {
			_, err := TargetFromFunction(t.Context(), fn(tc.spec), secrets)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nTargetFromFunction(...): want error %q, got %v", tc.reason, tc.want, err)
			}
		})
	}
	t.Run("Insecure", func(t *testing.T) {
		got, err := TargetFromFunction(t.Context(), fn(loomv1alpha1.FunctionSpec{Endpoint: "localhost:9443", Insecure: true}), secrets)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(Target{Endpoint: "localhost:9443", Insecure: true}, got); diff != "" {
			t.Errorf("TargetFromFunction(...): -want, +got:\n%s", diff)
		}
	})
}

func TestWatchAdapters(t *testing.T) {
	w := Watch{
		Step: "compose", Requirement: "loom.dev/watch/env",
		Selector: Selector{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", MatchLabels: map[string]string{"a": "b"}},
		Matched:  []ObjectRef{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "one"}},
	}
	if diff := cmp.Diff(watchreq.Request{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", MatchLabels: map[string]string{"a": "b"}}, w.Request()); diff != "" {
		t.Errorf("Request(): -want, +got:\n%s", diff)
	}
	if err := w.Request().Validate(); err != nil {
		t.Errorf("Request().Validate(): %v", err)
	}
	want := []loomv1alpha1.WatchedResourceRef{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "one", Step: "compose"}}
	if diff := cmp.Diff(want, w.Refs()); diff != "" {
		t.Errorf("Refs(): -want, +got:\n%s", diff)
	}
}
