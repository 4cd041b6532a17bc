package xcrd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

// Fixtures. Expected schemas below are written out literally rather than
// built with this package's functions, so that a change to what Loom injects
// fails these tests.

const (
	group  = "example.org"
	kind   = "XDatabase"
	plural = "xdatabases"
	uid    = types.UID("f2b0a3e4-0000-4000-8000-000000000001")
)

type xrdOption func(*v1.CompositeResourceDefinition)

func newXRD(opts ...xrdOption) *v1.CompositeResourceDefinition {
	x := &v1.CompositeResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group, UID: uid},
		Spec: v1.CompositeResourceDefinitionSpec{
			Group: group,
			Names: extv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: "xdatabase"},
			Versions: []v1.CompositeResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Referenceable: true,
				Schema: &v1.CompositeResourceValidation{OpenAPIV3Schema: runtime.RawExtension{Raw: []byte(`{}`)}},
			}},
		},
	}
	for _, o := range opts {
		o(x)
	}
	return x
}

func withClaimNames() xrdOption {
	return func(x *v1.CompositeResourceDefinition) {
		x.Spec.ClaimNames = &extv1.CustomResourceDefinitionNames{Kind: "Database", ListKind: "DatabaseList", Plural: "databases", Singular: "database"}
	}
}

func withScope(s v1.CompositeResourceScope) xrdOption {
	return func(x *v1.CompositeResourceDefinition) { x.Spec.Scope = s }
}

func withSchema(s string) xrdOption {
	return func(x *v1.CompositeResourceDefinition) {
		x.Spec.Versions[0].Schema = &v1.CompositeResourceValidation{OpenAPIV3Schema: runtime.RawExtension{Raw: []byte(s)}}
	}
}

func str(t string) extv1.JSONSchemaProps { return extv1.JSONSchemaProps{Type: t} }

func js(raw string) *extv1.JSON { return &extv1.JSON{Raw: []byte(raw)} }

func enumOf(vals ...string) []extv1.JSON {
	out := make([]extv1.JSON, 0, len(vals))
	for _, v := range vals {
		out = append(out, extv1.JSON{Raw: []byte(`"` + v + `"`)})
	}
	return out
}

func wantOwner() []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: "apiextensions.crossplane.io/v1", Kind: "CompositeResourceDefinition",
		Name: plural + "." + group, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
}

func wantMatchLabels() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{
		Type: "object", Required: []string{"matchLabels"},
		Properties: map[string]extv1.JSONSchemaProps{"matchLabels": {
			Type: "object", AdditionalProperties: &extv1.JSONSchemaPropsOrBool{Allows: true, Schema: &extv1.JSONSchemaProps{Type: "string"}},
		}},
	}
}

func wantNameRef() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{Type: "object", Required: []string{"name"}, Properties: map[string]extv1.JSONSchemaProps{"name": str("string")}}
}

func wantStringMap() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{Type: "object", AdditionalProperties: &extv1.JSONSchemaPropsOrBool{Allows: true, Schema: &extv1.JSONSchemaProps{Type: "string"}}}
}

func wantPublishConnectionDetailsTo() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{
		Type: "object", Required: []string{"name"},
		Properties: map[string]extv1.JSONSchemaProps{
			"name":      str("string"),
			"configRef": {Type: "object", Default: js(`{"name":"default"}`), Properties: map[string]extv1.JSONSchemaProps{"name": str("string")}},
			"metadata": {Type: "object", Properties: map[string]extv1.JSONSchemaProps{
				"labels": wantStringMap(), "annotations": wantStringMap(), "type": str("string"),
			}},
		},
	}
}

func wantReclaimPolicy() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{
		Type: "string", Enum: enumOf("Delete", "Retain"),
		Description: "ReclaimPolicy says what happens to the composite resource when its claim is deleted: " +
			"Delete (the default when unset) deletes it; Retain releases it, keeping it and its composed resources, " +
			"so that another claim may bind it. A Loom addition; Crossplane ignores it.",
	}
}

