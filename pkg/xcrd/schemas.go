package xcrd

import (
	"slices"
	"strconv"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	loomv1alpha1 "github.com/loomxr/loom/pkg/apis/loom/v1alpha1"
)

// Label and annotation keys Crossplane (and so Loom) sets on composite
// resources, claims and composed resources.
const (
	// LabelKeyNamePrefixForComposed is set on a composite resource and all its
	// composed resources to the name of the root composite resource.
	LabelKeyNamePrefixForComposed = "crossplane.io/composite"

	// LabelKeyClaimName and LabelKeyClaimNamespace are set on a claimed
	// composite resource and its composed resources to the claim's name and
	// namespace.
	LabelKeyClaimName      = "crossplane.io/claim-name"
	LabelKeyClaimNamespace = "crossplane.io/claim-namespace"

	// AnnotationKeyCompositionResourceName is set on a composed resource to
	// its name within the Composition (the template or desired resource name).
	AnnotationKeyCompositionResourceName = "crossplane.io/composition-resource-name"
)

// Names of the machinery fields Loom injects into composite resource and claim
// schemas. For LegacyCluster composite resources and for claims they sit
// directly under spec; for Namespaced and Cluster composite resources the
// composite spec fields sit under spec.crossplane (see SpecMachineryPath).
const (
	FieldCompositionRef              = "compositionRef"
	FieldCompositionSelector         = "compositionSelector"
	FieldCompositionRevisionRef      = "compositionRevisionRef"
	FieldCompositionRevisionSelector = "compositionRevisionSelector"
	FieldCompositionUpdatePolicy     = "compositionUpdatePolicy"
	FieldResourceRefs                = "resourceRefs"
	FieldClaimRef                    = "claimRef"
	FieldWriteConnectionSecretToRef  = "writeConnectionSecretToRef"
	FieldPublishConnectionDetailsTo  = "publishConnectionDetailsTo"
	FieldCompositeDeletePolicy       = "compositeDeletePolicy"
	FieldResourceRef                 = "resourceRef"

	// FieldEnvironmentConfigRefs records, on LegacyCluster composite
	// resources, the EnvironmentConfigs their Composition resolved (kept
	// under the resolve policy IfNotPresent).
	FieldEnvironmentConfigRefs = "environmentConfigRefs"

	// FieldCrossplane is the spec (and status) field under which Namespaced
	// and Cluster composite resources keep Crossplane's machinery.
	FieldCrossplane = "crossplane"

	FieldConditions          = "conditions"
	FieldConnectionDetails   = "connectionDetails"
	FieldClaimConditionTypes = "claimConditionTypes"

	// FieldReclaimPolicy is Loom's spec.reclaimPolicy of claims and
	// LegacyCluster composite resources (issue 12); see
	// loomv1alpha1.ReclaimPolicy.
	FieldReclaimPolicy = "reclaimPolicy"

	// FieldLoom is Loom's status.loom of composite resources and claims: the
	// per-composed-resource summary (loomv1alpha1.CompositeStatus).
	FieldLoom = "loom"

	// FieldWatchedResourceRefs is Loom's status.watchedResourceRefs of
	// composite resources: the resources functions asked to watch
	// ([]loomv1alpha1.WatchedResourceRef).
	FieldWatchedResourceRefs = "watchedResourceRefs"
)

// PropagateSpecProps are the claim spec machinery fields the binder copies
// from a claim to its composite resource (and back, as Crossplane does).
// compositionRevisionRef is propagated only under the Manual update policy.
var PropagateSpecProps = []string{ //nolint:gochecknoglobals // Treated as a constant; callers must not modify it.
	FieldCompositionRef, FieldCompositionSelector, FieldCompositionUpdatePolicy, FieldCompositionRevisionSelector,
}

