package xcrd

import (
	"errors"
	"fmt"
	"strings"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

// An InvalidError says why an XRD cannot be turned into CRDs. Each entry of
// Errs names the offending field by its path in the XRD (for example
// spec.versions[1].referenceable) and says what is wrong with it; the
// message lists them all, sorted by path, so it is deterministic.
type InvalidError struct {
	// Name of the XRD.
	Name string

	// Errs are the problems found, one per field.
	Errs field.ErrorList
}

// Error implements error.
func (e *InvalidError) Error() string {
	msgs := make([]string, 0, len(e.Errs))
	for _, fe := range e.Errs {
		msgs = append(msgs, fe.Error())
	}
	return fmt.Sprintf("invalid CompositeResourceDefinition %q: %s", e.Name, strings.Join(msgs, "; "))
}

// IsInvalid reports whether err is or wraps an *InvalidError.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

// Validate checks that the XRD can be turned into CRDs: its name is
// <names.plural>.<group>; it has names, a group and a known scope; exactly one
// version is referenceable and served, version names are unique; each
// version's schema parses and is an object whose spec and status are objects;
// claim names, if any, are complete, allowed by the scope, and do not collide
// with the composite resource's names; the default policies are known; a
// service account reference names both namespace and name. It
// returns nil or an *InvalidError listing every problem with its field path.
func Validate(xrd *v1.CompositeResourceDefinition) error {
	_, err := validate(xrd)
	return err
}

// validate is Validate that also returns the parsed schema of each version.
func validate(xrd *v1.CompositeResourceDefinition) ([]*extv1.JSONSchemaProps, error) {
	var errs field.ErrorList
	spec := field.NewPath("spec")

	if xrd.Spec.Group == "" {
		errs = append(errs, field.Required(spec.Child("group"), ""))
	}
	names := spec.Child("names")
	if xrd.Spec.Names.Kind == "" {
		errs = append(errs, field.Required(names.Child("kind"), ""))
	}
	if xrd.Spec.Names.Plural == "" {
		errs = append(errs, field.Required(names.Child("plural"), ""))
	}
	if want := xrd.Spec.Names.Plural + "." + xrd.Spec.Group; xrd.Spec.Group != "" && xrd.Spec.Names.Plural != "" && xrd.GetName() != want {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), xrd.GetName(),
			fmt.Sprintf("must be spec.names.plural.spec.group (%q)", want)))
	}

	switch xrd.Spec.Scope {
	case "", v1.CompositeResourceScopeLegacyCluster, v1.CompositeResourceScopeNamespaced, v1.CompositeResourceScopeCluster:
	default:
		errs = append(errs, field.NotSupported(spec.Child("scope"), xrd.Spec.Scope, []string{
			string(v1.CompositeResourceScopeLegacyCluster), string(v1.CompositeResourceScopeNamespaced), string(v1.CompositeResourceScopeCluster),
		}))
	}
	if p := xrd.Spec.DefaultCompositionUpdatePolicy; p != nil && *p != v1.UpdateAutomatic && *p != v1.UpdateManual {
		errs = append(errs, field.NotSupported(spec.Child("defaultCompositionUpdatePolicy"), *p, []string{string(v1.UpdateAutomatic), string(v1.UpdateManual)}))
	}
	if p := xrd.Spec.DefaultCompositeDeletePolicy; p != nil && *p != v1.CompositeDeleteBackground && *p != v1.CompositeDeleteForeground {
		errs = append(errs, field.NotSupported(spec.Child("defaultCompositeDeletePolicy"), *p, []string{string(v1.CompositeDeleteBackground), string(v1.CompositeDeleteForeground)}))
	}

	if sa := xrd.Spec.ServiceAccountRef; sa != nil {
		if sa.Namespace == "" {
			errs = append(errs, field.Required(spec.Child("serviceAccountRef", "namespace"), ""))
		}
		if sa.Name == "" {
			errs = append(errs, field.Required(spec.Child("serviceAccountRef", "name"), ""))
		}
	}

	errs = append(errs, validateClaimNames(xrd)...)

	schemas, verrs := validateVersions(xrd)
	errs = append(errs, verrs...)

	if len(errs) > 0 {
		return nil, &InvalidError{Name: xrd.GetName(), Errs: errs}
	}
	return schemas, nil
}

