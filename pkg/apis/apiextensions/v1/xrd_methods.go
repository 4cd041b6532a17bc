package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CompositeResourceDefinitionKind is the kind of a CompositeResourceDefinition.
const CompositeResourceDefinitionKind = "CompositeResourceDefinition"

// CompositeResourceDefinitionGroupVersionKind is the GroupVersionKind of a
// CompositeResourceDefinition.
var CompositeResourceDefinitionGroupVersionKind = SchemeGroupVersion.WithKind(CompositeResourceDefinitionKind) //nolint:gochecknoglobals // Treated as a constant.

// Legacy reports whether composite resources of this scope use Crossplane v1's
// schema: cluster scoped, machinery fields directly under spec, claims allowed.
// The empty scope is LegacyCluster, the API's default.
func (s CompositeResourceScope) Legacy() bool {
	return s == "" || s == CompositeResourceScopeLegacyCluster
}

// GetScope returns the scope of the composite resources the definition
// defines, LegacyCluster when unset.
func (c *CompositeResourceDefinition) GetScope() CompositeResourceScope {
	if c.Spec.Scope == "" {
		return CompositeResourceScopeLegacyCluster
	}
	return c.Spec.Scope
}

// GetReferenceableVersion returns the name of the version marked referenceable,
// or "" if none is. A valid definition has exactly one.
func (c *CompositeResourceDefinition) GetReferenceableVersion() string {
	for _, v := range c.Spec.Versions {
		if v.Referenceable {
			return v.Name
		}
	}
	return ""
}

// GetCompositeGroupVersionKind returns the GroupVersionKind of the composite
// resource this definition defines, at its referenceable version.
func (c *CompositeResourceDefinition) GetCompositeGroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: c.Spec.Group, Version: c.GetReferenceableVersion(), Kind: c.Spec.Names.Kind}
}

// OffersClaim reports whether the definition offers a claim for the composite
// resource it defines: it names one and its scope allows claims.
func (c *CompositeResourceDefinition) OffersClaim() bool {
	return c.Spec.ClaimNames != nil && c.GetScope().Legacy()
}

// GetClaimGroupVersionKind returns the GroupVersionKind of the claim this
// definition defines, at its referenceable version, or the empty
// GroupVersionKind if it offers no claim.
func (c *CompositeResourceDefinition) GetClaimGroupVersionKind() schema.GroupVersionKind {
	if !c.OffersClaim() {
		return schema.GroupVersionKind{}
	}
	return schema.GroupVersionKind{Group: c.Spec.Group, Version: c.GetReferenceableVersion(), Kind: c.Spec.ClaimNames.Kind}
}

// GetConnectionSecretKeys returns the keys allowed in the composite resource's
// connection secret; empty means all keys.
func (c *CompositeResourceDefinition) GetConnectionSecretKeys() []string {
	return c.Spec.ConnectionSecretKeys
}
