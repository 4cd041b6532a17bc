// Package xcrd generates the CustomResourceDefinitions of the composite
// resources and claims that a CompositeResourceDefinition (XRD) defines, as
// Crossplane v1.20 does: the user's schema of each version merged with the
// machinery fields Crossplane injects, printer columns, categories, names,
// conversion, metadata and a controller reference to the XRD. Loom adds its
// own optional fields (status.loom, status.watchedResourceRefs,
// spec.reclaimPolicy) and the Namespaced and Cluster scopes.
//
// Generation is pure: the same XRD always yields the same CRDs, so a caller
// can apply them with server-side apply on every reconcile at no cost.
package xcrd

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

// Categories of generated CRDs.
const (
	CategoryComposite = "composite"
	CategoryClaim     = "claim"
)

// MaxNameLength is the longest name of a composite resource or claim: their
// names become label values (crossplane.io/composite, crossplane.io/claim-name),
// which are at most 63 characters.
const MaxNameLength = 63

// ForCompositeResource returns the CRD of the composite resources the XRD
// defines. It validates the XRD first (see Validate) and returns its
// *InvalidError if it is invalid.
func ForCompositeResource(xrd *v1.CompositeResourceDefinition) (*extv1.CustomResourceDefinition, error) {
	schemas, err := validate(xrd)
	if err != nil {
		return nil, err
	}
	scope := xrd.GetScope()

	crd := &extv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{APIVersion: extv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"},
		Spec: extv1.CustomResourceDefinitionSpec{
			Group:      xrd.Spec.Group,
			Names:      *xrd.Spec.Names.DeepCopy(),
			Scope:      extv1.ClusterScoped,
			Versions:   make([]extv1.CustomResourceDefinitionVersion, len(xrd.Spec.Versions)),
			Conversion: xrd.Spec.Conversion.DeepCopy(),
		},
	}
	if scope == v1.CompositeResourceScopeNamespaced {
		crd.Spec.Scope = extv1.NamespaceScoped
	}
	crd.SetName(xrd.GetName())
	setMetadata(crd, xrd)
	crd.Spec.Names.Categories = withCategory(crd.Spec.Names.Categories, CategoryComposite)

	specProps := CompositeResourceSpecProps(scope, xrd.Spec.DefaultCompositionUpdatePolicy)
	statusProps := CompositeResourceStatusProps(scope)
	for i, vr := range xrd.Spec.Versions {
		crd.Spec.Versions[i] = version(vr, schemas[i], specProps, statusProps, CompositeResourcePrinterColumns(scope))
	}
	return crd, nil
}

// ForCompositeResourceClaim returns the CRD of the claims the XRD offers. It
// validates the XRD first (see Validate) and returns its *InvalidError if it
// is invalid, or if the XRD offers no claim.
func ForCompositeResourceClaim(xrd *v1.CompositeResourceDefinition) (*extv1.CustomResourceDefinition, error) {
	schemas, err := validate(xrd)
	if err != nil {
		return nil, err
	}
	if xrd.Spec.ClaimNames == nil {
		return nil, &InvalidError{Name: xrd.GetName(), Errs: field.ErrorList{
			field.Required(field.NewPath("spec", "claimNames"), "the definition offers no claim"),
		}}
	}

	crd := &extv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{APIVersion: extv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"},
		Spec: extv1.CustomResourceDefinitionSpec{
			Group:      xrd.Spec.Group,
			Names:      *xrd.Spec.ClaimNames.DeepCopy(),
			Scope:      extv1.NamespaceScoped,
			Versions:   make([]extv1.CustomResourceDefinitionVersion, len(xrd.Spec.Versions)),
			Conversion: xrd.Spec.Conversion.DeepCopy(),
		},
	}
	crd.SetName(ClaimCRDName(xrd))
	setMetadata(crd, xrd)
	crd.Spec.Names.Categories = withCategory(crd.Spec.Names.Categories, CategoryClaim)

	specProps := CompositeResourceClaimSpecProps(xrd.Spec.DefaultCompositeDeletePolicy)
	statusProps := CompositeResourceClaimStatusProps()
	for i, vr := range xrd.Spec.Versions {
		crd.Spec.Versions[i] = version(vr, schemas[i], specProps, statusProps, CompositeResourceClaimPrinterColumns())
	}
	return crd, nil
}

// ClaimCRDName returns the name of the claim CRD of the XRD,
// <claimNames.plural>.<group>, or "" if it names no claim.
func ClaimCRDName(xrd *v1.CompositeResourceDefinition) string {
	if xrd.Spec.ClaimNames == nil {
		return ""
	}
	return xrd.Spec.ClaimNames.Plural + "." + xrd.Spec.Group
}

// IsEstablished reports whether the API server serves the CRD with the
// supplied status.
func IsEstablished(s extv1.CustomResourceDefinitionStatus) bool {
	for _, c := range s.Conditions {
		if c.Type == extv1.Established {
			return c.Status == extv1.ConditionTrue
		}
	}
	return false
}