func validateClaimNames(xrd *v1.CompositeResourceDefinition) field.ErrorList {
	cn := xrd.Spec.ClaimNames
	if cn == nil {
		return nil
	}
	var errs field.ErrorList
	p := field.NewPath("spec", "claimNames")
	if !xrd.GetScope().Legacy() {
		return append(errs, field.Forbidden(p, fmt.Sprintf("claims are only offered when scope is LegacyCluster, not %s", xrd.GetScope())))
	}
	if cn.Kind == "" {
		errs = append(errs, field.Required(p.Child("kind"), ""))
	}
	if cn.Plural == "" {
		errs = append(errs, field.Required(p.Child("plural"), ""))
	}
	n := xrd.Spec.Names
	collides := func(child, claim string, xr ...string) {
		for _, x := range xr {
			if claim != "" && claim == x {
				errs = append(errs, field.Invalid(p.Child(child), claim, "conflicts with a name of the composite resource (spec.names)"))
				return
			}
		}
	}
	// Kinds and resource names share no namespace in the API server, but a
	// claim named like its composite resource is ambiguous to users and to
	// Crossplane, which refuses it; so does Loom.
	collides("kind", cn.Kind, n.Kind, n.ListKind)
	collides("plural", cn.Plural, n.Plural, n.Singular)
	collides("singular", cn.Singular, n.Plural, n.Singular)
	collides("listKind", cn.ListKind, n.Kind, n.ListKind)
	return errs
}

func validateVersions(xrd *v1.CompositeResourceDefinition) ([]*extv1.JSONSchemaProps, field.ErrorList) {
	var errs field.ErrorList
	p := field.NewPath("spec", "versions")
	if len(xrd.Spec.Versions) == 0 {
		return nil, append(errs, field.Required(p, "at least one version is required"))
	}

	schemas := make([]*extv1.JSONSchemaProps, len(xrd.Spec.Versions))
	seen := map[string]bool{}
	var referenceable []string
	for i, vr := range xrd.Spec.Versions {
		vp := p.Index(i)
		switch {
		case vr.Name == "":
			errs = append(errs, field.Required(vp.Child("name"), ""))
		case seen[vr.Name]:
			errs = append(errs, field.Duplicate(vp.Child("name"), vr.Name))
		}
		seen[vr.Name] = true
		if vr.Referenceable {
			referenceable = append(referenceable, vr.Name)
			if !vr.Served {
				errs = append(errs, field.Invalid(vp.Child("served"), vr.Served, "the referenceable version must be served"))
			}
		}

		sp := vp.Child("schema", "openAPIV3Schema")
		s, err := parseSchema(vr.Schema)
		if err != nil {
			errs = append(errs, field.Invalid(sp, truncate(string(vr.Schema.OpenAPIV3Schema.Raw)), err.Error()))
			continue
		}
		schemas[i] = s
		if s.Type != "" && s.Type != "object" {
			errs = append(errs, field.Invalid(sp.Child("type"), s.Type, "must be object"))
		}
		for _, f := range []string{"spec", "status"} {
			if t := s.Properties[f].Type; t != "" && t != "object" {
				errs = append(errs, field.Invalid(sp.Child("properties", f, "type"), t, "must be object"))
			}
		}
	}
	switch len(referenceable) {
	case 1:
	case 0:
		errs = append(errs, field.Required(p, "exactly one version must be referenceable, found none"))
	default:
		errs = append(errs, field.Invalid(p, strings.Join(referenceable, ", "),
			fmt.Sprintf("exactly one version must be referenceable, found %d", len(referenceable))))
	}
	return schemas, errs
}

// truncate keeps error messages of garbage schemas short.
func truncate(s string) string {
	const limit = 80
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}
