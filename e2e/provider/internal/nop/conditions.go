package nop

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Crossplane's condition types and reasons that the provider reports itself.
const (
	TypeReady  = "Ready"
	TypeSynced = "Synced"

	ReasonAvailable        = "Available"
	ReasonUnavailable      = "Unavailable"
	ReasonReconcileSuccess = "ReconcileSuccess"
	ReasonReconcileError   = "ReconcileError"
	ReasonReconcilePaused  = "ReconcilePaused"
)

// A Schedule is a parsed spec.forProvider.conditionAfter: the conditions a
// NopResource reports as a function of its age. The zero Schedule schedules
// nothing.
type Schedule struct {
	entries []entry
}

type entry struct {
	after  time.Duration
	typ    string
	status string
	reason string
}

// ParseSchedule parses conditionAfter. It fails on the first entry whose
// time is not a Go duration, naming the entry.
func ParseSchedule(cas []ConditionAfter) (Schedule, error) {
	s := Schedule{entries: make([]entry, 0, len(cas))}
	for i, ca := range cas {
		d, err := time.ParseDuration(ca.Time)
		if err != nil {
			return Schedule{}, fmt.Errorf("cannot parse spec.forProvider.conditionAfter[%d].time: %w", i, err)
		}
		reason := DefaultReason(ca.ConditionType, ca.ConditionStatus)
		if ca.ConditionReason != nil {
			reason = *ca.ConditionReason
		}
		s.entries = append(s.entries, entry{after: d, typ: ca.ConditionType, status: ca.ConditionStatus, reason: reason})
	}
	return s, nil
}

// DefaultReason is the reason of a scheduled condition that names none:
// Available and Unavailable for Ready True and False (the reasons Crossplane
// itself uses), empty otherwise.
func DefaultReason(conditionType, status string) string {
	if conditionType != TypeReady {
		return ""
	}
	switch status {
	case "True":
		return ReasonAvailable
	case "False":
		return ReasonUnavailable
	}
	return ""
}

// Due returns the conditions that are due at age, in the order their types
// first appear in the schedule, and how long after age the next not yet due
// entry falls due (zero with ok false when none remains). Per type, the entry
// with the greatest time not after age wins; among entries with equal times
// the first listed wins. Due is pure: callers requeue exactly after next
// instead of polling.
func (s Schedule) Due(age time.Duration) (due []Condition, next time.Duration, ok bool) {
	winner := make(map[string]int, len(s.entries))
	var order []string
	for i, e := range s.entries {
		if e.after > age {
			if wait := e.after - age; !ok || wait < next {
				next, ok = wait, true
			}
			continue
		}
		w, seen := winner[e.typ]
		if !seen {
			order = append(order, e.typ)
		}
		if !seen || e.after > s.entries[w].after {
			winner[e.typ] = i
		}
	}
	due = make([]Condition, 0, len(order))
	for _, t := range order {
		e := s.entries[winner[t]]
		due = append(due, Condition{Type: e.typ, Status: e.status, Reason: e.reason})
	}
	return due, next, ok
}

// SetCondition returns conds with c in place of the condition of the same
// type, or with c appended. c's LastTransitionTime is ignored: it becomes now
// when the status changes (or the type is new) and is kept otherwise, which
// is the Kubernetes meaning of the field. SetCondition never modifies conds
// in place.
func SetCondition(conds []Condition, c Condition, now metav1.Time) []Condition {
	out := make([]Condition, 0, len(conds)+1)
	found := false
	for _, old := range conds {
		if old.Type != c.Type {
			out = append(out, old)
			continue
		}
		found = true
		c.LastTransitionTime = now
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		out = append(out, c)
	}
	if !found {
		c.LastTransitionTime = now
		out = append(out, c)
	}
	return out
}
