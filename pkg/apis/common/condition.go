// Package common holds API types shared by Loom's API groups: the condition
// machinery that Crossplane's types embed in their status (conditions keyed by
// type, with reasons and an observed generation).
//
// The JSON of a Condition and a ConditionedStatus is byte for byte that of
// crossplane-runtime v1.20's apis/common/v1 (and Crossplane v2's core/v2)
// for the same state; condition_crossplane_test.go compares them. Like
// Crossplane v1.20, Loom leaves ObservedGeneration unset on the conditions of
// claims and composite resources; it is set only on Loom's own kinds.
//
// +kubebuilder:object:generate=true
package common

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A ConditionType represents a condition a resource could be in.
type ConditionType string

// A ConditionReason represents the reason a resource is in a condition.
type ConditionReason string

// A Condition that may apply to a resource.
type Condition struct {
	// Type of this condition. At most one of each condition type may apply to
	// a resource at any point in time.
	Type ConditionType `json:"type"`

	// Status of this condition; is it currently True, False, or Unknown?
	Status corev1.ConditionStatus `json:"status"`

	// LastTransitionTime is the last time this condition transitioned from one
	// status to another.
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`

	// A Reason for this condition's last transition from one status to another.
	Reason ConditionReason `json:"reason"`

	// A Message containing details about this condition's last transition from
	// one status to another, if any.
	// +optional
	Message string `json:"message,omitempty"`

	// ObservedGeneration represents the .metadata.generation that the condition was set based upon.
	// For instance, if .metadata.generation is currently 12, but the .status.conditions[x].observedGeneration is 9, the condition is out of date
	// with respect to the current state of the instance.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Equal reports whether c and other are equal ignoring LastTransitionTime:
// two conditions that say the same thing are the same condition, so setting
// one again must not count as a transition.
func (c Condition) Equal(other Condition) bool {
	return c.Type == other.Type &&
		c.Status == other.Status &&
		c.Reason == other.Reason &&
		c.Message == other.Message &&
		c.ObservedGeneration == other.ObservedGeneration
}

// WithMessage returns a copy of c with the supplied message.
func (c Condition) WithMessage(msg string) Condition {
	c.Message = msg
	return c
}

// WithObservedGeneration returns a copy of c with the supplied observed
// generation.
func (c Condition) WithObservedGeneration(gen int64) Condition {
	c.ObservedGeneration = gen
	return c
}

// A ConditionedStatus reflects the observed status of a resource. Only one
// condition of each type may exist.
type ConditionedStatus struct {
	// Conditions of the resource.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`
}

// GetCondition returns the condition of the supplied type, or a condition of
// that type with status Unknown if there is none. It never returns a pointer
// into the status, so callers cannot change it by accident.
func (s *ConditionedStatus) GetCondition(ct ConditionType) Condition {
	for _, c := range s.Conditions {
		if c.Type == ct {
			return c
		}
	}
	return Condition{Type: ct, Status: corev1.ConditionUnknown}
}

// SetConditions sets the supplied conditions, replacing every existing
// condition of the same type. A condition equal to an existing one (see
// Condition.Equal) leaves that one, and its LastTransitionTime, untouched, so
// setting the same conditions twice changes nothing. Conditions keep the order
// in which their types first appeared. This is crossplane-runtime v1.20's
// SetConditions, and the JSON of the result is the same (a test compares).
func (s *ConditionedStatus) SetConditions(c ...Condition) {
	for _, nc := range c {
		exists := false
		for i, ec := range s.Conditions {
			if ec.Type != nc.Type {
				continue
			}
			exists = true
			if !ec.Equal(nc) {
				s.Conditions[i] = nc
			}
		}
		if !exists {
			s.Conditions = append(s.Conditions, nc)
		}
	}
}