func wantConditions() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{
		Description: "Conditions of the resource.", Type: "array",
		XListType: ptr.To("map"), XListMapKeys: []string{"type"},
		Items: &extv1.JSONSchemaPropsOrArray{Schema: &extv1.JSONSchemaProps{
			Type:     "object",
			Required: []string{"lastTransitionTime", "reason", "status", "type"},
			Properties: map[string]extv1.JSONSchemaProps{
				"lastTransitionTime": {Type: "string", Format: "date-time"},
				"message":            str("string"),
				"observedGeneration": {Type: "integer", Format: "int64"},
				"reason":             str("string"),
				"status":             str("string"),
				"type":               str("string"),
			},
		}},
	}
}

func wantConnectionDetails() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{Type: "object", Properties: map[string]extv1.JSONSchemaProps{"lastPublishedTime": {Type: "string", Format: "date-time"}}}
}

func wantLoomStatus() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{
		Type:        "object",
		Description: "Loom's summary of the composed resources, so a user sees at a glance which one holds the composite resource back. Crossplane ignores it.",
		Properties: map[string]extv1.JSONSchemaProps{
			"resources": {
				Type: "array", XListType: ptr.To("atomic"), MaxItems: ptr.To(int64(100)),
				Items: &extv1.JSONSchemaPropsOrArray{Schema: &extv1.JSONSchemaProps{
					Type:     "object",
					Required: []string{"resourceName", "apiVersion", "kind", "ready"},
					Properties: map[string]extv1.JSONSchemaProps{
						"resourceName": str("string"), "apiVersion": str("string"), "kind": str("string"),
						"name": str("string"), "namespace": str("string"),
						"ready":   {Type: "string", Enum: enumOf("True", "False", "Unknown")},
						"reason":  str("string"),
						"message": {Type: "string", MaxLength: ptr.To(int64(512))},
					},
				}},
			},
			"omittedResources": {Type: "integer", Format: "int64"},
		},
	}
}

func wantWatchedResourceRefs() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{
		Type:        "array",
		Description: "Resources composition functions asked Loom to watch; a change to one re-renders the composite resource. Crossplane ignores it.",
		XListType:   ptr.To("atomic"),
		Items: &extv1.JSONSchemaPropsOrArray{Schema: &extv1.JSONSchemaProps{
			Type:     "object",
			Required: []string{"apiVersion", "kind", "name"},
			Properties: map[string]extv1.JSONSchemaProps{
				"apiVersion": str("string"), "kind": str("string"), "name": str("string"),
				"namespace": str("string"), "step": str("string"),
			},
		}},
	}
}

func wantResourceRefs(namespace bool) extv1.JSONSchemaProps {
	p := map[string]extv1.JSONSchemaProps{"apiVersion": str("string"), "kind": str("string"), "name": str("string")}
	if namespace {
		p["namespace"] = str("string")
	}
	return extv1.JSONSchemaProps{
		Type: "array", XListType: ptr.To("atomic"),
		Items: &extv1.JSONSchemaPropsOrArray{Schema: &extv1.JSONSchemaProps{Type: "object", Required: []string{"apiVersion", "kind"}, Properties: p}},
	}
}

// wantLegacyXRSchema is the schema of a LegacyCluster composite resource
// whose XRD has the empty schema: what Crossplane v1.20 injects (as its
// conformance suite expects), plus Loom's optional fields.
func wantLegacyXRSchema() *extv1.JSONSchemaProps {
	return &extv1.JSONSchemaProps{
		Type:     "object",
		Required: []string{"spec"},
		Properties: map[string]extv1.JSONSchemaProps{
			"apiVersion": str("string"),
			"kind":       str("string"),
			"metadata":   {Type: "object", Properties: map[string]extv1.JSONSchemaProps{"name": {Type: "string", MaxLength: ptr.To(int64(63))}}},
			"spec": {
				Type: "object",
				Properties: map[string]extv1.JSONSchemaProps{
					"compositionRef":              wantNameRef(),
					"compositionSelector":         wantMatchLabels(),
					"compositionRevisionRef":      wantNameRef(),
					"compositionRevisionSelector": wantMatchLabels(),
					"compositionUpdatePolicy":     {Type: "string", Enum: enumOf("Automatic", "Manual"), Default: js(`"Automatic"`)},
					"claimRef": {
						Type: "object", Required: []string{"apiVersion", "kind", "namespace", "name"},
						Properties: map[string]extv1.JSONSchemaProps{"apiVersion": str("string"), "kind": str("string"), "namespace": str("string"), "name": str("string")},
					},
					"resourceRefs": wantResourceRefs(true),
					"writeConnectionSecretToRef": {
						Type: "object", Required: []string{"name", "namespace"},
						Properties: map[string]extv1.JSONSchemaProps{"name": str("string"), "namespace": str("string")},
					},
					"publishConnectionDetailsTo": wantPublishConnectionDetailsTo(),
					"reclaimPolicy":              wantReclaimPolicy(),
					"environmentConfigRefs": {
						Type: "array", XListType: ptr.To("atomic"),
						Items: &extv1.JSONSchemaPropsOrArray{Schema: &extv1.JSONSchemaProps{
							Type: "object", Required: []string{"apiVersion", "kind"},
							Properties: map[string]extv1.JSONSchemaProps{"apiVersion": str("string"), "kind": str("string"), "name": str("string")},
						}},
					},
				},
			},
			"status": {
				Type: "object",
				Properties: map[string]extv1.JSONSchemaProps{
					"conditions":          wantConditions(),
					"connectionDetails":   wantConnectionDetails(),
					"claimConditionTypes": {Type: "array", XListType: ptr.To("set"), Items: &extv1.JSONSchemaPropsOrArray{Schema: &extv1.JSONSchemaProps{Type: "string"}}},
					"loom":                wantLoomStatus(),
					"watchedResourceRefs": wantWatchedResourceRefs(),
				},
			},
		},
	}
}

