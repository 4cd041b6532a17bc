package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loomxr/loom/pkg/apis/common"
)

// Condition types of a CompositeResourceDefinition.
const (
	// TypeEstablished is True while the definition's composite resource CRD
	// is served and its composite resources are reconciled.
	TypeEstablished common.ConditionType = "Established"

	// TypeOffered is True while the definition's claim CRD is served and its
	// claims are reconciled.
	TypeOffered common.ConditionType = "Offered"
)

// Reasons of a CompositeResourceDefinition's conditions.
const (
	ReasonWatchingComposite    common.ConditionReason = "WatchingCompositeResource"
	ReasonTerminatingComposite common.ConditionReason = "TerminatingCompositeResource"

	ReasonWatchingClaim    common.ConditionReason = "WatchingCompositeResourceClaim"
	ReasonTerminatingClaim common.ConditionReason = "TerminatingCompositeResourceClaim"
)

// WatchingComposite indicates that Loom serves and reconciles the composite
// resources the definition defines.
func WatchingComposite() common.Condition {
	return common.Condition{Type: TypeEstablished, Status: corev1.ConditionTrue, Reason: ReasonWatchingComposite, LastTransitionTime: metav1.Now()}
}

// TerminatingComposite indicates that Loom is deleting the composite resources
// the definition defines, and then their CRD.
func TerminatingComposite() common.Condition {
	return common.Condition{Type: TypeEstablished, Status: corev1.ConditionFalse, Reason: ReasonTerminatingComposite, LastTransitionTime: metav1.Now()}
}

// WatchingClaim indicates that Loom serves and reconciles the claims the
// definition offers.
func WatchingClaim() common.Condition {
	return common.Condition{Type: TypeOffered, Status: corev1.ConditionTrue, Reason: ReasonWatchingClaim, LastTransitionTime: metav1.Now()}
}

// TerminatingClaim indicates that Loom is deleting the claims the definition
// offers, and then their CRD.
func TerminatingClaim() common.Condition {
	return common.Condition{Type: TypeOffered, Status: corev1.ConditionFalse, Reason: ReasonTerminatingClaim, LastTransitionTime: metav1.Now()}
}
