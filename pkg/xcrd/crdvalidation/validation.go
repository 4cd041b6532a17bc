// Package crdvalidation checks CustomResourceDefinitions, and custom resources
// against them, offline and the way the API server does: CRD validation on
// create, then for objects pruning of unknown fields, defaulting, OpenAPI
// schema validation, list-map and list-set invariants, embedded object
// metadata, and CEL rules (x-kubernetes-validations, including transition
// rules against an old object).
//
// It lets tests prove that generated CRDs load and that manifests fit them
// without a running API server, and lets tools such as loomctl reject an
// invalid composite resource with the field path and cause before rendering.
package crdvalidation

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// CRD validates a CRD as the API server does when it is created: defaults
// are applied to a copy first, as they would be on the way in. It returns
// the API server's field errors, nil if the CRD is valid.
func CRD(ctx context.Context, crd *extv1.CustomResourceDefinition) (field.ErrorList, error) {
	in, err := internal(crd)
	if err != nil {
		return nil, err
	}
	return crdvalidation.ValidateCustomResourceDefinition(ctx, in), nil
}

// internal defaults a copy of the CRD and converts it to the internal version
// the API server validates, with the stored versions it records on create.
func internal(crd *extv1.CustomResourceDefinition) (*apiextensions.CustomResourceDefinition, error) {
	c := crd.DeepCopy()
	extv1.SetObjectDefaults_CustomResourceDefinition(c)
	c.Status.StoredVersions = nil
	for _, v := range c.Spec.Versions {
		if v.Storage {
			c.Status.StoredVersions = append(c.Status.StoredVersions, v.Name)
		}
	}
	out := &apiextensions.CustomResourceDefinition{}
	if err := extv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(c, out, nil); err != nil {
		return nil, fmt.Errorf("cannot convert CustomResourceDefinition %q: %w", crd.GetName(), err)
	}
	return out, nil
}

// A Validator validates custom resources of one version of a CRD. It is safe
// for concurrent use.
type Validator struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// NewValidator returns a Validator for the supplied version of the CRD. The
// CRD must have a structural schema for that version (every valid CRD has).
func NewValidator(crd *extv1.CustomResourceDefinition, version string) (*Validator, error) {
	in, err := internal(crd)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(in.Spec.Versions, func(v apiextensions.CustomResourceDefinitionVersion) bool { return v.Name == version })
	if i < 0 {
		return nil, fmt.Errorf("cannot validate against CustomResourceDefinition %q: no version %q", crd.GetName(), version)
	}
	s := in.Spec.Validation
	if v := in.Spec.Versions[i].Schema; v != nil {
		s = v
	}
	if s == nil || s.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("cannot validate against CustomResourceDefinition %q version %q: no schema", crd.GetName(), version)
	}
	st, err := structuralschema.NewStructural(s.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("cannot build structural schema of CustomResourceDefinition %q version %q: %w", crd.GetName(), version, err)
	}
	sv, _, err := apiservervalidation.NewSchemaValidator(s.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("cannot build schema validator of CustomResourceDefinition %q version %q: %w", crd.GetName(), version, err)
	}
	return &Validator{structural: st, schema: sv, cel: cel.NewValidator(st, true, celconfig.PerCallLimit)}, nil
}

// A Result is what the API server would make of an object.
type Result struct {
	// Object is the object as the API server would store it: unknown fields
	// pruned, defaults applied.
	Object map[string]any

	// Pruned are the paths of the fields the schema does not know, which the
	// API server would drop silently (or reject under strict field
	// validation), sorted.
	Pruned []string

	// Errs are the validation errors, schema and CEL rules.
	Errs field.ErrorList
}

// Validate processes a copy of obj as the API server does on create (old is
// nil) or update (old is the stored object, for transition rules): prune,
// default, validate against the schema, the metadata of embedded resources
// and the invariants of list-sets and list-maps, then evaluate CEL rules
// unless an earlier error makes them meaningless.
func (v *Validator) Validate(ctx context.Context, obj, old map[string]any) Result {
	o := runtime.DeepCopyJSON(obj)
	r := Result{Object: o}
	r.Pruned = pruning.PruneWithOptions(o, v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	defaulting.Default(o, v.structural)

	var oldObj map[string]any
	if old != nil {
		oldObj = runtime.DeepCopyJSON(old)
		pruning.Prune(oldObj, v.structural, true)
		defaulting.Default(oldObj, v.structural)
	}

	r.Errs = apiservervalidation.ValidateCustomResource(nil, o, v.schema)
	r.Errs = append(r.Errs, objectmeta.Validate(nil, o, v.structural, false)...)
	// As on update, list invariants broken already in the old object are
	// not the new object's fault.
	if oldObj == nil || len(listtype.ValidateListSetsAndMaps(nil, v.structural, oldObj)) == 0 {
		r.Errs = append(r.Errs, listtype.ValidateListSetsAndMaps(nil, v.structural, o)...)
	}
	if v.cel == nil {
		return r
	}
	if blocking(r.Errs) {
		r.Errs = append(r.Errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
		return r
	}
	var oo any
	if oldObj != nil {
		oo = oldObj
	}
	errs, _ := v.cel.Validate(ctx, nil, v.structural, o, oo, celconfig.RuntimeCELCostBudget)
	r.Errs = append(r.Errs, errs...)
	return r
}

// blocking reports whether errs stop the API server from evaluating CEL
// rules: the rules could not make sense of the object.
func blocking(errs field.ErrorList) bool {
	for _, e := range errs {
		switch e.Type { //nolint:exhaustive // Only these types block; the others are reported as warnings.
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}
