package fn

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	fnv1 "github.com/loomxr/loom/proto/fn/v1"
	fnv1beta1 "github.com/loomxr/loom/proto/fn/v1beta1"
)

// DefaultTimeout bounds one call to a function whose Target sets no timeout.
const DefaultTimeout = 30 * time.Second

// MaxResponseSize is the largest response the Client accepts from a function.
const MaxResponseSize = 32 << 20

// A Target says where one function listens and how to reach it. The renderer
// builds it from a loom.dev Function (see TargetFromFunction); loomctl render
// from a Function manifest's development annotation.
type Target struct {
	// Endpoint is a gRPC target, e.g. "dns:///fn.functions:9443" or
	// "127.0.0.1:9443".
	Endpoint string

	// TLS is the material for mutual TLS. Required unless Insecure is true.
	TLS *TLSMaterial

	// Insecure makes the Client talk plaintext. Only for local development;
	// it must be asked for explicitly, a missing TLS never implies it.
	Insecure bool

	// Timeout bounds one call, including the wait for a concurrency slot.
	// Zero means the Client's default (DefaultTimeout unless changed with
	// WithDefaultTimeout).
	Timeout time.Duration

	// MaxConcurrency caps the calls this Client makes to the function at the
	// same time; further calls wait for a slot. Zero or less means no cap.
	MaxConcurrency int
}

// TLSMaterial is the PEM material for mutual TLS with a function. The Client
// presents Cert/Key and verifies the function's certificate against CA. It is
// kept as bytes rather than a *tls.Config so that the Client can tell when it
// changed (rotation) and reconnect.
type TLSMaterial struct {
	// CA is the PEM bundle of the authorities that sign the function's
	// server certificate. Required.
	CA []byte
	// Cert and Key are the PEM client certificate and private key. Required.
	Cert []byte
	Key  []byte
	// ServerName is the name expected in the function's certificate. Empty
	// means the host part of the endpoint.
	ServerName string
}

