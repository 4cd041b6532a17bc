// Package composition validates Compositions when they are written, as
// Crossplane v1.20's Composition webhook does: first on their own
// (compose.Validate), then against the schemas of the composite resource
// and the composed resources they name.
package composition

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/compose"
)

// Path is where the webhook is served, Crossplane's path.
const Path = "/validate-apiextensions-crossplane-io-v1-composition"

// WebhookName is the name of the webhook in its
// ValidatingWebhookConfiguration, Crossplane's.
const WebhookName = "compositions.apiextensions.crossplane.io"

var compositionGK = schema.GroupKind{Group: v1.Group, Kind: "Composition"}

// A Validator validates Compositions that are created or updated. It is
// safe for concurrent use.
type Validator struct{}

// NewValidator returns a Validator.
func NewValidator() *Validator { return &Validator{} }

// Validate admits or denies the creation or update of a Composition.
// Other operations are admitted.
func (v *Validator) Validate(_ context.Context, req *admissionv1.AdmissionRequest) ([]string, error) {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return nil, nil
	}
	comp := &v1.Composition{}
	if err := json.Unmarshal(req.Object.Raw, comp); err != nil {
		return nil, kerrors.NewBadRequest(fmt.Sprintf("cannot decode Composition %q: %v", req.Name, err))
	}
	if errs := compose.Validate(&comp.Spec); len(errs) > 0 {
		return nil, kerrors.NewInvalid(compositionGK, comp.GetName(), errs)
	}
	return nil, nil
}
