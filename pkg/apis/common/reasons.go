package common

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types Crossplane sets on every composite resource and claim.
const (
	// TypeReady resources are believed to be ready to handle work.
	TypeReady ConditionType = "Ready"

	// TypeSynced resources are believed to be in sync with the Kubernetes
	// resources that manage their lifecycle.
	TypeSynced ConditionType = "Synced"
)

// Reasons a resource is or is not ready.
const (
	ReasonAvailable   ConditionReason = "Available"
	ReasonUnavailable ConditionReason = "Unavailable"
	ReasonCreating    ConditionReason = "Creating"
	ReasonDeleting    ConditionReason = "Deleting"
)

// Reasons a resource is or is not synced.
const (
	ReasonReconcileSuccess ConditionReason = "ReconcileSuccess"
	ReasonReconcileError   ConditionReason = "ReconcileError"
	ReasonReconcilePaused  ConditionReason = "ReconcilePaused"
)

// Available returns a condition that indicates the resource is available for
// use.
func Available() Condition {
	return Condition{Type: TypeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(), Reason: ReasonAvailable}
}

// Unavailable returns a condition that indicates the resource is not available
// for use. Unavailable is assumed only after a resource has been available.
func Unavailable() Condition {
	return Condition{Type: TypeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now(), Reason: ReasonUnavailable}
}

// Creating returns a condition that indicates the resource is being created.
func Creating() Condition {
	return Condition{Type: TypeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now(), Reason: ReasonCreating}
}

// Deleting returns a condition that indicates the resource is being deleted.
func Deleting() Condition {
	return Condition{Type: TypeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now(), Reason: ReasonDeleting}
}

// ReconcileSuccess returns a condition indicating that the last reconcile
// succeeded.
func ReconcileSuccess() Condition {
	return Condition{Type: TypeSynced, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(), Reason: ReasonReconcileSuccess}
}

// ReconcileError returns a condition indicating that the last reconcile failed
// with the supplied error, whose text becomes the message.
func ReconcileError(err error) Condition {
	return Condition{Type: TypeSynced, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now(), Reason: ReasonReconcileError, Message: err.Error()}
}

// ReconcilePaused returns a condition indicating that reconciliation of the
// resource is paused (annotation crossplane.io/paused: "true").
func ReconcilePaused() Condition {
	return Condition{Type: TypeSynced, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now(), Reason: ReasonReconcilePaused}
}
