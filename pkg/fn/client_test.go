package fn

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	fnv1 "github.com/loomxr/loom/proto/fn/v1"
	fnv1beta1 "github.com/loomxr/loom/proto/fn/v1beta1"
)

// v1Server is an in-test function serving only FunctionRunnerService v1.
type v1Server struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
	handle func(context.Context, *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error)
}

func (s *v1Server) RunFunction(ctx context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	return s.handle(ctx, req)
}

// betaServer is an in-test function serving only the older v1beta1.
type betaServer struct {
	fnv1beta1.UnimplementedFunctionRunnerServiceServer

	mu   sync.Mutex
	tags []string // request tags as the server recomputed them
}

func (s *betaServer) RunFunction(_ context.Context, req *fnv1beta1.RunFunctionRequest) (*fnv1beta1.RunFunctionResponse, error) {
	// Recompute the tag from what arrived, with the v1beta1 types: the
	// encodings are identical, so it must match the tag Loom sent.
	r := proto.CloneOf(req)
	r.Meta.Tag = ""
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.tags = append(s.tags, hexSHA256(b))
	s.mu.Unlock()

	nop, _ := structpb.NewStruct(map[string]any{"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource"})
	return &fnv1beta1.RunFunctionResponse{
		Meta:    &fnv1beta1.ResponseMeta{Tag: req.GetMeta().GetTag(), Ttl: durationpb.New(time.Minute)},
		Desired: &fnv1beta1.State{Resources: map[string]*fnv1beta1.Resource{"beta": {Resource: nop, Ready: fnv1beta1.Ready_READY_TRUE}}},
		Results: []*fnv1beta1.Result{{Severity: fnv1beta1.Severity_SEVERITY_NORMAL, Message: "served by v1beta1"}},
	}, nil
}

// echo answers a v1 request the way an SDK function that does nothing does.
func echo(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	return &fnv1.RunFunctionResponse{Meta: &fnv1.ResponseMeta{Tag: req.GetMeta().GetTag()}, Desired: req.GetDesired(), Context: req.GetContext()}, nil
}

func TestBetaFallback(t *testing.T) {
	beta := &betaServer{}
	target := serve(t, func(s *grpc.Server) { fnv1beta1.RegisterFunctionRunnerServiceServer(s, beta) })
	c := NewClient(StaticResolver{"old": target})
	t.Cleanup(func() { _ = c.Close() })

	var sent []string
	tagging := RunnerFn(func(ctx context.Context, fn string, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
		sent = append(sent, req.GetMeta().GetTag())
		return c.RunFunction(ctx, fn, req)
	})
	out, err := NewExecutor(tagging).Run(t.Context(), []Step{{Name: "old", Function: "old"}}, observedXR())
	if err != nil {
		t.Fatalf("Run(...) against a v1beta1-only function: %v", err)
	}
	want := Outcome{
		Desired: State{Resources: map[string]Resource{"beta": {
			Object: map[string]any{"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource"}, Ready: ReadyTrue,
		}}},
		Results: []Result{{Step: "old", Severity: SeverityNormal, Reason: DefaultResultReason, Message: "served by v1beta1", Target: TargetComposite}},
		TTL:     time.Minute,
	}
	if diff := cmp.Diff(want, out, cmpOutcome); diff != "" {
		t.Errorf("Run(...): -want, +got:\n%s", diff)
	}
	beta.mu.Lock()
	defer beta.mu.Unlock()
	if diff := cmp.Diff(sent, beta.tags); diff != "" {
		t.Errorf("tags: the function computes a different tag from what it received: -sent, +recomputed:\n%s", diff)
	}
}

// cmpOutcome ignores what depends on timing.
var cmpOutcome = cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "Steps" }, cmp.Ignore())