// Config returns a client TLS configuration (TLS 1.2 or newer) presenting the
// client certificate and trusting only CA.
func (m *TLSMaterial) Config() (*tls.Config, error) {
	if m == nil {
		return nil, errors.New("no TLS material")
	}
	if len(m.CA) == 0 {
		return nil, errors.New("TLS material has no CA bundle")
	}
	if len(m.Cert) == 0 || len(m.Key) == 0 {
		return nil, errors.New("TLS material has no client certificate and key")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(m.CA) {
		return nil, errors.New("cannot parse CA bundle: no PEM certificate found")
	}
	cert, err := tls.X509KeyPair(m.Cert, m.Key)
	if err != nil {
		return nil, fmt.Errorf("cannot parse client certificate and key: %w", err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		RootCAs:      pool,
		Certificates: []tls.Certificate{cert},
		ServerName:   m.ServerName,
	}, nil
}

// fingerprint identifies the material without holding it.
func (m *TLSMaterial) fingerprint() string {
	if m == nil {
		return ""
	}
	h := sha256.New()
	for _, b := range [][]byte{m.CA, m.Cert, m.Key, []byte(m.ServerName)} {
		_ = binary.Write(h, binary.BigEndian, uint64(len(b)))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// A Resolver finds the Target of a function by name. It is called on every
// call, so it should read from a cache (an informer, a map).
type Resolver interface {
	Resolve(ctx context.Context, function string) (Target, error)
}

// ResolverFn adapts a function to a Resolver.
type ResolverFn func(ctx context.Context, function string) (Target, error)

// Resolve calls fn.
func (fn ResolverFn) Resolve(ctx context.Context, function string) (Target, error) {
	return fn(ctx, function)
}

// StaticResolver resolves the functions of a fixed map and fails for others.
type StaticResolver map[string]Target

// Resolve returns the Target of function.
func (r StaticResolver) Resolve(_ context.Context, function string) (Target, error) {
	t, ok := r[function]
	if !ok {
		return Target{}, fmt.Errorf("unknown function %q", function)
	}
	return t, nil
}

// A Runner runs one call of a function. Client is the real one; Cache wraps
// one. A Runner does not check the response beyond transport errors; the
// Executor does.
type Runner interface {
	RunFunction(ctx context.Context, function string, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error)
}

// RunnerFn adapts a function to a Runner.
type RunnerFn func(ctx context.Context, function string, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error)

// RunFunction calls fn.
func (fn RunnerFn) RunFunction(ctx context.Context, function string, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	return fn(ctx, function, req)
}

// A Client calls composition functions over gRPC. It keeps one connection per
// function, made on first use and remade when the function's endpoint, TLS
// material or insecure flag changes; a per-function semaphore caps concurrent
// calls. It calls FunctionRunnerService v1 and, when the function answers
// Unimplemented, the wire-identical v1beta1. It is safe for concurrent use.
type Client struct {
	resolver       Resolver
	defaultTimeout time.Duration
	dialOptions    []grpc.DialOption
	metrics        *runMetrics

	mu  sync.Mutex
	fns map[string]*conn
}

// conn is the connection to one function.
type conn struct {
	key  string // what the connection was made for; a change remakes it
	cc   *grpc.ClientConn
	v1   fnv1.FunctionRunnerServiceClient
	beta fnv1beta1.FunctionRunnerServiceClient
	// slots is the semaphore; nil means no cap. Replaced (not resized) when
	// the cap changes: calls holding a slot of the old one release it there.
	slots chan struct{}
}

// A ClientOption configures a Client.
type ClientOption func(*Client)

// WithDefaultTimeout sets the timeout of calls whose Target sets none.
func WithDefaultTimeout(d time.Duration) ClientOption {
	return func(c *Client) {
		if d > 0 {
			c.defaultTimeout = d
		}
	}
}

// WithDialOptions adds gRPC dial options (interceptors, stats handlers) to
// every connection the Client makes.
func WithDialOptions(o ...grpc.DialOption) ClientOption {
	return func(c *Client) { c.dialOptions = append(c.dialOptions, o...) }
}

// NewClient returns a Client that finds functions with r. Its calls are
// traced (otelgrpc, a client span under the caller's) and counted with
// Crossplane's composition_run_function_* metrics, through the global
// OpenTelemetry providers.
func NewClient(r Resolver, o ...ClientOption) *Client {
	c := &Client{resolver: r, defaultTimeout: DefaultTimeout, fns: map[string]*conn{}, metrics: newRunMetrics(),
		dialOptions: []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler())}}
	for _, fn := range o {
		fn(c)
	}
	return c
}

// serviceConfig balances calls across every address an endpoint resolves to
// (a headless Service gives one per function pod).
const serviceConfig = `{"loadBalancingConfig":[{"round_robin":{}}]}`

// connFor returns the connection to function for target t, making or
// remaking it as needed.
func (c *Client) connFor(function string, t Target) (*conn, error) {
	key := fmt.Sprintf("%s|%t|%s", t.Endpoint, t.Insecure, t.TLS.fingerprint())

	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.fns[function]
	if cur != nil && cur.key == key {
		cur.resize(t.MaxConcurrency)
		return cur, nil
	}
	if t.Endpoint == "" {
		return nil, fmt.Errorf("function %q has no endpoint", function)
	}
	var creds credentials.TransportCredentials
	switch {
	case t.Insecure:
		creds = insecure.NewCredentials()
	case t.TLS == nil:
		return nil, fmt.Errorf("function %q has no TLS material and is not marked insecure", function)
	default:
		cfg, err := t.TLS.Config()
		if err != nil {
			return nil, fmt.Errorf("cannot use the TLS material of function %q: %w", function, err)
		}
		creds = credentials.NewTLS(cfg)
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultServiceConfig(serviceConfig),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxResponseSize)),
	}, c.dialOptions...)
	cc, err := grpc.NewClient(t.Endpoint, opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot make a gRPC client for function %q at %q: %w", function, t.Endpoint, err)
	}
	if cur != nil {
		// In-flight calls on the old connection fail and are retried.
		_ = cur.cc.Close()
	}
	n := &conn{
		key:  key,
		cc:   cc,
		v1:   fnv1.NewFunctionRunnerServiceClient(cc),
		beta: fnv1beta1.NewFunctionRunnerServiceClient(cc),
	}
	n.resize(t.MaxConcurrency)
	c.fns[function] = n
	return n, nil
}

// resize replaces the semaphore when the cap changed. Called with the
// Client's lock held.
func (f *conn) resize(limit int) {
	if limit <= 0 {
		f.slots = nil
		return
	}
	if f.slots == nil || cap(f.slots) != limit {
		f.slots = make(chan struct{}, limit)
	}
}

