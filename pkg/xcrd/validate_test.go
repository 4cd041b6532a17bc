package xcrd

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

func TestValidate(t *testing.T) {
	name := plural + "." + group
	cases := map[string]struct {
		reason string
		xrd    *v1.CompositeResourceDefinition
		want   error
	}{
		"Valid": {
			reason: "A complete LegacyCluster XRD with claim names is valid.",
			xrd:    newXRD(withClaimNames()),
		},
		"ValidNamespaced": {
			reason: "A Namespaced XRD without claim names is valid.",
			xrd:    newXRD(withScope(v1.CompositeResourceScopeNamespaced)),
		},
		"MissingNames": {
			reason: "Group, kind and plural are required; without them the name cannot be checked.",
			xrd: newXRD(func(x *v1.CompositeResourceDefinition) {
				x.Spec.Group = ""
				x.Spec.Names = extv1.CustomResourceDefinitionNames{}
			}),
			want: &InvalidError{Name: name, Errs: field.ErrorList{
				field.Required(field.NewPath("spec", "group"), ""),
				field.Required(field.NewPath("spec", "names", "kind"), ""),
				field.Required(field.NewPath("spec", "names", "plural"), ""),
			}},
		},
		"UnknownScope": {
			reason: "Only the three scopes exist.",
			xrd:    newXRD(withScope("Galaxy")),
			want: &InvalidError{Name: name, Errs: field.ErrorList{
				field.NotSupported(field.NewPath("spec", "scope"), v1.CompositeResourceScope("Galaxy"), []string{"LegacyCluster", "Namespaced", "Cluster"}),
			}},
		},
		"UnknownPolicies": {
			reason: "Default policies must be known values.",
			xrd: newXRD(func(x *v1.CompositeResourceDefinition) {
				p := v1.UpdatePolicy("Sometimes")
				d := v1.CompositeDeletePolicy("Later")
				x.Spec.DefaultCompositionUpdatePolicy = &p
				x.Spec.DefaultCompositeDeletePolicy = &d
			}),
			want: &InvalidError{Name: name, Errs: field.ErrorList{
				field.NotSupported(field.NewPath("spec", "defaultCompositionUpdatePolicy"), v1.UpdatePolicy("Sometimes"), []string{"Automatic", "Manual"}),
				field.NotSupported(field.NewPath("spec", "defaultCompositeDeletePolicy"), v1.CompositeDeletePolicy("Later"), []string{"Background", "Foreground"}),
			}},
		},
		"IncompleteServiceAccountRef": {
			reason: "A service account reference needs a namespace and a name.",
			xrd: newXRD(func(x *v1.CompositeResourceDefinition) {
				x.Spec.ServiceAccountRef = &v1.ServiceAccountReference{}
			}),
			want: &InvalidError{Name: name, Errs: field.ErrorList{
				field.Required(field.NewPath("spec", "serviceAccountRef", "namespace"), ""),
				field.Required(field.NewPath("spec", "serviceAccountRef", "name"), ""),
			}},
		},
		"NoVersions": {
			reason: "At least one version is required.",
			xrd:    newXRD(func(x *v1.CompositeResourceDefinition) { x.Spec.Versions = nil }),
			want: &InvalidError{Name: name, Errs: field.ErrorList{
				field.Required(field.NewPath("spec", "versions"), "at least one version is required"),
			}},
		},
		"NoReferenceableVersion": {
			reason: "Exactly one version must be referenceable; none is an error naming spec.versions.",
			xrd:    newXRD(func(x *v1.CompositeResourceDefinition) { x.Spec.Versions[0].Referenceable = false }),
			want: &InvalidError{Name: name, Errs: field.ErrorList{
				field.Required(field.NewPath("spec", "versions"), "exactly one version must be referenceable, found none"),
			}},
		},
		"TwoReferenceableVersions": {
			reason: "Exactly one version must be referenceable; two is an error listing them.",
			xrd: newXRD(func(x *v1.CompositeResourceDefinition) {
				x.Spec.Versions = append(x.Spec.Versions, v1.CompositeResourceDefinitionVersion{Name: "v1", Served: true, Referenceable: true})
			}),
			want: &InvalidError{Name: name, Errs: field.ErrorList{
				field.Invalid(field.NewPath("spec", "versions"), "v1alpha1, v1", "exactly one version must be referenceable, found 2"),
			}},
		},
		"ReferenceableNotServed": {
			reason: "The referenceable version must be served.",
			xrd:    newXRD(func(x *v1.CompositeResourceDefinition) { x.Spec.Versions[0].Served = false }),
			want: &InvalidError{Name: name, Errs: field.ErrorList{
				field.Invalid(field.NewPath("spec", "versions").Index(0).Child("served"), false, "the referenceable version must be served"),
			}},
		},
		"DuplicateVersion": {
			reason: "Version names are unique.",
			xrd: newXRD(func(x *v1.CompositeResourceDefinition) {
				x.Spec.Versions = append(x.Spec.Versions, v1.CompositeResourceDefinitionVersion{Name: "v1alpha1", Served: true})
			}),
			want: &InvalidError{Name: name, Errs: field.ErrorList{
				field.Duplicate(field.NewPath("spec", "versions").Index(1).Child("name"), "v1alpha1"),
			}},
		},
		"SchemaNotObject": {
			reason: "A version's schema must be an object, and so must its spec and status.",
			xrd:    newXRD(withSchema(`{"type":"string","properties":{"spec":{"type":"array"},"status":{"type":"integer"}}}`)),
			want: &InvalidError{Name: name, Errs: field.ErrorList{
				field.Invalid(field.NewPath("spec", "versions").Index(0).Child("schema", "openAPIV3Schema", "type"), "string", "must be object"),
				field.Invalid(field.NewPath("spec", "versions").Index(0).Child("schema", "openAPIV3Schema", "properties", "spec", "type"), "array", "must be object"),
				field.Invalid(field.NewPath("spec", "versions").Index(0).Child("schema", "openAPIV3Schema", "properties", "status", "type"), "integer", "must be object"),
			}},
		},
		"SchemaUnparsable": {
			reason: "A schema that does not parse names the field and quotes the cause.",
			xrd:    newXRD(withSchema(`{"type":42}`)),
			want: &InvalidError{Name: name, Errs: field.ErrorList{
				field.Invalid(field.NewPath("spec", "versions").Index(0).Child("schema", "openAPIV3Schema"), `{"type":42}`,
					fmt.Sprintf("cannot parse schema: %v", parseErr(`{"type":42}`))),
			}},
		},
		"ClaimNamesCollide": {
			reason: "Claim names must not reuse the composite resource's names.",
			xrd: newXRD(func(x *v1.CompositeResourceDefinition) {
				x.Spec.ClaimNames = &extv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: "xdatabase"}
			}),
			want: &InvalidError{Name: name, Errs: field.ErrorList{
				field.Invalid(field.NewPath("spec", "claimNames", "kind"), kind, "conflicts with a name of the composite resource (spec.names)"),
				field.Invalid(field.NewPath("spec", "claimNames", "plural"), plural, "conflicts with a name of the composite resource (spec.names)"),
				field.Invalid(field.NewPath("spec", "claimNames", "singular"), "xdatabase", "conflicts with a name of the composite resource (spec.names)"),
				field.Invalid(field.NewPath("spec", "claimNames", "listKind"), kind+"List", "conflicts with a name of the composite resource (spec.names)"),
			}},
		},
		"ClaimNamesIncomplete": {
			reason: "Claim names need a kind and a plural.",
			xrd: newXRD(func(x *v1.CompositeResourceDefinition) {
				x.Spec.ClaimNames = &extv1.CustomResourceDefinitionNames{}
			}),
			want: &InvalidError{Name: name, Errs: field.ErrorList{
				field.Required(field.NewPath("spec", "claimNames", "kind"), ""),
				field.Required(field.NewPath("spec", "claimNames", "plural"), ""),
			}},
		},
		"ClaimsOnCluster": {
			reason: "Claims are not offered for Cluster composite resources.",
			xrd:    newXRD(withClaimNames(), withScope(v1.CompositeResourceScopeCluster)),
			want: &InvalidError{Name: name, Errs: field.ErrorList{
				field.Forbidden(field.NewPath("spec", "claimNames"), "claims are only offered when scope is LegacyCluster, not Cluster"),
			}},
		},
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := Validate(tc.xrd)
			if diff := cmp.Diff(tc.want, err); diff != "" {
				t.Errorf("%s\nValidate(...): -want, +got:\n%s", tc.reason, diff)
			}
			if got := IsInvalid(err); got != (tc.want != nil) {
				t.Errorf("%s\nIsInvalid(...): want %t, got %t", tc.reason, tc.want != nil, got)
			}
		})
	}
}

func parseErr(raw string) error {
	_, err := parseSchema(&v1.CompositeResourceValidation{OpenAPIV3Schema: runtime.RawExtension{Raw: []byte(raw)}})
	return errors.Unwrap(err)
}

func TestInvalidErrorMessage(t *testing.T) {
	err := Validate(newXRD(func(x *v1.CompositeResourceDefinition) {
		x.Name = "wrong"
		x.Spec.Versions[0].Referenceable = false
	}))
	want := `invalid CompositeResourceDefinition "wrong": metadata.name: Invalid value: "wrong": must be spec.names.plural.spec.group ("xdatabases.example.org"); ` +
		`spec.versions: Required value: exactly one version must be referenceable, found none`
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("The message names every field path and cause: -want, +got:\n%s", diff)
	}
	if !IsInvalid(fmt.Errorf("cannot generate CRD: %w", err)) {
		t.Errorf("IsInvalid must see through wrapping")
	}
}