// SpecMachineryPath returns the field path under which composite resources of
// the supplied scope keep Crossplane's spec machinery (compositionRef,
// resourceRefs, ...): "spec" for LegacyCluster, "spec.crossplane" for
// Namespaced and Cluster.
func SpecMachineryPath(s v1.CompositeResourceScope) string {
	if s.Legacy() {
		return "spec"
	}
	return "spec." + FieldCrossplane
}

// BaseProps returns the skeleton of every generated schema: an object with
// apiVersion, kind, metadata, and empty spec and status objects; spec is
// required.
func BaseProps() *extv1.JSONSchemaProps {
	return &extv1.JSONSchemaProps{
		Type:     "object",
		Required: []string{"spec"},
		Properties: map[string]extv1.JSONSchemaProps{
			"apiVersion": {Type: "string"},
			"kind":       {Type: "string"},
			"metadata":   {Type: "object"},
			"spec":       {Type: "object", Properties: map[string]extv1.JSONSchemaProps{}},
			"status":     {Type: "object", Properties: map[string]extv1.JSONSchemaProps{}},
		},
	}
}

func nameRef() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{
		Type:       "object",
		Required:   []string{"name"},
		Properties: map[string]extv1.JSONSchemaProps{"name": {Type: "string"}},
	}
}

func labelSelector() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{
		Type:     "object",
		Required: []string{"matchLabels"},
		Properties: map[string]extv1.JSONSchemaProps{
			"matchLabels": {
				Type: "object",
				AdditionalProperties: &extv1.JSONSchemaPropsOrBool{
					Allows: true,
					Schema: &extv1.JSONSchemaProps{Type: "string"},
				},
			},
		},
	}
}

func enum(def *string, values ...string) extv1.JSONSchemaProps {
	p := extv1.JSONSchemaProps{Type: "string"}
	for _, v := range values {
		p.Enum = append(p.Enum, extv1.JSON{Raw: []byte(strconv.Quote(v))})
	}
	if def != nil {
		p.Default = &extv1.JSON{Raw: []byte(strconv.Quote(*def))}
	}
	return p
}

func stringMap() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{
		Type: "object",
		AdditionalProperties: &extv1.JSONSchemaPropsOrBool{
			Allows: true,
			Schema: &extv1.JSONSchemaProps{Type: "string"},
		},
	}
}

// publishConnectionDetailsTo is Crossplane v1's alpha External Secret Stores
// field; Loom accepts it so that v1 manifests apply, and ignores it.
func publishConnectionDetailsTo() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{
		Type:     "object",
		Required: []string{"name"},
		Properties: map[string]extv1.JSONSchemaProps{
			"name": {Type: "string"},
			"configRef": {
				Type:       "object",
				Default:    &extv1.JSON{Raw: []byte(`{"name":"default"}`)},
				Properties: map[string]extv1.JSONSchemaProps{"name": {Type: "string"}},
			},
			"metadata": {
				Type: "object",
				Properties: map[string]extv1.JSONSchemaProps{
					"labels":      stringMap(),
					"annotations": stringMap(),
					"type":        {Type: "string"},
				},
			},
		},
	}
}

func reclaimPolicy() extv1.JSONSchemaProps {
	p := enum(nil, string(loomv1alpha1.ReclaimDelete), string(loomv1alpha1.ReclaimRetain))
	p.Description = "ReclaimPolicy says what happens to the composite resource when its claim is deleted: " +
		"Delete (the default when unset) deletes it; Retain releases it, keeping it and its composed resources, " +
		"so that another claim may bind it. A Loom addition; Crossplane ignores it."
	return p
}

