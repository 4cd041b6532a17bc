//go:build e2e

package observe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// TraceReport describes a claim's creation trace as Jaeger holds it.
type TraceReport struct {
	Claim   Claim
	TraceID string
	Spans   int
	// Services are the services with spans in the trace, sorted.
	Services []string
	// Errors are the spans marked as errors, "service operation (tags)".
	Errors []string
}

// ClaimTrace finds in Jaeger the trace of c's creation (the trace the
// watcher started when it saw the claim added) and returns it once it
// holds spans of every service of services and, if wantError, a span
// marked as an error; it fails after timeout.
func (s *Session) ClaimTrace(ctx context.Context, c Claim, services []string, wantError bool, timeout time.Duration) (TraceReport, error) {
	jc := jaegerClient{s.JaegerURL}
	rep := TraceReport{Claim: c}
	err := poll(ctx, timeout, time.Second, func() error {
		traces, err := jc.find(ctx, "watcher", map[string]string{"k8s.uid": c.UID, "loom.event.type": "EVENT_TYPE_ADDED"})
		if err != nil {
			return err
		}
		if len(traces) == 0 {
			return fmt.Errorf("no trace of the watcher holds claim %s (uid %s) added", c.Name, c.UID)
		}
		// The oldest such trace is the creation's.
		t, err := jc.trace(ctx, traces[len(traces)-1].TraceID)
		if err != nil {
			return err
		}
		rep = describe(c, t)
		var missing []string
		for _, svc := range services {
			if !slices.Contains(rep.Services, svc) {
				missing = append(missing, svc)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("trace %s of claim %s has no spans of %s (it has %s)", t.TraceID, c.Name, strings.Join(missing, ", "), strings.Join(rep.Services, ", "))
		}
		if wantError && len(rep.Errors) == 0 {
			return fmt.Errorf("trace %s of claim %s has no span marked as an error", t.TraceID, c.Name)
		}
		return nil
	})
	return rep, err
}

func describe(c Claim, t jTrace) TraceReport {
	rep := TraceReport{Claim: c, TraceID: t.TraceID, Spans: len(t.Spans)}
	seen := map[string]bool{}
	for _, sp := range t.Spans {
		svc := t.service(sp)
		if !seen[svc] {
			seen[svc] = true
			rep.Services = append(rep.Services, svc)
		}
		if sp.isError() {
			e := svc + " " + sp.OperationName
			if step := sp.tag("loom.step"); step != "" {
				e += " (step " + step + ", function " + sp.tag("loom.function") + ")"
			}
			if !slices.Contains(rep.Errors, e) {
				rep.Errors = append(rep.Errors, e)
			}
		}
	}
	sort.Strings(rep.Services)
	sort.Strings(rep.Errors)
	return rep
}

// ExemplarTrace returns the trace ID of an exemplar of the claims'
// time-to-Ready histogram recorded since start, once Prometheus has one
// and Jaeger holds its trace.
func (s *Session) ExemplarTrace(ctx context.Context, start time.Time, timeout time.Duration) (string, error) {
	pc, jc := promClient{s.PrometheusURL}, jaegerClient{s.JaegerURL}
	var id string
	err := poll(ctx, timeout, time.Second, func() error {
		ex, err := pc.exemplars(ctx, "loom_claim_time_to_ready_seconds_bucket", start, time.Now())
		if err != nil {
			return err
		}
		for _, e := range ex {
			if e.Labels["trace_id"] == "" {
				continue
			}
			id = e.Labels["trace_id"]
			if _, err := jc.trace(ctx, id); err != nil {
				return fmt.Errorf("the exemplar's trace %s is not in Jaeger: %w", id, err)
			}
			return nil
		}
		return errors.New("no exemplar with a trace_id on loom_claim_time_to_ready_seconds_bucket")
	})
	return id, err
}