// Forget closes and drops the connection to function, for example when its
// Function object is deleted. Calls in flight on it fail.
func (c *Client) Forget(function string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.fns[function]; ok {
		_ = f.cc.Close()
		delete(c.fns, function)
	}
}

// Close closes every connection. The Client must not be used afterwards.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for name, f := range c.fns {
		errs = append(errs, f.cc.Close())
		delete(c.fns, name)
	}
	return errors.Join(errs...)
}

// RunFunction calls function with req and returns its response. It blocks
// until the function answers, the Target's timeout passes or ctx ends.
// Errors wrap ErrUnreachable, ErrTimeout, ErrFunctionFailed or ErrUnsupported
// when the call itself failed.
func (c *Client) RunFunction(ctx context.Context, function string, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	t, err := c.resolver.Resolve(ctx, function)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve function %q: %w", function, err)
	}
	f, err := c.connFor(function, t)
	if err != nil {
		return nil, err
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = c.defaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	c.mu.Lock()
	slots := f.slots
	c.mu.Unlock()
	if slots != nil {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("%w: no free slot of %d concurrent calls within %s", ErrTimeout, cap(slots), timeout)
			}
			return nil, ctx.Err()
		}
	}

	method := fnv1.FunctionRunnerService_RunFunction_FullMethodName
	c.metrics.sent(ctx, function, t.Endpoint, method)
	called := time.Now()
	rsp, err := f.v1.RunFunction(ctx, req)
	if status.Code(err) == codes.Unimplemented {
		method = fnv1beta1.FunctionRunnerService_RunFunction_FullMethodName
		rsp, err = runBeta(ctx, f.beta, req)
	}
	c.metrics.answered(ctx, function, t.Endpoint, method, called, rsp, err)
	if err != nil {
		return nil, classify(ctx, err, timeout)
	}
	return rsp, nil
}

// runBeta re-encodes req as v1beta1 (the messages are wire-identical), calls
// v1beta1 and decodes the answer back to v1.
func runBeta(ctx context.Context, beta fnv1beta1.FunctionRunnerServiceClient, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("cannot encode request: %w", err)
	}
	breq := &fnv1beta1.RunFunctionRequest{}
	if err := proto.Unmarshal(b, breq); err != nil {
		return nil, fmt.Errorf("cannot re-encode request as v1beta1: %w", err)
	}
	brsp, err := beta.RunFunction(ctx, breq)
	if err != nil {
		return nil, err
	}
	if b, err = proto.Marshal(brsp); err != nil {
		return nil, fmt.Errorf("%w: cannot encode v1beta1 response: %w", ErrMalformedResponse, err)
	}
	rsp := &fnv1.RunFunctionResponse{}
	if err := proto.Unmarshal(b, rsp); err != nil {
		return nil, fmt.Errorf("%w: cannot decode v1beta1 response as v1: %w", ErrMalformedResponse, err)
	}
	return rsp, nil
}

// classify maps a failed call to one of the package's causes. Messages name
// the configured timeout, never the time measured: they end up in conditions
// and Events, which must be the same for the same cause, or every retry
// would write a new status and record a new Event.
func classify(ctx context.Context, err error, timeout time.Duration) error {
	if errors.Is(err, ErrMalformedResponse) {
		return err
	}
	s, _ := status.FromError(err)
	switch s.Code() { //nolint:exhaustive // Only unreachability is told apart; every other code is the function's error.
	case codes.Unavailable:
		return fmt.Errorf("%w: %s", ErrUnreachable, s.Message())
	case codes.DeadlineExceeded:
		return fmt.Errorf("%w: no answer within %s", ErrTimeout, timeout)
	case codes.Canceled:
		if ctx.Err() != nil {
			return fmt.Errorf("call canceled: %w", ctx.Err())
		}
	case codes.Unimplemented:
		return fmt.Errorf("%w: it serves neither %s nor %s", ErrUnsupported,
			fnv1.FunctionRunnerService_ServiceDesc.ServiceName, fnv1beta1.FunctionRunnerService_ServiceDesc.ServiceName)
	}
	return fmt.Errorf("%w: %s: %s", ErrFunctionFailed, s.Code(), s.Message())
}
