package reconcile

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTerminal(t *testing.T) {
	cause := errors.New("boom")
	cases := map[string]struct {
		reason   string
		err      error
		terminal bool
		is       error
	}{
		"Nil": {
			reason: "Terminal(nil) is nil, so it can wrap an error that may be nil.",
			err:    Terminal(nil),
		},
		"Plain": {
			reason: "An error not made by Terminal is not terminal.",
			err:    cause,
			is:     cause,
		},
		"Terminal": {
			reason:   "Terminal marks the error and keeps its cause.",
			err:      Terminal(cause),
			terminal: true,
			is:       cause,
		},
		"Wrapped": {
			reason:   "A terminal error stays terminal when wrapped again.",
			err:      fmt.Errorf("cannot reconcile: %w", Terminal(cause)),
			terminal: true,
			is:       cause,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.terminal, IsTerminal(tc.err)); diff != "" {
				t.Errorf("%s\nIsTerminal(...): -want, +got:\n%s", tc.reason, diff)
			}
			if tc.is == nil && tc.err != nil {
				t.Errorf("%s\nerr = %v, want nil", tc.reason, tc.err)
			}
			if tc.is != nil && !errors.Is(tc.err, tc.is) {
				t.Errorf("%s\nerrors.Is(%v, %v) = false", tc.reason, tc.err, tc.is)
			}
		})
	}
}

func TestResultIsZero(t *testing.T) {
	cases := map[string]struct {
		reason string
		r      Result
		want   bool
	}{
		"Zero":         {reason: "The zero Result means done.", want: true},
		"Requeue":      {reason: "Requeue asks for more.", r: Result{Requeue: true}},
		"RequeueAfter": {reason: "RequeueAfter asks for more.", r: Result{RequeueAfter: time.Second}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.r.IsZero()); diff != "" {
				t.Errorf("%s\nIsZero(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