// version generates one CRD version from an XRD version and its parsed user
// schema, merging the supplied machinery properties over the user's.
func version(vr v1.CompositeResourceDefinitionVersion, user *extv1.JSONSchemaProps, specProps, statusProps map[string]extv1.JSONSchemaProps, cols []extv1.CustomResourceColumnDefinition) extv1.CustomResourceDefinitionVersion {
	crdv := extv1.CustomResourceDefinitionVersion{
		Name:               vr.Name,
		Served:             vr.Served,
		Storage:            vr.Referenceable,
		Deprecated:         ptr.Deref(vr.Deprecated, false),
		DeprecationWarning: vr.DeprecationWarning,
		Schema:             &extv1.CustomResourceValidation{OpenAPIV3Schema: mergeSchema(user, specProps, statusProps)},
		Subresources:       &extv1.CustomResourceSubresources{Status: &extv1.CustomResourceSubresourceStatus{}},
	}
	if vr.Subresources != nil && vr.Subresources.Scale != nil {
		crdv.Subresources.Scale = vr.Subresources.Scale.DeepCopy()
	}
	// The user's columns come first, then Crossplane's.
	for i := range vr.AdditionalPrinterColumns {
		crdv.AdditionalPrinterColumns = append(crdv.AdditionalPrinterColumns, *vr.AdditionalPrinterColumns[i].DeepCopy())
	}
	crdv.AdditionalPrinterColumns = append(crdv.AdditionalPrinterColumns, cols...)
	return crdv
}

// mergeSchema merges the user's schema into BaseProps as Crossplane does: the
// description; metadata.name's maxLength (at most MaxNameLength); spec's
// properties, required, x-kubernetes-validations, oneOf, description and
// x-kubernetes-preserve-unknown-fields; status's properties, required,
// x-kubernetes-validations, oneOf and description. Everything else the user
// wrote at those levels is dropped. Machinery properties override user
// properties of the same name.
func mergeSchema(user *extv1.JSONSchemaProps, specProps, statusProps map[string]extv1.JSONSchemaProps) *extv1.JSONSchemaProps {
	s := BaseProps()
	s.Description = user.Description

	maxLength := int64(MaxNameLength)
	if l := user.Properties["metadata"].Properties["name"].MaxLength; l != nil && *l < maxLength {
		maxLength = *l
	}
	meta := s.Properties["metadata"]
	meta.Properties = map[string]extv1.JSONSchemaProps{"name": {Type: "string", MaxLength: ptr.To(maxLength)}}
	s.Properties["metadata"] = meta

	uSpec := user.Properties["spec"]
	spec := s.Properties["spec"]
	spec.Description = uSpec.Description
	spec.Required = uniq(append(spec.Required, uSpec.Required...))
	spec.XValidations = append(spec.XValidations, uSpec.XValidations...)
	spec.OneOf = append(spec.OneOf, uSpec.OneOf...)
	spec.XPreserveUnknownFields = uSpec.XPreserveUnknownFields
	maps.Copy(spec.Properties, uSpec.Properties)
	maps.Copy(spec.Properties, specProps)
	s.Properties["spec"] = spec

	uStatus := user.Properties["status"]
	status := s.Properties["status"]
	status.Description = uStatus.Description
	status.Required = uniq(uStatus.Required)
	status.XValidations = uStatus.XValidations
	status.OneOf = uStatus.OneOf
	maps.Copy(status.Properties, uStatus.Properties)
	maps.Copy(status.Properties, statusProps)
	s.Properties["status"] = status

	return s
}

// setMetadata gives the CRD the XRD's labels merged with spec.metadata.labels
// (which win), spec.metadata.annotations (the XRD's own annotations are not
// copied), and a controller reference to the XRD.
func setMetadata(crd *extv1.CustomResourceDefinition, xrd *v1.CompositeResourceDefinition) {
	var labels map[string]string
	if len(xrd.GetLabels()) > 0 {
		labels = maps.Clone(xrd.GetLabels())
	}
	if m := xrd.Spec.Metadata; m != nil {
		if len(m.Labels) > 0 && labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, m.Labels)
		if len(m.Annotations) > 0 {
			crd.SetAnnotations(maps.Clone(m.Annotations))
		}
	}
	crd.SetLabels(labels)
	crd.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion:         v1.SchemeGroupVersion.String(),
		Kind:               v1.CompositeResourceDefinitionKind,
		Name:               xrd.GetName(),
		UID:                xrd.GetUID(),
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}})
}

func withCategory(cats []string, c string) []string {
	out := slices.Clone(cats)
	if !slices.Contains(out, c) {
		out = append(out, c)
	}
	return out
}

// uniq drops repeated strings, keeping the first of each.
func uniq(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// parseSchema decodes a version's openAPIV3Schema. A missing schema is the
// empty schema: the composite resource then has only the injected fields.
func parseSchema(v *v1.CompositeResourceValidation) (*extv1.JSONSchemaProps, error) {
	s := &extv1.JSONSchemaProps{}
	if v == nil || len(v.OpenAPIV3Schema.Raw) == 0 {
		return s, nil
	}
	if err := json.Unmarshal(v.OpenAPIV3Schema.Raw, s); err != nil {
		return nil, fmt.Errorf("cannot parse schema: %w", err)
	}
	return s, nil
}
