package nop

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ca(t, typ, status string) ConditionAfter {
	return ConditionAfter{Time: t, ConditionType: typ, ConditionStatus: status}
}

func TestScheduleDue(t *testing.T) {
	reason := "Custom"
	type want struct {
		due     []Condition
		next    time.Duration
		pending bool
	}
	cases := map[string]struct {
		reason string
		cas    []ConditionAfter
		age    time.Duration
		want   want
	}{
		"Empty": {
			reason: "Without a schedule nothing is due and nothing is pending.",
			age:    time.Hour,
			want:   want{due: []Condition{}},
		},
		"NotYetDue": {
			reason: "An entry in the future is pending exactly for the time that remains.",
			cas:    []ConditionAfter{ca("1s", "Ready", "True")},
			age:    300 * time.Millisecond,
			want:   want{due: []Condition{}, next: 700 * time.Millisecond, pending: true},
		},
		"DueExactlyNow": {
			reason: "An entry is due once its time has elapsed, not after.",
			cas:    []ConditionAfter{ca("1s", "Ready", "True")},
			age:    time.Second,
			want:   want{due: []Condition{{Type: "Ready", Status: "True", Reason: ReasonAvailable}}},
		},
		"ZeroIsDueAtCreation": {
			reason: "A 0s entry is due at age zero.",
			cas:    []ConditionAfter{ca("0s", "Ready", "True")},
			want:   want{due: []Condition{{Type: "Ready", Status: "True", Reason: ReasonAvailable}}},
		},
		"LatestDueWins": {
			reason: "Per type, the entry with the greatest due time wins, whatever the listing order.",
			cas: []ConditionAfter{
				ca("2s", "Ready", "True"),
				ca("0s", "Ready", "False"),
				ca("5s", "Ready", "Unknown"),
			},
			age: 3 * time.Second,
			want: want{
				due:     []Condition{{Type: "Ready", Status: "True", Reason: ReasonAvailable}},
				next:    2 * time.Second,
				pending: true,
			},
		},
		"EarliestPendingIsNext": {
			reason: "The next wake-up is the earliest pending entry of any type.",
			cas: []ConditionAfter{
				ca("10s", "Ready", "True"),
				ca("4s", "Healthy", "True"),
				ca("0s", "Ready", "False"),
			},
			age: time.Second,
			want: want{
				due:     []Condition{{Type: "Ready", Status: "False", Reason: ReasonUnavailable}},
				next:    3 * time.Second,
				pending: true,
			},
		},
		"TieFirstListedWins": {
			reason: "Among entries of one type due at the same time, the first listed wins.",
			cas: []ConditionAfter{
				ca("1s", "Ready", "False"),
				ca("1s", "Ready", "True"),
			},
			age:  time.Second,
			want: want{due: []Condition{{Type: "Ready", Status: "False", Reason: ReasonUnavailable}}},
		},
		"TypesInFirstAppearanceOrder": {
			reason: "Due conditions come in the order their types first appear, for deterministic status.",
			cas: []ConditionAfter{
				ca("1s", "Zeta", "True"),
				ca("0s", "Alpha", "True"),
				ca("2s", "Zeta", "False"),
			},
			age: time.Minute,
			want: want{due: []Condition{
				{Type: "Zeta", Status: "False"},
				{Type: "Alpha", Status: "True"},
			}},
		},
		"ExplicitReason": {
			reason: "A conditionReason overrides the default reason.",
			cas: []ConditionAfter{
				{Time: "0s", ConditionType: "Ready", ConditionStatus: "True", ConditionReason: &reason},
			},
			want: want{due: []Condition{{Type: "Ready", Status: "True", Reason: "Custom"}}},
		},
		"FractionalDurations": {
			reason: "Any Go duration works, including sub-second and compound ones.",
			cas:    []ConditionAfter{ca("1m30.5s", "Ready", "True")},
			age:    90 * time.Second,
			want:   want{due: []Condition{}, next: 500 * time.Millisecond, pending: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := ParseSchedule(tc.cas)
			if err != nil {
				t.Fatalf("ParseSchedule(...): %v", err)
			}
			due, next, pending := s.Due(tc.age)
			got := want{due: due, next: next, pending: pending}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nDue(%s): -want, +got:\n%s", tc.reason, tc.age, diff)
			}
		})
	}
}

