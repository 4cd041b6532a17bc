package poll

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of ending the
// test, and whose context the test controls.
type recorder struct {
	testing.TB
	ctx    context.Context
	failed string
}

func (r *recorder) Helper()                  {}
func (r *recorder) Context() context.Context { return r.ctx }
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

// after returns a check that fails until its n-th call, and the count of
// calls.
func after(n int) (func() error, *int) {
	calls := 0
	return func() error {
		calls++
		if calls < n {
			return fmt.Errorf("call %d: not yet", calls)
		}
		return nil
	}, &calls
}

func TestUntil(t *testing.T) {
	cases := map[string]struct {
		reason     string
		passOn     int
		cancelled  bool
		wantCalls  int
		wantFailed []string
	}{
		"AtOnce": {
			reason:    "A check that passes at once is called once, without waiting.",
			passOn:    1,
			wantCalls: 1,
		},
		"Later": {
			reason:    "A check is called again until it passes.",
			passOn:    3,
			wantCalls: 3,
		},
		"Never": {
			reason:     "A check that never passes fails the test, naming the timeout and the check's last error.",
			passOn:     1 << 30,
			wantFailed: []string{"not within 100ms", "not yet"},
		},
		"TestEnded": {
			reason:     "When the test's context ends, the poll stops and says so.",
			passOn:     1 << 30,
			cancelled:  true,
			wantFailed: []string{"stopped waiting", "context canceled"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			if tc.cancelled {
				cancel()
			}
			defer cancel()
			r := &recorder{TB: t, ctx: ctx}
			check, calls := after(tc.passOn)
			Until(r, 100*time.Millisecond, check, Every(time.Millisecond))
			if tc.wantCalls != 0 && *calls != tc.wantCalls {
				t.Errorf("\n%s\nUntil(...): %d calls, want %d", tc.reason, *calls, tc.wantCalls)
			}
			if len(tc.wantFailed) == 0 && r.failed != "" {
				t.Errorf("\n%s\nUntil(...) failed the test: %s", tc.reason, r.failed)
			}
			for _, w := range tc.wantFailed {
				if !strings.Contains(r.failed, w) {
					t.Errorf("\n%s\nUntil(...) failure %q: want it to contain %q", tc.reason, r.failed, w)
				}
			}
		})
	}
}

func TestTrue(t *testing.T) {
	cases := map[string]struct {
		reason     string
		cond       bool
		wantFailed string
	}{
		"Holds": {
			reason: "A condition that holds passes.",
			cond:   true,
		},
		"NeverHolds": {
			reason:     "A condition that never holds fails the test, naming what was awaited.",
			wantFailed: "still waiting for the thing",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &recorder{TB: t, ctx: t.Context()}
			True(r, 50*time.Millisecond, "the thing", func() bool { return tc.cond }, Every(time.Millisecond))
			if tc.wantFailed == "" && r.failed != "" {
				t.Errorf("\n%s\nTrue(...) failed the test: %s", tc.reason, r.failed)
			}
			if !strings.Contains(r.failed, tc.wantFailed) {
				t.Errorf("\n%s\nTrue(...) failure %q: want it to contain %q", tc.reason, r.failed, tc.wantFailed)
			}
		})
	}
}

func TestWait(t *testing.T) {
	boom := errors.New("boom")
	cases := map[string]struct {
		reason  string
		check   func(context.Context) error
		timeout time.Duration
		wantIs  []error
	}{
		"Passes": {
			reason:  "A check that passes returns nil.",
			check:   func(context.Context) error { return nil },
			timeout: time.Second,
		},
		"ContextEnds": {
			reason:  "When the context ends first, the error wraps both the context's and the check's last.",
			check:   func(context.Context) error { return boom },
			timeout: 20 * time.Millisecond,
			wantIs:  []error{context.DeadlineExceeded, boom},
		},
		"GetsTheContext": {
			reason: "The check is given the poll's context.",
			check: func(ctx context.Context) error {
				if _, ok := ctx.Deadline(); !ok {
					return boom
				}
				return nil
			},
			timeout: time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
			defer cancel()
			err := Wait(ctx, tc.check, Every(time.Millisecond))
			if len(tc.wantIs) == 0 && err != nil {
				t.Errorf("\n%s\nWait(...): %v", tc.reason, err)
			}
			for _, w := range tc.wantIs {
				if !errors.Is(err, w) {
					t.Errorf("\n%s\nWait(...): got %v, want an error wrapping %v", tc.reason, err, w)
				}
			}
		})
	}
}

func TestEvery(t *testing.T) {
	cases := map[string]struct {
		reason string
		d      time.Duration
		want   time.Duration
	}{
		"Set":      {reason: "A positive interval is used.", d: time.Second, want: time.Second},
		"Zero":     {reason: "Zero keeps the default.", want: DefaultInterval},
		"Negative": {reason: "A negative interval keeps the default.", d: -time.Second, want: DefaultInterval},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := configure([]Option{Every(tc.d)}).interval; got != tc.want {
				t.Errorf("\n%s\nEvery(%s): interval %s, want %s", tc.reason, tc.d, got, tc.want)
			}
		})
	}
}
