// Package composition validates Compositions when they are written, as
// Crossplane v1.20's Composition webhook does: first on their own
// (compose.Validate), then, "schema-aware", against the schemas of the
// composite resource and the composed resources they name.
package composition

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	admissionv1 "k8s.io/api/admission/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/compose"
)

// Path is where the webhook is served, Crossplane's path.
const Path = "/validate-apiextensions-crossplane-io-v1-composition"

// WebhookName is the name of the webhook in its
// ValidatingWebhookConfiguration, Crossplane's.
const WebhookName = "compositions.apiextensions.crossplane.io"

// AnnotationValidationMode selects how schema-aware validation treats what
// it finds, as in Crossplane.
const AnnotationValidationMode = "crossplane.io/composition-schema-aware-validation-mode"

// A Mode is a schema-aware validation mode.
type Mode string

// Modes of schema-aware validation.
const (
	// ModeWarn admits every Composition that is valid on its own; what
	// the schemas say against it, and schemas that are missing, become
	// warnings. Crossplane v1.20's default, so Loom's too.
	ModeWarn Mode = "warn"
	// ModeLoose denies a Composition the schemas say is invalid, and
	// admits with warnings one whose schemas are not all there (what can
	// be checked is, and is reported as warnings).
	ModeLoose Mode = "loose"
	// ModeStrict denies a Composition the schemas say is invalid, and one
	// whose schemas are not all there.
	ModeStrict Mode = "strict"
)

// DefaultMode is the mode of a Composition without the annotation.
const DefaultMode = ModeWarn

var compositionGK = schema.GroupKind{Group: v1.Group, Kind: "Composition"}

// A CRDGetter returns the CRD that defines a kind. It returns an error
// that kerrors.IsNotFound recognises when there is none.
type CRDGetter interface {
	CRD(gk schema.GroupKind) (*extv1.CustomResourceDefinition, error)
}

// A Validator validates Compositions that are created or updated. It is
// safe for concurrent use.
type Validator struct {
	crds CRDGetter
}

// NewValidator returns a Validator that finds schemas with crds.
func NewValidator(crds CRDGetter) *Validator { return &Validator{crds: crds} }

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
	errs := compose.Validate(&comp.Spec)
	if req.Operation == admissionv1.Update {
		errs = append(errs, immutable(req.OldObject.Raw, comp)...)
	}
	if len(errs) > 0 {
		return nil, kerrors.NewInvalid(compositionGK, comp.GetName(), errs)
	}

	mode := Mode(comp.GetAnnotations()[AnnotationValidationMode])
	switch mode {
	case "":
		mode = DefaultMode
	case ModeWarn, ModeLoose, ModeStrict:
	default:
		return nil, kerrors.NewInvalid(compositionGK, comp.GetName(), field.ErrorList{field.NotSupported(
			field.NewPath("metadata", "annotations").Key(AnnotationValidationMode), mode, []string{string(ModeLoose), string(ModeWarn), string(ModeStrict)})})
	}

	crds, missing, err := v.neededCRDs(comp)
	if err != nil {
		return nil, kerrors.NewInternalError(err)
	}
	if len(missing) > 0 && mode == ModeStrict {
		return nil, kerrors.NewInvalid(compositionGK, comp.GetName(), missingErrors(missing))
	}
	var warnings []string
	for _, m := range missing {
		warnings = append(warnings, fmt.Sprintf("Composition %q cannot be fully validated against schemas: %s", comp.GetName(), m))
	}
	found := validateSchemas(comp, crds)
	if len(found) == 0 {
		return warnings, nil
	}
	// Findings become denials only when every schema was there and the
	// mode asks for it: Crossplane admits a Composition whose schemas are
	// missing unless in strict mode.
	if mode != ModeWarn && len(missing) == 0 {
		return warnings, kerrors.NewInvalid(compositionGK, comp.GetName(), found)
	}
	for _, e := range found {
		warnings = append(warnings, fmt.Sprintf("Composition %q invalid for schema-aware validation: %s", comp.GetName(), e))
	}
	return warnings, nil
}

// immutable refuses changes of the fields a Composition may not change:
// spec.compositeTypeRef (Crossplane's CRD holds the same rule).
func immutable(oldRaw []byte, comp *v1.Composition) field.ErrorList {
	old := &v1.Composition{}
	if len(oldRaw) == 0 || json.Unmarshal(oldRaw, old) != nil {
		return nil
	}
	if old.Spec.CompositeTypeRef != comp.Spec.CompositeTypeRef {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "compositeTypeRef"), comp.Spec.CompositeTypeRef,
			fmt.Sprintf("is immutable (was kind %s, apiVersion %s)", old.Spec.CompositeTypeRef.Kind, old.Spec.CompositeTypeRef.APIVersion))}
	}
	return nil
}

