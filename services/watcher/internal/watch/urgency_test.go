package watch

import (
	"testing"
	"time"
)

func TestUrgencyBoundsEachTarget(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	u := newUrgency(3, func() time.Time { return now })
	got := []bool{}
	for range 5 {
		got = append(got, u.allow("renderer", "xr"))
	}
	want := []bool{true, true, true, false, false}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("allow() for one target, five times in one window = %v, want %v: the limit is 3", got, want)
		}
	}
	if !u.allow("renderer", "other") {
		t.Error("allow(renderer, other) = false: each target has its own count")
	}
	if !u.allow("secrets", "xr") {
		t.Error("allow(secrets, xr) = false: each service's target has its own count")
	}
	now = now.Add(urgencyWindow)
	if !u.allow("renderer", "xr") {
		t.Error("allow() in the next window = false: counts reset with each window")
	}
	if n := len(u.counts); n != 1 {
		t.Errorf("%d targets counted after the window turned, want 1: memory is one window's targets", n)
	}
}

func TestUrgencyUnlimited(t *testing.T) {
	u := newUrgency(0, time.Now)
	for i := range 100 {
		if !u.allow("renderer", "xr") {
			t.Fatalf("allow() = false at %d with no limit", i)
		}
	}
}