func TestParseScheduleError(t *testing.T) {
	cases := map[string]struct {
		reason string
		cas    []ConditionAfter
		want   string
	}{
		"NotADuration": {
			reason: "A time that is not a Go duration fails, naming the entry.",
			cas:    []ConditionAfter{ca("1s", "Ready", "True"), ca("soon", "Ready", "True")},
			want:   `cannot parse spec.forProvider.conditionAfter[1].time: time: invalid duration "soon"`,
		},
		"MissingUnit": {
			reason: "A bare number other than zero is not a duration.",
			cas:    []ConditionAfter{ca("5", "Ready", "True")},
			want:   `cannot parse spec.forProvider.conditionAfter[0].time: time: missing unit in duration "5"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseSchedule(tc.cas)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nParseSchedule(...): -want error, +got error:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSetCondition(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(t0.Add(time.Hour))
	cases := map[string]struct {
		reason string
		conds  []Condition
		c      Condition
		want   []Condition
	}{
		"Append": {
			reason: "A new type is appended, stamped now.",
			conds:  []Condition{{Type: "Synced", Status: "True", LastTransitionTime: t0}},
			c:      Condition{Type: "Ready", Status: "True", Reason: "Available"},
			want: []Condition{
				{Type: "Synced", Status: "True", LastTransitionTime: t0},
				{Type: "Ready", Status: "True", Reason: "Available", LastTransitionTime: now},
			},
		},
		"Transition": {
			reason: "A status change replaces the condition in place, stamped now.",
			conds: []Condition{
				{Type: "Ready", Status: "False", Reason: "Unavailable", LastTransitionTime: t0},
				{Type: "Synced", Status: "True", LastTransitionTime: t0},
			},
			c: Condition{Type: "Ready", Status: "True", Reason: "Available"},
			want: []Condition{
				{Type: "Ready", Status: "True", Reason: "Available", LastTransitionTime: now},
				{Type: "Synced", Status: "True", LastTransitionTime: t0},
			},
		},
		"SameStatusKeepsTime": {
			reason: "Without a status change the transition time is kept, while reason, message and generation update.",
			conds:  []Condition{{Type: "Synced", Status: "True", Reason: "Old", ObservedGeneration: 1, LastTransitionTime: t0}},
			c:      Condition{Type: "Synced", Status: "True", Reason: "ReconcileSuccess", ObservedGeneration: 2, LastTransitionTime: now},
			want:   []Condition{{Type: "Synced", Status: "True", Reason: "ReconcileSuccess", ObservedGeneration: 2, LastTransitionTime: t0}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := append([]Condition(nil), tc.conds...)
			got := SetCondition(tc.conds, tc.c, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nSetCondition(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(before, tc.conds); diff != "" {
				t.Errorf("SetCondition modified its input: -before, +after:\n%s", diff)
			}
		})
	}
}

// FuzzSchedule checks Due's contract for arbitrary schedules: whatever parses
// never panics, a due condition's type is in the schedule, and the next
// wake-up is positive and lands exactly on a scheduled time.
func FuzzSchedule(f *testing.F) {
	f.Add("1s", "Ready", "0s", "Ready", int64(500*time.Millisecond))
	f.Add("-1s", "A", "1h", "B", int64(0))
	f.Add("1m30.5s", "Ready", "1m30.5s", "Ready", int64(90*time.Second))
	f.Fuzz(func(t *testing.T, t1, typ1, t2, typ2 string, age int64) {
		if age < 0 {
			return // NopResources are not created in the future
		}
		s, err := ParseSchedule([]ConditionAfter{ca(t1, typ1, "True"), ca(t2, typ2, "False")})
		if err != nil {
			return
		}
		due, next, pending := s.Due(time.Duration(age))
		for _, c := range due {
			if c.Type != typ1 && c.Type != typ2 {
				t.Errorf("Due returned type %q that is not scheduled", c.Type)
			}
		}
		if !pending {
			return
		}
		if next <= 0 {
			t.Errorf("Due returned non-positive next %s", next)
		}
		at := time.Duration(age) + next
		d1, _ := time.ParseDuration(t1)
		d2, _ := time.ParseDuration(t2)
		if at != d1 && at != d2 {
			t.Errorf("age+next = %s matches neither %s nor %s", at, d1, d2)
		}
	})
}