// neededCRDs returns the CRDs of the composite resource and of the
// templates' bases, by group and kind, and a description of each that is
// missing, sorted.
func (v *Validator) neededCRDs(comp *v1.Composition) (map[schema.GroupKind]*extv1.CustomResourceDefinition, []string, error) {
	gks := []schema.GroupKind{comp.Spec.CompositeTypeRef.GroupVersionKind().GroupKind()}
	for i := range comp.Spec.Resources {
		if gvk, ok := baseGVK(&comp.Spec.Resources[i]); ok {
			gks = append(gks, gvk.GroupKind())
		}
	}
	crds := map[schema.GroupKind]*extv1.CustomResourceDefinition{}
	missing := map[string]bool{}
	for _, gk := range gks {
		if _, done := crds[gk]; done {
			continue
		}
		crd, err := v.crds.CRD(gk)
		switch {
		case kerrors.IsNotFound(err):
			missing[fmt.Sprintf("no CustomResourceDefinition defines kind %s of group %s", gk.Kind, gk.Group)] = true
		case err != nil:
			return nil, nil, fmt.Errorf("cannot get the CustomResourceDefinition of %s: %w", gk, err)
		default:
			crds[gk] = crd
		}
	}
	out := make([]string, 0, len(missing))
	for m := range missing {
		out = append(out, m)
	}
	sort.Strings(out)
	return crds, out, nil
}

func missingErrors(missing []string) field.ErrorList {
	errs := make(field.ErrorList, 0, len(missing))
	for _, m := range missing {
		errs = append(errs, field.NotFound(field.NewPath("spec"), m))
	}
	return errs
}

// baseGVK returns the group, version and kind of a template's base.
func baseGVK(t *v1.ComposedTemplate) (schema.GroupVersionKind, bool) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(t.Base.Raw); err != nil {
		return schema.GroupVersionKind{}, false
	}
	return u.GroupVersionKind(), true
}

// validateSchemas checks the templates whose composed kind's and composite
// kind's schemas are both known: their patches (and the PatchSet patches
// they include), their readiness checks' and connection details' field
// paths.
func validateSchemas(comp *v1.Composition, crds map[schema.GroupKind]*extv1.CustomResourceDefinition) field.ErrorList {
	xrGVK := comp.Spec.CompositeTypeRef.GroupVersionKind()
	xr := schemaOf(crds[xrGVK.GroupKind()], xrGVK.Version)
	sets := map[string]int{}
	for i, s := range comp.Spec.PatchSets {
		sets[s.Name] = i
	}
	var errs field.ErrorList
	for i := range comp.Spec.Resources {
		t := &comp.Spec.Resources[i]
		gvk, ok := baseGVK(t)
		if !ok {
			continue
		}
		cd := schemaOf(crds[gvk.GroupKind()], gvk.Version)
		if xr == nil || cd == nil {
			continue
		}
		s := schemas{composite: xr, composed: cd}
		rp := field.NewPath("spec", "resources").Index(i)
		for j, p := range t.Patches {
			if p.GetType() != v1.PatchTypePatchSet {
				if err := validatePatch(p, s, rp.Child("patches").Index(j)); err != nil {
					errs = append(errs, err)
				}
				continue
			}
			k, ok := sets[*p.PatchSetName]
			if !ok {
				continue
			}
			for l, sp := range comp.Spec.PatchSets[k].Patches {
				if err := validatePatch(sp, s, field.NewPath("spec", "patchSets").Index(k).Child("patches").Index(l)); err != nil {
					errs = append(errs, err)
				}
			}
		}
		for j, c := range t.ReadinessChecks {
			if err := validateReadinessCheck(c, cd, rp.Child("readinessChecks").Index(j)); err != nil {
				errs = append(errs, err)
			}
		}
		for j, c := range t.ConnectionDetails {
			if c.FromFieldPath == nil {
				continue
			}
			if _, err := fieldType(cd, *c.FromFieldPath); err != nil {
				errs = append(errs, field.Invalid(rp.Child("connectionDetails").Index(j).Child("fromFieldPath"), *c.FromFieldPath, err.Error()))
			}
		}
	}
	return errs
}

// validateReadinessCheck checks a readiness check's field path against the
// composed resource's schema, and that the field has the type the check
// matches.
func validateReadinessCheck(c v1.ReadinessCheck, s *extv1.JSONSchemaProps, path *field.Path) *field.Error {
	if c.FieldPath == "" {
		return nil
	}
	got, err := fieldType(s, c.FieldPath)
	if err != nil {
		return field.Invalid(path.Child("fieldPath"), c.FieldPath, err.Error())
	}
	want := ""
	switch c.Type { //nolint:exhaustive // The others match any type.
	case v1.ReadinessCheckTypeMatchString:
		want = "string"
	case v1.ReadinessCheckTypeMatchInteger:
		want = "integer"
	case v1.ReadinessCheckTypeMatchTrue, v1.ReadinessCheckTypeMatchFalse:
		want = "boolean"
	}
	if got != "" && want != "" && got != want {
		return field.Invalid(path.Child("fieldPath"), c.FieldPath, fmt.Sprintf("is of type %s according to the schema; readiness check %s wants %s", got, c.Type, want))
	}
	return nil
}
