package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/loomxr/loom/pkg/apis/apiextensions/v1beta1"
)

// Path is where the webhook nousages.apiextensions.crossplane.io is served
// (files/admission/webhooks.yaml), Crossplane's path.
const Path = "/validate-no-usages"

// Labels and annotations of Crossplane's Usage machinery.
const (
	// LabelInUse marks an object a Usage names: the webhook's
	// objectSelector, so that the API server calls it only for those.
	LabelInUse = "crossplane.io/in-use"
	// AnnotationDeletionAttempt records on an object in use that its
	// deletion was refused, with the propagation policy asked for, so that
	// a Usage with replayDeletion deletes it once it goes.
	AnnotationDeletionAttempt = "usage.crossplane.io/deletion-attempt-with-policy"
)

// UsageLister returns the Usages that name an object in spec.of.
type UsageLister interface {
	Of(apiVersion, kind, name string) ([]*v1beta1.Usage, error)
}

// A ResourceClient returns the client of a kind's objects.
type ResourceClient interface {
	Resource(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, error)
}

// A Validator refuses to delete an object that a Usage names.
type Validator struct {
	usages  UsageLister
	objects ResourceClient
	log     *slog.Logger
}

// NewValidator returns a Validator that looks Usages up in usages and
// records refused deletions through objects.
func NewValidator(usages UsageLister, objects ResourceClient, log *slog.Logger) *Validator {
	return &Validator{usages: usages, objects: objects, log: log}
}

// Validate admits a DELETE unless a Usage names the object. When it
// refuses, it annotates the object with the refused deletion's propagation
// policy (AnnotationDeletionAttempt), except for a dry run: the webhook is
// registered with sideEffects NoneOnDryRun. A failure to annotate is
// logged and does not admit the deletion: the object is in use either
// way; the annotation only lets the Usage replay the deletion.
func (v *Validator) Validate(ctx context.Context, req *admissionv1.AdmissionRequest) ([]string, error) {
	if req.Operation != admissionv1.Delete {
		return nil, kerrors.NewBadRequest(fmt.Sprintf("unexpected operation %q, expected %q", req.Operation, admissionv1.Delete))
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(req.OldObject.Raw); err != nil {
		return nil, kerrors.NewBadRequest(fmt.Sprintf("cannot decode the object being deleted: %v", err))
	}
	if obj.GetNamespace() != "" {
		// A Usage is cluster-scoped and names cluster-scoped objects only.
		return nil, nil
	}
	usages, err := v.usages.Of(obj.GetAPIVersion(), obj.GetKind(), obj.GetName())
	if err != nil {
		return nil, kerrors.NewInternalError(err)
	}
	if len(usages) == 0 {
		return nil, nil
	}
	policy := metav1.DeletePropagationBackground
	if len(req.Options.Raw) > 0 {
		opts := &metav1.DeleteOptions{}
		if err := json.Unmarshal(req.Options.Raw, opts); err != nil {
			return nil, kerrors.NewBadRequest(fmt.Sprintf("cannot decode the delete options: %v", err))
		}
		if opts.PropagationPolicy != nil {
			policy = *opts.PropagationPolicy
		}
	}
	if (req.DryRun == nil || !*req.DryRun) && obj.GetAnnotations()[AnnotationDeletionAttempt] != string(policy) {
		if err := v.recordAttempt(ctx, obj, policy); err != nil {
			v.log.Warn("cannot record the refused deletion", "kind", obj.GetKind(), "name", obj.GetName(), "err", err)
		}
	}
	return nil, &kerrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusConflict,
		Reason:  metav1.StatusReasonConflict,
		Message: InUseMessage(usages),
	}}
}

// recordAttempt annotates obj with the refused deletion's policy.
func (v *Validator) recordAttempt(ctx context.Context, obj *unstructured.Unstructured, policy metav1.DeletionPropagation) error {
	ri, err := v.objects.Resource(obj.GroupVersionKind(), "")
	if err != nil {
		return fmt.Errorf("cannot map %s: %w", obj.GroupVersionKind(), err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{AnnotationDeletionAttempt: string(policy)},
	}})
	if err != nil {
		return err
	}
	if _, err := ri.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cannot annotate %s %q: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// InUseMessage says why an object may not be deleted: how many Usages name
// it, and the first by name with its user or its reason, as Crossplane
// words it.
func InUseMessage(usages []*v1beta1.Usage) string {
	first := usages[0]
	switch {
	case first.Spec.By != nil:
		user := ""
		if first.Spec.By.ResourceRef != nil {
			user = first.Spec.By.ResourceRef.Name
		}
		return fmt.Sprintf("This resource is in-use by %d Usage(s), including the Usage %q by resource %s/%s.", len(usages), first.Name, first.Spec.By.Kind, user)
	case first.Spec.Reason != nil:
		return fmt.Sprintf("This resource is in-use by %d Usage(s), including the Usage %q with reason: %q.", len(usages), first.Name, *first.Spec.Reason)
	default:
		return fmt.Sprintf("This resource is in-use by %d Usage(s), including the Usage %q.", len(usages), first.Name)
	}
}