func wantXRColumns(prefix string) []extv1.CustomResourceColumnDefinition {
	return []extv1.CustomResourceColumnDefinition{
		{Name: "SYNCED", Type: "string", JSONPath: ".status.conditions[?(@.type=='Synced')].status"},
		{Name: "READY", Type: "string", JSONPath: ".status.conditions[?(@.type=='Ready')].status"},
		{Name: "COMPOSITION", Type: "string", JSONPath: prefix + ".compositionRef.name"},
		{Name: "COMPOSITIONREVISION", Type: "string", JSONPath: prefix + ".compositionRevisionRef.name", Priority: 1},
		{Name: "AGE", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	}
}

func wantLegacyXRCRD() *extv1.CustomResourceDefinition {
	return &extv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group, OwnerReferences: wantOwner()},
		Spec: extv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: extv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: "xdatabase", Categories: []string{"composite"}},
			Scope: extv1.ClusterScoped,
			Versions: []extv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema:                   &extv1.CustomResourceValidation{OpenAPIV3Schema: wantLegacyXRSchema()},
				Subresources:             &extv1.CustomResourceSubresources{Status: &extv1.CustomResourceSubresourceStatus{}},
				AdditionalPrinterColumns: wantXRColumns(".spec"),
			}},
		},
	}
}

func wantClaimCRD() *extv1.CustomResourceDefinition {
	return &extv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "databases." + group, OwnerReferences: wantOwner()},
		Spec: extv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: extv1.CustomResourceDefinitionNames{Kind: "Database", ListKind: "DatabaseList", Plural: "databases", Singular: "database", Categories: []string{"claim"}},
			Scope: extv1.NamespaceScoped,
			Versions: []extv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &extv1.CustomResourceValidation{OpenAPIV3Schema: &extv1.JSONSchemaProps{
					Type:     "object",
					Required: []string{"spec"},
					Properties: map[string]extv1.JSONSchemaProps{
						"apiVersion": str("string"),
						"kind":       str("string"),
						"metadata":   {Type: "object", Properties: map[string]extv1.JSONSchemaProps{"name": {Type: "string", MaxLength: ptr.To(int64(63))}}},
						"spec": {
							Type: "object",
							Properties: map[string]extv1.JSONSchemaProps{
								"compositionRef":              wantNameRef(),
								"compositionSelector":         wantMatchLabels(),
								"compositionRevisionRef":      wantNameRef(),
								"compositionRevisionSelector": wantMatchLabels(),
								"compositionUpdatePolicy":     {Type: "string", Enum: enumOf("Automatic", "Manual")},
								"compositeDeletePolicy":       {Type: "string", Enum: enumOf("Background", "Foreground"), Default: js(`"Background"`)},
								"resourceRef": {
									Type: "object", Required: []string{"apiVersion", "kind", "name"},
									Properties: map[string]extv1.JSONSchemaProps{"apiVersion": str("string"), "kind": str("string"), "name": str("string")},
								},
								"writeConnectionSecretToRef": {Type: "object", Required: []string{"name"}, Properties: map[string]extv1.JSONSchemaProps{"name": str("string")}},
								"publishConnectionDetailsTo": wantPublishConnectionDetailsTo(),
								"reclaimPolicy":              wantReclaimPolicy(),
							},
						},
						"status": {
							Type: "object",
							Properties: map[string]extv1.JSONSchemaProps{
								"conditions":          wantConditions(),
								"connectionDetails":   wantConnectionDetails(),
								"claimConditionTypes": {Type: "array", XListType: ptr.To("set"), Items: &extv1.JSONSchemaPropsOrArray{Schema: &extv1.JSONSchemaProps{Type: "string"}}},
								"loom":                wantLoomStatus(),
							},
						},
					},
				}},
				Subresources: &extv1.CustomResourceSubresources{Status: &extv1.CustomResourceSubresourceStatus{}},
				AdditionalPrinterColumns: []extv1.CustomResourceColumnDefinition{
					{Name: "SYNCED", Type: "string", JSONPath: ".status.conditions[?(@.type=='Synced')].status"},
					{Name: "READY", Type: "string", JSONPath: ".status.conditions[?(@.type=='Ready')].status"},
					{Name: "CONNECTION-SECRET", Type: "string", JSONPath: ".spec.writeConnectionSecretToRef.name"},
					{Name: "AGE", Type: "date", JSONPath: ".metadata.creationTimestamp"},
				},
			}},
		},
	}
}

