package v1

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/loomxr/loom/pkg/apis/common"
)

// A ReadinessCheckType is the type of a readiness check.
type ReadinessCheckType string

// Readiness check types.
const (
	// ReadinessCheckTypeNonEmpty passes if the field exists.
	ReadinessCheckTypeNonEmpty ReadinessCheckType = "NonEmpty"
	// ReadinessCheckTypeMatchString passes if the field is the string
	// MatchString.
	ReadinessCheckTypeMatchString ReadinessCheckType = "MatchString"
	// ReadinessCheckTypeMatchInteger passes if the field is the integer
	// MatchInteger.
	ReadinessCheckTypeMatchInteger ReadinessCheckType = "MatchInteger"
	// ReadinessCheckTypeMatchTrue passes if the field is the boolean true.
	ReadinessCheckTypeMatchTrue ReadinessCheckType = "MatchTrue"
	// ReadinessCheckTypeMatchFalse passes if the field is the boolean false.
	ReadinessCheckTypeMatchFalse ReadinessCheckType = "MatchFalse"
	// ReadinessCheckTypeMatchCondition passes if the condition of type
	// MatchCondition.Type has status MatchCondition.Status.
	ReadinessCheckTypeMatchCondition ReadinessCheckType = "MatchCondition"
	// ReadinessCheckTypeNone always passes.
	ReadinessCheckTypeNone ReadinessCheckType = "None"
)

// A ReadinessCheck tells whether a composed resource is ready for use.
type ReadinessCheck struct {
	// Type of the check.
	// +kubebuilder:validation:Enum="MatchString";"MatchInteger";"NonEmpty";"MatchCondition";"MatchTrue";"MatchFalse";"None"
	Type ReadinessCheckType `json:"type"`

	// FieldPath is the path of the field the check reads. Required by every
	// type except None and MatchCondition.
	// +optional
	FieldPath string `json:"fieldPath,omitempty"`

	// MatchString is the value a MatchString check compares with.
	// +optional
	MatchString string `json:"matchString,omitempty"`

	// MatchInteger is the value a MatchInteger check compares with.
	// +optional
	MatchInteger int64 `json:"matchInteger,omitempty"`

	// MatchCondition is the condition a MatchCondition check looks for.
	// +optional
	MatchCondition *MatchConditionReadinessCheck `json:"matchCondition,omitempty"`
}

// A MatchConditionReadinessCheck names a condition type and the status it
// must have.
type MatchConditionReadinessCheck struct {
	// Type of the condition.
	// +kubebuilder:default="Ready"
	Type common.ConditionType `json:"type"`

	// Status the condition must have.
	// +kubebuilder:default="True"
	Status corev1.ConditionStatus `json:"status"`
}
