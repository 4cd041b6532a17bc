// Package poll waits in tests for something that happens asynchronously: it
// calls a check again and again, a short interval apart, until the check
// passes or a deadline passes. Tests poll with a deadline instead of
// sleeping (STYLE.md), and this is the one helper they all use, so that a
// failure always says what was awaited, for how long, and the check's last
// answer.
//
// Until and True fail the test (t.Fatalf) and so must be called from the
// test's goroutine; Wait returns an error and may be called from any
// goroutine.
package poll

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// DefaultInterval is how long a poll waits between two checks unless Every
// says otherwise.
const DefaultInterval = 20 * time.Millisecond

// An Option changes how a poll runs.
type Option func(*config)

type config struct{ interval time.Duration }

// Every sets the time between two checks: longer for checks that cost a
// request to a real API server, shorter for cheap in-memory ones. A
// non-positive d keeps DefaultInterval.
func Every(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.interval = d
		}
	}
}

func configure(opts []Option) config {
	c := config{interval: DefaultInterval}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Wait calls check at once and then every interval until it returns nil,
// and returns nil then. When ctx ends first it returns an error that wraps
// ctx's error and check's last one. check receives ctx.
func Wait(ctx context.Context, check func(context.Context) error, opts ...Option) error {
	c := configure(opts)
	t := time.NewTimer(0)
	defer t.Stop()
	var last error
	for {
		select {
		case <-ctx.Done():
			if last == nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w (last: %w)", ctx.Err(), last)
		case <-t.C:
		}
		if last = check(ctx); last == nil {
			return nil
		}
		t.Reset(c.interval)
	}
}

// Until calls check until it returns nil, and fails t with check's last
// error if it has not within timeout or the test's context ends first.
func Until(t testing.TB, timeout time.Duration, check func() error, opts ...Option) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	if err := Wait(ctx, func(context.Context) error { return check() }, opts...); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("not within %s: %v", timeout, err)
			return
		}
		t.Fatalf("stopped waiting: %v", err)
	}
}

// True calls cond until it holds, and fails t naming what was awaited if it
// does not within timeout or the test's context ends first.
func True(t testing.TB, timeout time.Duration, what string, cond func() bool, opts ...Option) {
	t.Helper()
	Until(t, timeout, func() error {
		if !cond() {
			return errors.New("still waiting for " + what)
		}
		return nil
	}, opts...)
}
