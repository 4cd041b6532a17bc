//go:build e2e

package bench

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/loomxr/loom/pkg/stack"
)

// This file exports the parts of the side-by-side benchmark that other
// end-to-end packages reuse (e2e/migrate runs real Crossplane and then
// Loom on one cluster).

// A Crossplane is a running upstream `crossplane core start`.
type Crossplane struct{ p *crossplaneProcess }

// StartCrossplane starts upstream Crossplane core (the binary in dir, as
// `make crossplane` builds it) against s, as startCrossplane does for RunVS,
// keeping its files and log under stateDir. It returns once Crossplane
// answers its readiness probe.
func StartCrossplane(ctx context.Context, s *stack.Stack, kube kubernetes.Interface, dir, stateDir string, logf func(string, ...any)) (*Crossplane, error) {
	p, err := startCrossplane(ctx, s, kube, dir, stateDir, logf)
	if err != nil {
		return nil, err
	}
	return &Crossplane{p: p}, nil
}

// Stop ends Crossplane (SIGTERM, then SIGKILL after ten seconds). It
// returns an error if Crossplane had exited on its own before.
func (c *Crossplane) Stop() error { return c.p.stop() }

// AuditFlags writes an audit policy to dir and returns the kube-apiserver
// flags that log every request (metadata only) to the returned path.
func AuditFlags(dir string) (flags []string, logPath string, err error) { return auditFlags(dir) }

// An AuditRequest is one class of requests of the audit log.
type AuditRequest struct {
	// Client is "watcher", "binder", "renderer", "secrets" (Loom's
	// services), "crossplane", "provider-nop", "harness", or a user name.
	Client string
	// Verb is the audit verb: create, update, patch, delete, get, ...
	Verb string
	// Resource is resource[/subresource].
	Resource string
	Code     int
}

// IsWrite reports whether the request changed (or tried to change) state.
func (k AuditRequest) IsWrite() bool { return auditWriteVerbs[k.Verb] }

// IsLoom reports whether one of Loom's four services made the request.
func (k AuditRequest) IsLoom() bool { return loomServices[k.Client] }

// ReadAudit counts the requests of the audit log at path received in
// [from, to), by class.
func ReadAudit(path string, from, to time.Time) (map[AuditRequest]float64, error) {
	c, err := readAudit(path, []window{{name: "w", from: from, to: to}})
	if err != nil {
		return nil, err
	}
	out := make(map[AuditRequest]float64, len(c["w"]))
	for k, v := range c["w"] {
		out[AuditRequest(k)] += v
	}
	return out, nil
}