func TestClientTransport(t *testing.T) {
	p := testPKI(t)
	tlsTarget := serve(t, func(s *grpc.Server) { fnv1.RegisterFunctionRunnerServiceServer(s, &v1Server{handle: echo}) })
	empty := serve(t, func(*grpc.Server) {})

	cases := map[string]struct {
		reason string
		target Target
		want   error  // a sentinel, or nil for success
		msg    string // a substring of the error
	}{
		"MutualTLS": {
			reason: "A client with a certificate from the function's CA is served.",
			target: tlsTarget,
		},
		"ClientCertFromOtherCA": {
			reason: "The function refuses a client certificate it cannot verify.",
			target: Target{Endpoint: tlsTarget.Endpoint, TLS: &TLSMaterial{CA: p.caPEM, Cert: p.otherCert, Key: p.otherKey}},
			want:   ErrUnreachable,
		},
		"ServerFromOtherCA": {
			reason: "The client refuses a function whose certificate its CA did not sign.",
			target: Target{Endpoint: tlsTarget.Endpoint, TLS: &TLSMaterial{CA: mustCA(t), Cert: p.clientCert, Key: p.clientKey}},
			want:   ErrUnreachable,
			msg:    "certificate signed by unknown authority",
		},
		"InsecureAgainstTLS": {
			reason: "Plaintext cannot talk to a TLS function.",
			target: Target{Endpoint: tlsTarget.Endpoint, Insecure: true},
			want:   ErrUnreachable,
		},
		"NoTLSNotInsecure": {
			reason: "Without TLS material a function is only reached when explicitly marked insecure.",
			target: Target{Endpoint: tlsTarget.Endpoint},
			msg:    `function "f" has no TLS material and is not marked insecure`,
		},
		"NoClientCert": {
			reason: "Mutual TLS needs a client certificate.",
			target: Target{Endpoint: tlsTarget.Endpoint, TLS: &TLSMaterial{CA: p.caPEM}},
			msg:    "TLS material has no client certificate and key",
		},
		"NotAFunction": {
			reason: "An endpoint serving neither v1 nor v1beta1 is a permanent error.",
			target: empty,
			want:   ErrUnsupported,
			msg:    "serves neither apiextensions.fn.proto.v1.FunctionRunnerService nor apiextensions.fn.proto.v1beta1.FunctionRunnerService",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := NewClient(StaticResolver{"f": tc.target}, WithDefaultTimeout(10*time.Second))
			defer func() { _ = c.Close() }()
			req := &fnv1.RunFunctionRequest{Meta: &fnv1.RequestMeta{Tag: "t"}}
			_, err := c.RunFunction(t.Context(), "f", req)
			switch {
			case tc.want == nil && tc.msg == "" && err != nil:
				t.Errorf("%s\nRunFunction(...): unexpected error: %v", tc.reason, err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("%s\nRunFunction(...): want an error wrapping %q, got %v", tc.reason, tc.want, err)
			case tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg)):
				t.Errorf("%s\nRunFunction(...): want an error containing %q, got %v", tc.reason, tc.msg, err)
			}
		})
	}
}

// mustCA returns the PEM of a CA unrelated to the test PKI.
func mustCA(t *testing.T) []byte {
	t.Helper()
	_, _, pemBytes, err := newCA("unrelated")
	if err != nil {
		t.Fatal(err)
	}
	return pemBytes
}

func TestClientReconnectsWhenEndpointChanges(t *testing.T) {
	answer := func(who string) func(context.Context, *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
		return func(ctx context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
			rsp, _ := echo(ctx, req)
			rsp.Results = []*fnv1.Result{{Severity: fnv1.Severity_SEVERITY_NORMAL, Message: who}}
			return rsp, nil
		}
	}
	a := serve(t, func(s *grpc.Server) { fnv1.RegisterFunctionRunnerServiceServer(s, &v1Server{handle: answer("a")}) })
	b := serve(t, func(s *grpc.Server) { fnv1.RegisterFunctionRunnerServiceServer(s, &v1Server{handle: answer("b")}) })

	var mu sync.Mutex
	current := a
	c := NewClient(ResolverFn(func(context.Context, string) (Target, error) {
		mu.Lock()
		defer mu.Unlock()
		return current, nil
	}))
	t.Cleanup(func() { _ = c.Close() })
	who := func() string {
		t.Helper()
		rsp, err := c.RunFunction(t.Context(), "f", &fnv1.RunFunctionRequest{Meta: &fnv1.RequestMeta{Tag: "t"}})
		if err != nil {
			t.Fatal(err)
		}
		return rsp.GetResults()[0].GetMessage()
	}
	got := []string{who(), who()}
	mu.Lock()
	current = b
	mu.Unlock()
	got = append(got, who())
	if diff := cmp.Diff([]string{"a", "a", "b"}, got); diff != "" {
		t.Errorf("answers: -want, +got:\n%s", diff)
	}
}

