// Package testfn is what Loom's test composition functions share: serving
// over mutual TLS with the flags every Crossplane function takes, their input
// type, and the behaviour switches tests use to make a function misbehave on
// purpose. The functions are built with Crossplane's function SDK, so they
// also prove that Loom speaks the SDK's protocol.
//
// Each function is its own binary (e2e/testfn/<name>): a binary must never
// link both the SDK's generated protobuf package and Loom's (proto/fn/v1),
// since they register the same full names.
package testfn

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/crossplane/function-sdk-go"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"
	"google.golang.org/protobuf/encoding/protojson"
)

// APIVersion and Kind of every test function's input.
const (
	APIVersion = "testfn.loom.dev/v1alpha1"
	Kind       = "Input"
)

// Input is the input of the test functions:
//
//	apiVersion: testfn.loom.dev/v1alpha1
//	kind: Input
//	spec: {...}
type Input struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       Spec   `json:"spec"`
}

// Spec holds the settings of every function; each reads its own.
type Spec struct {
	// compose-from-env: labels of the EnvironmentConfigs to require (unless
	// Require says otherwise).
	Labels map[string]string `json:"labels,omitempty"`
	// compose-from-env: what to require instead of EnvironmentConfigs by
	// Labels.
	Require *Requirement `json:"require,omitempty"`
	// compose-from-env: how many NopResources to compose (default 1).
	Count int `json:"count,omitempty"`
	// compose-from-env: ask Loom to watch the required resources (requirement
	// name prefixed with loom.dev/watch/).
	Watch bool `json:"watch,omitempty"`
	// compose-from-env: use the deprecated extra_resources fields.
	Deprecated bool `json:"deprecated,omitempty"`

	// read-context: the context key to read (default
	// testfn.loom.dev/compose-from-env).
	ContextKey string `json:"contextKey,omitempty"`
	// read-context: the composition resource name of what it composes
	// (default from-context).
	ResourceName string `json:"resourceName,omitempty"`

	// connection-details: the namespace of the connection Secret of the
	// NopResource db it composes (the Secret is named <XR UID>-db).
	SecretNamespace string `json:"secretNamespace,omitempty"`
	// connection-details: what NopResource db writes to its connection
	// Secret.
	SecretData map[string]string `json:"secretData,omitempty"`
	// connection-details: XR connection details copied from the observed
	// connection details of NopResource db, by XR key: its key.
	Copy map[string]string `json:"copy,omitempty"`
	// connection-details: XR connection details of fixed values.
	Fixed map[string]string `json:"fixed,omitempty"`

	// Behaviour makes the function misbehave, for tests.
	Behaviour Behaviour `json:"behaviour,omitempty"`
}

// Requirement is a resource requirement spelled out.
type Requirement struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Name       string            `json:"name,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Namespace  string            `json:"namespace,omitempty"`
}

// Behaviour switches. Zero values mean "behave".
type Behaviour struct {
	// Fatal, when set, is the message of a Fatal result returned instead of
	// doing any work.
	Fatal string `json:"fatal,omitempty"`
	// Sleep is a Go duration to wait before answering (to provoke a
	// timeout). The wait ends early if the caller gives up.
	Sleep string `json:"sleep,omitempty"`
	// BadTag makes the response carry a tag other than the request's (a
	// malformed response).
	BadTag bool `json:"badTag,omitempty"`
	// Unstable makes compose-from-env change its requirements on every call,
	// so they never stabilize.
	Unstable bool `json:"unstable,omitempty"`
	// TTL is a Go duration for the response's TTL (default the SDK's 1m).
	TTL string `json:"ttl,omitempty"`
}

// GetInput decodes req's input. A missing input is an empty one.
func GetInput(req *fnv1.RunFunctionRequest) (Input, error) {
	in := Input{}
	if req.GetInput() == nil {
		return in, nil
	}
	b, err := protojson.Marshal(req.GetInput())
	if err != nil {
		return in, fmt.Errorf("cannot encode input: %w", err)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, fmt.Errorf("cannot decode input: %w", err)
	}
	if in.APIVersion != APIVersion || in.Kind != Kind {
		return in, fmt.Errorf("input must be %s %s, not %s %s", APIVersion, Kind, in.APIVersion, in.Kind)
	}
	return in, nil
}

// Begin starts a response to req according to b. It returns done=true when
// the response is complete (a fatal result), and an error only when the
// caller gave up while the function slept.
func Begin(ctx context.Context, req *fnv1.RunFunctionRequest, b Behaviour) (rsp *fnv1.RunFunctionResponse, done bool, err error) {
	ttl := response.DefaultTTL
	if b.TTL != "" {
		d, err := time.ParseDuration(b.TTL)
		if err != nil {
			rsp := response.To(req, ttl)
			response.Fatal(rsp, fmt.Errorf("cannot parse behaviour.ttl: %w", err))
			return rsp, true, nil
		}
		ttl = d
	}
	rsp = response.To(req, ttl)
	if b.Sleep != "" {
		d, err := time.ParseDuration(b.Sleep)
		if err != nil {
			response.Fatal(rsp, fmt.Errorf("cannot parse behaviour.sleep: %w", err))
			return rsp, true, nil
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, true, ctx.Err()
		}
	}
	if b.BadTag {
		rsp.Meta.Tag = "not-the-request-tag"
	}
	if b.Fatal != "" {
		response.Fatal(rsp, errors.New(b.Fatal))
		return rsp, true, nil
	}
	return rsp, false, nil
}

// Serve serves fn with the standard function flags until the server fails:
// --address (default :9443), --tls-certs-dir (default $TLS_SERVER_CERTS_DIR;
// tls.crt, tls.key and ca.crt, clients must present a certificate signed by
// ca.crt) and --insecure (plaintext). The SDK's metrics server is off so that
// several functions can run on one machine.
func Serve(fn fnv1.FunctionRunnerServiceServer) {
	address := flag.String("address", ":9443", "address to listen on for gRPC")
	certs := flag.String("tls-certs-dir", os.Getenv("TLS_SERVER_CERTS_DIR"), "directory holding tls.crt, tls.key and ca.crt")
	insecure := flag.Bool("insecure", false, "serve plaintext gRPC, without mutual TLS (development only)")
	flag.Parse()

	if !*insecure && *certs == "" {
		fmt.Fprintln(os.Stderr, "either --tls-certs-dir or --insecure is required")
		os.Exit(2)
	}
	err := function.Serve(fn,
		function.Listen("tcp", *address),
		function.MTLSCertificates(*certs),
		function.Insecure(*insecure),
		function.WithMetricsServer(""),
	)
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