// wantModernXRCRD is the CRD of a Namespaced or Cluster composite resource
// whose XRD has the empty schema: machinery under spec.crossplane, no claim
// fields, as Crossplane v2 does for the v1 XRD API's modern scopes.
func wantModernXRCRD(scope extv1.ResourceScope) *extv1.CustomResourceDefinition {
	c := wantLegacyXRCRD()
	c.Spec.Scope = scope
	s := c.Spec.Versions[0].Schema.OpenAPIV3Schema
	s.Properties["spec"] = extv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]extv1.JSONSchemaProps{
			"crossplane": {
				Type:        "object",
				Description: "Configures how Crossplane will reconcile this composite resource",
				Properties: map[string]extv1.JSONSchemaProps{
					"compositionRef":              wantNameRef(),
					"compositionSelector":         wantMatchLabels(),
					"compositionRevisionRef":      wantNameRef(),
					"compositionRevisionSelector": wantMatchLabels(),
					"compositionUpdatePolicy":     {Type: "string", Enum: enumOf("Automatic", "Manual"), Default: js(`"Automatic"`)},
					"resourceRefs":                wantResourceRefs(scope == extv1.ClusterScoped),
				},
			},
		},
	}
	s.Properties["status"] = extv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]extv1.JSONSchemaProps{
			"conditions": wantConditions(),
			"crossplane": {
				Type:        "object",
				Description: "Indicates how Crossplane is reconciling this composite resource",
				Properties:  map[string]extv1.JSONSchemaProps{"connectionDetails": wantConnectionDetails()},
			},
			"loom":                wantLoomStatus(),
			"watchedResourceRefs": wantWatchedResourceRefs(),
		},
	}
	c.Spec.Versions[0].AdditionalPrinterColumns = wantXRColumns(".spec.crossplane")
	return c
}