// CompositeResourceSpecProps returns the spec machinery fields of composite
// resources of the supplied scope, keyed by field name. For LegacyCluster they
// sit directly under spec; for Namespaced and Cluster the result is a single
// "crossplane" field that holds them. compositionUpdatePolicy defaults to
// defaultPolicy (Automatic when nil, which is what the API server defaults
// an XRD's defaultCompositionUpdatePolicy to).
func CompositeResourceSpecProps(s v1.CompositeResourceScope, defaultPolicy *v1.UpdatePolicy) map[string]extv1.JSONSchemaProps {
	def := string(ptr.Deref(defaultPolicy, v1.UpdateAutomatic))

	ref := extv1.JSONSchemaProps{
		Type:     "object",
		Required: []string{"apiVersion", "kind"},
		Properties: map[string]extv1.JSONSchemaProps{
			"apiVersion": {Type: "string"},
			"kind":       {Type: "string"},
			"name":       {Type: "string"},
		},
	}
	// Namespaced composite resources compose only in their own namespace, so
	// their references carry none.
	if s != v1.CompositeResourceScopeNamespaced {
		ref.Properties["namespace"] = extv1.JSONSchemaProps{Type: "string"}
	}

	props := map[string]extv1.JSONSchemaProps{
		FieldCompositionRef:              nameRef(),
		FieldCompositionSelector:         labelSelector(),
		FieldCompositionRevisionRef:      nameRef(),
		FieldCompositionRevisionSelector: labelSelector(),
		FieldCompositionUpdatePolicy:     enum(&def, string(v1.UpdateAutomatic), string(v1.UpdateManual)),
		FieldResourceRefs: {
			Type:  "array",
			Items: &extv1.JSONSchemaPropsOrArray{Schema: &ref},
			// Writers replace the whole list.
			XListType: ptr.To("atomic"),
		},
	}

	if !s.Legacy() {
		return map[string]extv1.JSONSchemaProps{
			FieldCrossplane: {
				Type:        "object",
				Description: "Configures how Crossplane will reconcile this composite resource",
				Properties:  props,
			},
		}
	}

	props[FieldClaimRef] = extv1.JSONSchemaProps{
		Type:     "object",
		Required: []string{"apiVersion", "kind", "namespace", "name"},
		Properties: map[string]extv1.JSONSchemaProps{
			"apiVersion": {Type: "string"},
			"kind":       {Type: "string"},
			"namespace":  {Type: "string"},
			"name":       {Type: "string"},
		},
	}
	props[FieldWriteConnectionSecretToRef] = extv1.JSONSchemaProps{
		Type:     "object",
		Required: []string{"name", "namespace"},
		Properties: map[string]extv1.JSONSchemaProps{
			"name":      {Type: "string"},
			"namespace": {Type: "string"},
		},
	}
	props[FieldPublishConnectionDetailsTo] = publishConnectionDetailsTo()
	props[FieldReclaimPolicy] = reclaimPolicy()
	props[FieldEnvironmentConfigRefs] = extv1.JSONSchemaProps{
		Type: "array",
		Items: &extv1.JSONSchemaPropsOrArray{Schema: &extv1.JSONSchemaProps{
			Type: "object",
			Properties: map[string]extv1.JSONSchemaProps{
				"apiVersion": {Type: "string"},
				"name":       {Type: "string"},
				"kind":       {Type: "string"},
			},
			Required: []string{"apiVersion", "kind"},
		}},
		// The renderer replaces the whole list.
		XListType: ptr.To("atomic"),
	}
	return props
}