func TestClientConcurrencyLimit(t *testing.T) {
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	blocking := func(ctx context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return echo(ctx, req)
	}
	target := serve(t, func(s *grpc.Server) { fnv1.RegisterFunctionRunnerServiceServer(s, &v1Server{handle: blocking}) })
	limited := target
	limited.MaxConcurrency = 1
	c := NewClient(StaticResolver{"f": limited})
	t.Cleanup(func() { _ = c.Close() })

	first := make(chan error, 1)
	go func() {
		_, err := c.RunFunction(context.Background(), "f", &fnv1.RunFunctionRequest{Meta: &fnv1.RequestMeta{Tag: "1"}})
		first <- err
	}()
	<-entered // The first call holds the only slot.

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := c.RunFunction(ctx, "f", &fnv1.RunFunctionRequest{Meta: &fnv1.RequestMeta{Tag: "2"}})
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "no free slot of 1 concurrent calls") {
		t.Errorf("second call while the slot is taken: want a timeout waiting for a slot, got %v", err)
	}
	select {
	case <-entered:
		t.Errorf("second call reached the function although the limit is 1")
	default:
	}
	close(release)
	if err := <-first; err != nil {
		t.Errorf("first call: %v", err)
	}
	if _, err := c.RunFunction(t.Context(), "f", &fnv1.RunFunctionRequest{Meta: &fnv1.RequestMeta{Tag: "3"}}); err != nil {
		t.Errorf("third call after the slot was freed: %v", err)
	}
}

func TestCredentials(t *testing.T) {
	var got *fnv1.RunFunctionRequest
	record := func(ctx context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
		got = req
		return echo(ctx, req)
	}
	target := serve(t, func(s *grpc.Server) { fnv1.RegisterFunctionRunnerServiceServer(s, &v1Server{handle: record}) })
	c := NewClient(StaticResolver{"f": target})
	t.Cleanup(func() { _ = c.Close() })

	var asked []SecretRef
	secrets := CredentialFetcherFn(func(_ context.Context, ref SecretRef) (map[string][]byte, error) {
		asked = append(asked, ref)
		return map[string][]byte{"password": []byte("s3cr3t")}, nil
	})
	steps := []Step{{Name: "s", Function: "f", Credentials: []Credential{
		{Name: "db", Source: CredentialSourceSecret, SecretRef: &SecretRef{Namespace: "ns", Name: "db-creds"}},
		{Name: "none", Source: CredentialSourceNone},
	}}}
	if _, err := NewExecutor(c, WithCredentialFetcher(secrets)).Run(t.Context(), steps, observedXR()); err != nil {
		t.Fatal(err)
	}
	want := map[string]*fnv1.Credentials{"db": {Source: &fnv1.Credentials_CredentialData{
		CredentialData: &fnv1.CredentialData{Data: map[string][]byte{"password": []byte("s3cr3t")}},
	}}}
	if diff := cmp.Diff(want, got.GetCredentials(), cmpProto); diff != "" {
		t.Errorf("credentials sent: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff([]SecretRef{{Namespace: "ns", Name: "db-creds"}}, asked); diff != "" {
		t.Errorf("Secrets read: -want, +got:\n%s", diff)
	}
	wantCaps := []fnv1.Capability{
		fnv1.Capability_CAPABILITY_CAPABILITIES, fnv1.Capability_CAPABILITY_REQUIRED_RESOURCES,
		fnv1.Capability_CAPABILITY_CREDENTIALS, fnv1.Capability_CAPABILITY_CONDITIONS,
	}
	if diff := cmp.Diff(wantCaps, got.GetMeta().GetCapabilities()); diff != "" {
		t.Errorf("capabilities: -want, +got:\n%s", diff)
	}
}

// cmpProto compares protobuf messages.
var cmpProto = cmp.Comparer(proto.Equal)