func TestForCompositeResource(t *testing.T) {
	type want struct {
		crd *extv1.CustomResourceDefinition
		err error
	}
	cases := map[string]struct {
		reason string
		xrd    *v1.CompositeResourceDefinition
		want   want
	}{
		"LegacyEmptySchema": {
			reason: "A LegacyCluster XRD with the empty schema yields a cluster-scoped CRD with exactly the injected fields.",
			xrd:    newXRD(),
			want:   want{crd: wantLegacyXRCRD()},
		},
		"LegacyExplicitScope": {
			reason: "Scope LegacyCluster set explicitly is the same as unset.",
			xrd:    newXRD(withScope(v1.CompositeResourceScopeLegacyCluster), withClaimNames()),
			want:   want{crd: wantLegacyXRCRD()},
		},
		"NilSchema": {
			reason: "A version without a schema is treated as the empty schema.",
			xrd: newXRD(func(x *v1.CompositeResourceDefinition) {
				x.Spec.Versions[0].Schema = nil
			}),
			want: want{crd: wantLegacyXRCRD()},
		},
		"Namespaced": {
			reason: "A Namespaced XRD yields a namespaced CRD whose machinery sits under spec.crossplane, with no claim fields and no namespace in resourceRefs.",
			xrd:    newXRD(withScope(v1.CompositeResourceScopeNamespaced)),
			want:   want{crd: wantModernXRCRD(extv1.NamespaceScoped)},
		},
		"Cluster": {
			reason: "A Cluster XRD yields a cluster-scoped CRD whose machinery sits under spec.crossplane.",
			xrd:    newXRD(withScope(v1.CompositeResourceScopeCluster)),
			want:   want{crd: wantModernXRCRD(extv1.ClusterScoped)},
		},
		"DefaultUpdatePolicy": {
			reason: "The XRD's defaultCompositionUpdatePolicy becomes the default of compositionUpdatePolicy.",
			xrd: newXRD(func(x *v1.CompositeResourceDefinition) {
				x.Spec.DefaultCompositionUpdatePolicy = ptr.To(v1.UpdateManual)
			}),
			want: want{crd: func() *extv1.CustomResourceDefinition {
				c := wantLegacyXRCRD()
				p := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["compositionUpdatePolicy"]
				p.Default = js(`"Manual"`)
				c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["compositionUpdatePolicy"] = p
				return c
			}()},
		},
		"MetadataConversionAndCategories": {
			reason: "Labels merge (spec.metadata wins), annotations come from spec.metadata only, conversion is copied, categories get composite once.",
			xrd: newXRD(func(x *v1.CompositeResourceDefinition) {
				x.Labels = map[string]string{"a": "xrd", "b": "xrd"}
				x.Annotations = map[string]string{"not": "copied"}
				x.Spec.Metadata = &v1.CompositeResourceDefinitionSpecMetadata{
					Labels:      map[string]string{"b": "spec", "c": "spec"},
					Annotations: map[string]string{"d": "spec"},
				}
				x.Spec.Conversion = &extv1.CustomResourceConversion{Strategy: extv1.NoneConverter}
				x.Spec.Names.Categories = []string{"db", "composite"}
			}),
			want: want{crd: func() *extv1.CustomResourceDefinition {
				c := wantLegacyXRCRD()
				c.Labels = map[string]string{"a": "xrd", "b": "spec", "c": "spec"}
				c.Annotations = map[string]string{"d": "spec"}
				c.Spec.Conversion = &extv1.CustomResourceConversion{Strategy: extv1.NoneConverter}
				c.Spec.Names.Categories = []string{"db", "composite"}
				return c
			}()},
		},
		"Versions": {
			reason: "Each XRD version becomes a CRD version: served as given, storage when referenceable, deprecation and scale copied, user columns before Crossplane's.",
			xrd: newXRD(func(x *v1.CompositeResourceDefinition) {
				x.Spec.Versions[0].Referenceable = false
				x.Spec.Versions[0].Deprecated = ptr.To(true)
				x.Spec.Versions[0].DeprecationWarning = ptr.To("use v1")
				x.Spec.Versions = append(x.Spec.Versions, v1.CompositeResourceDefinitionVersion{
					Name: "v1", Served: true, Referenceable: true,
					Schema:                   &v1.CompositeResourceValidation{OpenAPIV3Schema: runtime.RawExtension{Raw: []byte(`{"type":"object"}`)}},
					AdditionalPrinterColumns: []extv1.CustomResourceColumnDefinition{{Name: "SIZE", Type: "string", JSONPath: ".spec.size"}},
					Subresources: &v1.CompositeResourceSubresources{Scale: &extv1.CustomResourceSubresourceScale{
						SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas",
					}},
				})
			}),
			want: want{crd: func() *extv1.CustomResourceDefinition {
				c := wantLegacyXRCRD()
				v0 := c.Spec.Versions[0]
				v0.Storage = false
				v0.Deprecated = true
				v0.DeprecationWarning = ptr.To("use v1")
				v1 := *wantLegacyXRCRD().Spec.Versions[0].DeepCopy()
				v1.Name = "v1"
				v1.AdditionalPrinterColumns = append([]extv1.CustomResourceColumnDefinition{{Name: "SIZE", Type: "string", JSONPath: ".spec.size"}}, v1.AdditionalPrinterColumns...)
				v1.Subresources.Scale = &extv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"}
				c.Spec.Versions = []extv1.CustomResourceDefinitionVersion{v0, v1}
				return c
			}()},
		},
		"InvalidName": {
			reason: "The XRD's name must be <plural>.<group>.",
			xrd:    newXRD(func(x *v1.CompositeResourceDefinition) { x.Name = "databases.example.org" }),
			want: want{err: &InvalidError{Name: "databases.example.org", Errs: field.ErrorList{
				field.Invalid(field.NewPath("metadata", "name"), "databases.example.org", `must be spec.names.plural.spec.group ("xdatabases.example.org")`),
			}}},
		},
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ForCompositeResource(tc.xrd)
			if diff := cmp.Diff(tc.want.err, err); diff != "" {
				t.Errorf("%s\nForCompositeResource(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.crd, got); diff != "" {
				t.Errorf("%s\nForCompositeResource(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestForCompositeResourceClaim(t *testing.T) {
	type want struct {
		crd *extv1.CustomResourceDefinition
		err error
	}
	cases := map[string]struct {
		reason string
		xrd    *v1.CompositeResourceDefinition
		want   want
	}{
		"Claim": {
			reason: "A LegacyCluster XRD with claimNames yields a namespaced claim CRD with the claim's injected fields.",
			xrd:    newXRD(withClaimNames()),
			want:   want{crd: wantClaimCRD()},
		},
		"DefaultDeletePolicy": {
			reason: "The XRD's defaultCompositeDeletePolicy becomes the default of compositeDeletePolicy.",
			xrd: newXRD(withClaimNames(), func(x *v1.CompositeResourceDefinition) {
				x.Spec.DefaultCompositeDeletePolicy = ptr.To(v1.CompositeDeleteForeground)
			}),
			want: want{crd: func() *extv1.CustomResourceDefinition {
				c := wantClaimCRD()
				spec := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
				p := spec.Properties["compositeDeletePolicy"]
				p.Default = js(`"Foreground"`)
				spec.Properties["compositeDeletePolicy"] = p
				return c
			}()},
		},
		"NoClaimNames": {
			reason: "An XRD without claimNames offers no claim.",
			xrd:    newXRD(),
			want: want{err: &InvalidError{Name: plural + "." + group, Errs: field.ErrorList{
				field.Required(field.NewPath("spec", "claimNames"), "the definition offers no claim"),
			}}},
		},
		"NamespacedOffersNoClaim": {
			reason: "Claims are not offered for Namespaced composite resources.",
			xrd:    newXRD(withClaimNames(), withScope(v1.CompositeResourceScopeNamespaced)),
			want: want{err: &InvalidError{Name: plural + "." + group, Errs: field.ErrorList{
				field.Forbidden(field.NewPath("spec", "claimNames"), "claims are only offered when scope is LegacyCluster, not Namespaced"),
			}}},
		},
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ForCompositeResourceClaim(tc.xrd)
			if diff := cmp.Diff(tc.want.err, err); diff != "" {
				t.Errorf("%s\nForCompositeResourceClaim(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.crd, got); diff != "" {
				t.Errorf("%s\nForCompositeResourceClaim(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSchemaMerge(t *testing.T) {
	user := `{
	  "type": "object",
	  "description": "A database.",
	  "properties": {
	    "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}}},
	    "spec": {
	      "type": "object",
	      "description": "Desired state.",
	      "required": ["size", "size"],
	      "x-kubernetes-preserve-unknown-fields": true,
	      "x-kubernetes-validations": [{"rule": "self.size != 'huge'", "message": "too big"}],
	      "oneOf": [{"required": ["size"]}],
	      "properties": {
	        "size": {"type": "string"},
	        "compositionRef": {"type": "string", "description": "a user field Crossplane overrides"}
	      }
	    },
	    "status": {
	      "type": "object",
	      "description": "Observed state.",
	      "required": ["address"],
	      "x-kubernetes-validations": [{"rule": "size(self.address) > 0"}],
	      "oneOf": [{"required": ["address"]}],
	      "properties": {"address": {"type": "string"}, "conditions": {"type": "string"}}
	    },
	    "extra": {"type": "string"}
	  }
	}`
	got, err := ForCompositeResource(newXRD(withSchema(user)))
	if err != nil {
		t.Fatalf("ForCompositeResource(...): %v", err)
	}

	want := wantLegacyXRSchema()
	want.Description = "A database."
	want.Properties["metadata"].Properties["name"] = extv1.JSONSchemaProps{Type: "string", MaxLength: ptr.To(int64(40))}
	spec := want.Properties["spec"]
	spec.Description = "Desired state."
	spec.Required = []string{"size"}
	spec.XPreserveUnknownFields = ptr.To(true)
	spec.XValidations = extv1.ValidationRules{{Rule: "self.size != 'huge'", Message: "too big"}}
	spec.OneOf = []extv1.JSONSchemaProps{{Required: []string{"size"}}}
	spec.Properties["size"] = str("string")
	want.Properties["spec"] = spec
	status := want.Properties["status"]
	status.Description = "Observed state."
	status.Required = []string{"address"}
	status.XValidations = extv1.ValidationRules{{Rule: "size(self.address) > 0"}}
	status.OneOf = []extv1.JSONSchemaProps{{Required: []string{"address"}}}
	status.Properties["address"] = str("string")
	want.Properties["status"] = status

	if diff := cmp.Diff(want, got.Spec.Versions[0].Schema.OpenAPIV3Schema); diff != "" {
		t.Errorf("The user's description, metadata.name maxLength, spec and status properties, required, rules and oneOf are merged; "+
			"injected fields override the user's; other top-level fields are dropped: -want, +got:\n%s", diff)
	}
}

func TestMaxNameLengthNotRaised(t *testing.T) {
	got, err := ForCompositeResource(newXRD(withSchema(`{"properties":{"metadata":{"properties":{"name":{"maxLength":100}}}}}`)))
	if err != nil {
		t.Fatalf("ForCompositeResource(...): %v", err)
	}
	want := extv1.JSONSchemaProps{Type: "string", MaxLength: ptr.To(int64(63))}
	if diff := cmp.Diff(want, got.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["metadata"].Properties["name"]); diff != "" {
		t.Errorf("A user maxLength above 63 is capped at 63: -want, +got:\n%s", diff)
	}
}

func TestSpecMachineryPath(t *testing.T) {
	cases := map[string]struct {
		reason string
		scope  v1.CompositeResourceScope
		want   string
	}{
		"Unset":         {reason: "The default scope is LegacyCluster.", scope: "", want: "spec"},
		"LegacyCluster": {reason: "Legacy machinery sits under spec.", scope: v1.CompositeResourceScopeLegacyCluster, want: "spec"},
		"Namespaced":    {reason: "Modern machinery sits under spec.crossplane.", scope: v1.CompositeResourceScopeNamespaced, want: "spec.crossplane"},
		"Cluster":       {reason: "Modern machinery sits under spec.crossplane.", scope: v1.CompositeResourceScopeCluster, want: "spec.crossplane"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, SpecMachineryPath(tc.scope)); diff != "" {
				t.Errorf("%s\nSpecMachineryPath(%q): -want, +got:\n%s", tc.reason, tc.scope, diff)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	xrd := newXRD(withClaimNames(), withSchema(`{"properties":{"spec":{"properties":{"a":{"type":"string"},"b":{"type":"string"}}}}}`))
	first, err := ForCompositeResource(xrd)
	if err != nil {
		t.Fatalf("ForCompositeResource(...): %v", err)
	}
	for range 20 {
		again, err := ForCompositeResource(xrd)
		if err != nil {
			t.Fatalf("ForCompositeResource(...): %v", err)
		}
		if diff := cmp.Diff(first, again); diff != "" {
			t.Fatalf("Generating twice from the same XRD must give the same CRD: -first, +again:\n%s", diff)
		}
	}
	// Generation must not alias the XRD: changing the CRD leaves the XRD alone.
	first.Spec.Names.Categories[0] = "changed"
	first.Spec.Versions[0].AdditionalPrinterColumns[0].Name = "changed"
	if diff := cmp.Diff(newXRD(withClaimNames(), withSchema(`{"properties":{"spec":{"properties":{"a":{"type":"string"},"b":{"type":"string"}}}}}`)), xrd); diff != "" {
		t.Errorf("ForCompositeResource must not modify or alias its input: -want, +got:\n%s", diff)
	}
}