// CompositeResourceClaimSpecProps returns the spec machinery fields of claims,
// keyed by field name. compositeDeletePolicy defaults to defaultPolicy
// (Background when nil, which is what the API server defaults an XRD's
// defaultCompositeDeletePolicy to).
func CompositeResourceClaimSpecProps(defaultPolicy *v1.CompositeDeletePolicy) map[string]extv1.JSONSchemaProps {
	def := string(ptr.Deref(defaultPolicy, v1.CompositeDeleteBackground))
	return map[string]extv1.JSONSchemaProps{
		FieldCompositionRef:              nameRef(),
		FieldCompositionSelector:         labelSelector(),
		FieldCompositionRevisionRef:      nameRef(),
		FieldCompositionRevisionSelector: labelSelector(),
		// A claim's update policy has no default of its own: the composite
		// resource's applies unless the claim sets one.
		FieldCompositionUpdatePolicy: enum(nil, string(v1.UpdateAutomatic), string(v1.UpdateManual)),
		FieldCompositeDeletePolicy:   enum(&def, string(v1.CompositeDeleteBackground), string(v1.CompositeDeleteForeground)),
		FieldResourceRef: {
			Type:     "object",
			Required: []string{"apiVersion", "kind", "name"},
			Properties: map[string]extv1.JSONSchemaProps{
				"apiVersion": {Type: "string"},
				"kind":       {Type: "string"},
				"name":       {Type: "string"},
			},
		},
		FieldWriteConnectionSecretToRef: {
			Type:       "object",
			Required:   []string{"name"},
			Properties: map[string]extv1.JSONSchemaProps{"name": {Type: "string"}},
		},
		FieldPublishConnectionDetailsTo: publishConnectionDetailsTo(),
		FieldReclaimPolicy:              reclaimPolicy(),
	}
}

func conditions() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{
		Description:  "Conditions of the resource.",
		Type:         "array",
		XListType:    ptr.To("map"),
		XListMapKeys: []string{"type"},
		Items: &extv1.JSONSchemaPropsOrArray{
			Schema: &extv1.JSONSchemaProps{
				Type:     "object",
				Required: []string{"lastTransitionTime", "reason", "status", "type"},
				Properties: map[string]extv1.JSONSchemaProps{
					"lastTransitionTime": {Type: "string", Format: "date-time"},
					"message":            {Type: "string"},
					"observedGeneration": {Type: "integer", Format: "int64"},
					"reason":             {Type: "string"},
					"status":             {Type: "string"},
					"type":               {Type: "string"},
				},
			},
		},
	}
}

func connectionDetails() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]extv1.JSONSchemaProps{
			"lastPublishedTime": {Type: "string", Format: "date-time"},
		},
	}
}

// LoomStatusProps returns the schema of status.loom, Loom's bounded
// per-composed-resource summary (loomv1alpha1.CompositeStatus).
func LoomStatusProps() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{
		Type:        "object",
		Description: "Loom's summary of the composed resources, so a user sees at a glance which one holds the composite resource back. Crossplane ignores it.",
		Properties: map[string]extv1.JSONSchemaProps{
			"resources": {
				Type:      "array",
				XListType: ptr.To("atomic"),
				MaxItems:  ptr.To(int64(loomv1alpha1.MaxResourceSummaries)),
				Items: &extv1.JSONSchemaPropsOrArray{
					Schema: &extv1.JSONSchemaProps{
						Type:     "object",
						Required: []string{"resourceName", "apiVersion", "kind", "ready"},
						Properties: map[string]extv1.JSONSchemaProps{
							"resourceName": {Type: "string"},
							"apiVersion":   {Type: "string"},
							"kind":         {Type: "string"},
							"name":         {Type: "string"},
							"namespace":    {Type: "string"},
							"ready":        enum(nil, "True", "False", "Unknown"),
							"reason":       {Type: "string"},
							"message":      {Type: "string", MaxLength: ptr.To(int64(loomv1alpha1.MaxSummaryMessageLength))},
						},
					},
				},
			},
			"omittedResources": {Type: "integer", Format: "int64"},
		},
	}
}

// WatchedResourceRefsProps returns the schema of status.watchedResourceRefs
// ([]loomv1alpha1.WatchedResourceRef).
func WatchedResourceRefsProps() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{
		Type:        "array",
		Description: "Resources composition functions asked Loom to watch; a change to one re-renders the composite resource. Crossplane ignores it.",
		XListType:   ptr.To("atomic"),
		Items: &extv1.JSONSchemaPropsOrArray{
			Schema: &extv1.JSONSchemaProps{
				Type:     "object",
				Required: []string{"apiVersion", "kind", "name"},
				Properties: map[string]extv1.JSONSchemaProps{
					"apiVersion": {Type: "string"},
					"kind":       {Type: "string"},
					"name":       {Type: "string"},
					"namespace":  {Type: "string"},
					"step":       {Type: "string"},
				},
			},
		},
	}
}

