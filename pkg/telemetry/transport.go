package telemetry

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"
)

// WrapTransport instruments a Kubernetes client's HTTP transport: each API
// request made within a span (handling an event, publishing one) becomes a
// child span named after the Kubernetes verb and resource, for example
// "k8s create xpostgresqlinstances" or "k8s patch nopresources/status", and
// carries the trace context to the API server. Requests made outside any
// span (informer lists, leader leases, discovery) and watches are passed
// through untouched, so that long-running and background traffic does not
// flood the traces. Request and response bodies are never recorded.
//
// Every request, traced or not, is also counted in the
// loom.k8s.requests counter by verb, resource and outcome (see
// RequestVerbResource and CountRequest).
//
// It has the signature of rest.Config.WrapTransport and composes with
// rest.Config.Wrap.
func WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return countingTransport{next: traceTransport(rt)}
}

// countingTransport counts each request it passes on by its outcome.
type countingTransport struct{ next http.RoundTripper }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rsp, err := c.next.RoundTrip(r)
	outcome := "error"
	if err == nil {
		outcome = strconv.Itoa(rsp.StatusCode)
	}
	verb, resource := RequestVerbResource(r)
	CountRequest(r.Context(), verb, resource, outcome)
	return rsp, err
}

// CountRequest adds one to the loom.k8s.requests counter: API requests of
// this process by verb (as RequestVerbResource names it), resource (with
// its subresource, or "other" for non-resource paths) and outcome (the
// HTTP status code, or "error" when no response came back). Safe for
// concurrent use.
func CountRequest(ctx context.Context, verb, resource, outcome string) {
	i := instruments()
	i.requests.Add(ctx, 1, i.requestAttrs.Option(verb, resource, outcome))
}

// RequestVerbResource names the Kubernetes verb (get, list, watch, create,
// update, patch, apply, delete, deletecollection) and resource (with its
// subresource, "pods/status") of an API request; a path that is no
// resource path gives the HTTP method, lower case, and "other".
func RequestVerbResource(r *http.Request) (verb, resource string) {
	res, name, sub, ok := resourcePath(r.URL.Path)
	if !ok {
		return strings.ToLower(r.Method), "other"
	}
	if sub != "" {
		res += "/" + sub
	}
	if w := r.URL.Query().Get("watch"); r.Method == http.MethodGet && (w == "true" || w == "1") {
		return "watch", res
	}
	return k8sVerb(r, name), res
}

func traceTransport(rt http.RoundTripper) http.RoundTripper {
	return otelhttp.NewTransport(rt,
		otelhttp.WithFilter(func(r *http.Request) bool {
			if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
				return false
			}
			return trace.SpanContextFromContext(r.Context()).IsValid()
		}),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			return SpanName(r)
		}),
	)
}

// SpanName names the span of a Kubernetes API request: "k8s", the verb as
// kubectl would say it (get, list, create, update, patch, apply, delete,
// deletecollection), and the resource with its subresource. Paths that are
// not resource paths (discovery, /version) are named by their HTTP method
// and path.
func SpanName(r *http.Request) string {
	res, name, sub, ok := resourcePath(r.URL.Path)
	if !ok {
		return "k8s " + r.Method + " " + r.URL.Path
	}
	if sub != "" {
		res += "/" + sub
	}
	return "k8s " + k8sVerb(r, name) + " " + res
}

// k8sVerb is the verb of a request on a resource path, name being the
// object's name ("" for a collection).
func k8sVerb(r *http.Request, name string) string {
	verb := strings.ToLower(r.Method)
	switch r.Method {
	case http.MethodGet:
		verb = "get"
		if name == "" {
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/apply-patch") {
			verb = "apply"
		}
	case http.MethodDelete:
		verb = "delete"
		if name == "" {
			verb = "deletecollection"
		}
	}
	return verb
}

// resourcePath splits a Kubernetes resource path,
// /api/v1[/namespaces/NS]/RESOURCE[/NAME[/SUB]] or
// /apis/GROUP/VERSION[/namespaces/NS]/RESOURCE[/NAME[/SUB]].
func resourcePath(p string) (resource, name, sub string, ok bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "", "", "", false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 || parts[0] == "" {
		return "", "", "", false
	}
	resource = parts[0]
	if len(parts) > 1 {
		name = parts[1]
	}
	if len(parts) > 2 {
		sub = parts[2]
	}
	return resource, name, sub, true
}
