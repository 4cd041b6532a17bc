package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCount(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	total := &Tally{}
	c := &http.Client{Transport: Count(total)(http.DefaultTransport)}
	outer, inner := &Tally{}, &Tally{}
	ctx := WithTally(t.Context(), outer)
	ictx := WithTally(ctx, inner)
	do := func(ctx context.Context, method string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		rsp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = rsp.Body.Close()
	}
	do(t.Context(), http.MethodGet)
	do(ctx, http.MethodPatch)
	do(ictx, http.MethodGet)
	do(ictx, http.MethodDelete)
	for name, tc := range map[string]struct {
		tally         *Tally
		reads, writes int64
	}{
		"Total": {tally: total, reads: 2, writes: 2},
		"Outer": {tally: outer, reads: 1, writes: 2},
		"Inner": {tally: inner, reads: 1, writes: 1},
	} {
		if tc.tally.Reads() != tc.reads || tc.tally.Writes() != tc.writes {
			t.Errorf("%s tally: %d reads, %d writes; want %d and %d", name, tc.tally.Reads(), tc.tally.Writes(), tc.reads, tc.writes)
		}
	}
}
