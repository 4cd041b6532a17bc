//go:build e2e

package observe

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Checks are the results of RunChecks.
type Checks struct {
	Load      LoadResult
	Dashboard []QueryResult
	Healthy   TraceReport
	Broken    TraceReport
	Exemplar  string // trace ID of a time-to-Ready exemplar
	End       time.Time
}

// RunChecks puts a load of n claims on the session's stack and checks what
// an operator would look at: every dashboard query returns series, a
// healthy claim's trace spans every service, a broken claim's trace (its
// function returned a Fatal result) marks the failing step as an error,
// and a time-to-Ready exemplar leads to a trace in Jaeger. It returns what
// it saw, with every failure joined in the error.
func (s *Session) RunChecks(ctx context.Context, n, creators int) (Checks, error) {
	logf := func(format string, args ...any) { fmt.Fprintf(s.cfg.Log, format+"\n", args...) }
	var c Checks
	var err error
	if c.Load, err = s.Load(ctx, n, creators); err != nil {
		return c, err
	}
	// Let Prometheus scrape the settled counters twice before reading.
	settle := time.Now().Add(2 * s.cfg.ScrapeInterval)
	var errs []error
	healthy, _ := c.Load.First(Healthy)
	if c.Healthy, err = s.ClaimTrace(ctx, healthy, loomServices, false, time.Minute); err != nil {
		errs = append(errs, fmt.Errorf("healthy claim's trace: %w", err))
	}
	logf("trace of healthy claim %s: %s, %d spans, services %s", healthy.Name, c.Healthy.TraceID, c.Healthy.Spans, strings.Join(c.Healthy.Services, ", "))
	// A claim that cannot be rendered never reaches the secrets service.
	broken, _ := c.Load.First(FatalResult)
	if c.Broken, err = s.ClaimTrace(ctx, broken, []string{"watcher", "binder", "renderer"}, true, time.Minute); err != nil {
		errs = append(errs, fmt.Errorf("broken claim's trace: %w", err))
	}
	logf("trace of broken claim %s: %s, %d spans, services %s, errors: %s", broken.Name, c.Broken.TraceID, c.Broken.Spans,
		strings.Join(c.Broken.Services, ", "), strings.Join(c.Broken.Errors, "; "))
	if !strings.Contains(strings.Join(c.Broken.Errors, ";"), "renderer fn.Step (step broken-on-purpose") {
		errs = append(errs, fmt.Errorf("broken claim's trace %s does not mark the renderer's step broken-on-purpose as an error (errors: %v)", c.Broken.TraceID, c.Broken.Errors))
	}
	if c.Exemplar, err = s.ExemplarTrace(ctx, c.Load.Start, time.Minute); err != nil {
		errs = append(errs, fmt.Errorf("time-to-Ready exemplar: %w", err))
	} else {
		logf("a time-to-Ready exemplar leads to trace %s", c.Exemplar)
	}
	for time.Now().Before(settle) {
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-time.After(time.Until(settle)):
		}
	}
	// Some series appear only after a scrape or two (a rate needs two
	// samples): poll the whole dashboard for a while.
	path := filepath.Join(s.cfg.RepoRoot, DashboardPath)
	var derr error
	_ = poll(ctx, 4*s.cfg.ScrapeInterval+10*time.Second, s.cfg.ScrapeInterval, func() error {
		c.End = time.Now()
		c.Dashboard, derr = s.EvaluateDashboard(ctx, path, c.Load.Start.Add(-10*time.Second), c.End)
		return derr
	})
	if derr != nil {
		errs = append(errs, fmt.Errorf("dashboard queries:\n%w", derr))
	}
	logf("dashboard %s: %d queries evaluated over the load", DashboardPath, len(c.Dashboard))
	return c, errors.Join(errs...)
}