// CompositeResourceStatusProps returns the status machinery fields of
// composite resources of the supplied scope, keyed by field name: conditions
// for all; connectionDetails and claimConditionTypes for LegacyCluster,
// crossplane.connectionDetails for Namespaced and Cluster; and Loom's loom and
// watchedResourceRefs.
func CompositeResourceStatusProps(s v1.CompositeResourceScope) map[string]extv1.JSONSchemaProps {
	props := map[string]extv1.JSONSchemaProps{
		FieldConditions:          conditions(),
		FieldLoom:                LoomStatusProps(),
		FieldWatchedResourceRefs: WatchedResourceRefsProps(),
	}
	if !s.Legacy() {
		props[FieldCrossplane] = extv1.JSONSchemaProps{
			Type:        "object",
			Description: "Indicates how Crossplane is reconciling this composite resource",
			Properties:  map[string]extv1.JSONSchemaProps{FieldConnectionDetails: connectionDetails()},
		}
		return props
	}
	props[FieldConnectionDetails] = connectionDetails()
	props[FieldClaimConditionTypes] = extv1.JSONSchemaProps{
		Type:      "array",
		XListType: ptr.To("set"),
		Items:     &extv1.JSONSchemaPropsOrArray{Schema: &extv1.JSONSchemaProps{Type: "string"}},
	}
	return props
}

// CompositeResourceClaimStatusProps returns the status machinery fields of
// claims, keyed by field name: those of LegacyCluster composite resources and
// Loom's summary, but not watchedResourceRefs, which belongs to the composite
// resource alone.
func CompositeResourceClaimStatusProps() map[string]extv1.JSONSchemaProps {
	props := CompositeResourceStatusProps(v1.CompositeResourceScopeLegacyCluster)
	delete(props, FieldWatchedResourceRefs)
	return props
}

// CompositeResourcePrinterColumns returns the printer columns Loom appends to
// the user's columns of composite resources of the supplied scope.
func CompositeResourcePrinterColumns(s v1.CompositeResourceScope) []extv1.CustomResourceColumnDefinition {
	p := "." + SpecMachineryPath(s)
	return []extv1.CustomResourceColumnDefinition{
		{Name: "SYNCED", Type: "string", JSONPath: ".status.conditions[?(@.type=='Synced')].status"},
		{Name: "READY", Type: "string", JSONPath: ".status.conditions[?(@.type=='Ready')].status"},
		{Name: "COMPOSITION", Type: "string", JSONPath: p + ".compositionRef.name"},
		{Name: "COMPOSITIONREVISION", Type: "string", JSONPath: p + ".compositionRevisionRef.name", Priority: 1},
		{Name: "AGE", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	}
}

// CompositeResourceClaimPrinterColumns returns the printer columns Loom
// appends to the user's columns of claims.
func CompositeResourceClaimPrinterColumns() []extv1.CustomResourceColumnDefinition {
	return []extv1.CustomResourceColumnDefinition{
		{Name: "SYNCED", Type: "string", JSONPath: ".status.conditions[?(@.type=='Synced')].status"},
		{Name: "READY", Type: "string", JSONPath: ".status.conditions[?(@.type=='Ready')].status"},
		{Name: "CONNECTION-SECRET", Type: "string", JSONPath: ".spec.writeConnectionSecretToRef.name"},
		{Name: "AGE", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	}
}

// GetPropFields returns the field names of props, sorted.
func GetPropFields(props map[string]extv1.JSONSchemaProps) []string {
	fields := make([]string, 0, len(props))
	for k := range props {
		fields = append(fields, k)
	}
	slices.Sort(fields)
	return fields
}
