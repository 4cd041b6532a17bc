package objjson

// interned are strings that Kubernetes objects hold again and again, as
// member names and as values: decoding returns these copies instead of
// allocating a string for each occurrence (a composed resource holds about
// 150 strings, most of them among these). The table is fixed: it never
// grows with what is decoded.
var interned = func() map[string]string { //nolint:gochecknoglobals // Read-only after init.
	m := map[string]string{}
	for _, s := range []string{
		// Object metadata.
		"apiVersion", "kind", "metadata", "name", "namespace", "uid", "resourceVersion", "generation",
		"creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generateName",
		"labels", "annotations", "finalizers", "ownerReferences", "controller", "blockOwnerDeletion",
		"managedFields", "manager", "operation", "time", "fieldsType", "fieldsV1", "subresource",
		"FieldsV1", "Apply", "Update", "status", "spec", "data", "type", "stringData", "items",
		// Conditions.
		"conditions", "reason", "message", "lastTransitionTime", "observedGeneration",
		"True", "False", "Unknown", "Ready", "Synced", "Available", "Creating", "Unavailable", "Deleting",
		"ReconcileSuccess", "ReconcileError", "ReconcilePaused", "Healthy", "Unhealthy",
		// Crossplane claims, XRs and composed resources.
		"compositionRef", "compositionRevisionRef", "compositionSelector", "compositionUpdatePolicy",
		"compositionRevisionSelector", "resourceRef", "resourceRefs", "claimRef", "writeConnectionSecretToRef",
		"publishConnectionDetailsTo", "connectionDetails", "lastPublishedTime", "parameters", "crossplane",
		"forProvider", "atProvider", "initProvider", "providerConfigRef", "deletionPolicy", "managementPolicies",
		"Delete", "Orphan", "Automatic", "Manual", "Default", "*",
		"matchLabels", "matchControllerRef", "policy", "resolve", "resolution", "Always", "Required", "Optional",
		"crossplane.io/composite", "crossplane.io/claim-name", "crossplane.io/claim-namespace",
		"crossplane.io/composition-resource-name", "crossplane.io/external-name", "crossplane.io/external-create-pending",
		"crossplane.io/external-create-succeeded", "crossplane.io/external-create-failed",
		"finalizer.managedresource.crossplane.io", "composite.apiextensions.crossplane.io",
		"connection.crossplane.io/v1alpha1",
		// Managed fields' field sets.
		".", "f:metadata", "f:spec", "f:status", "f:labels", "f:annotations", "f:ownerReferences", "f:finalizers",
		"f:conditions", "f:type", "f:status", "f:reason", "f:message", "f:lastTransitionTime",
		"f:observedGeneration", "f:name", "f:namespace", "f:uid", "f:apiVersion", "f:kind", "f:controller",
		"f:blockOwnerDeletion", "f:generateName", "f:data", "f:compositionRef", "f:compositionRevisionRef",
		"f:resourceRef", "f:resourceRefs", "f:claimRef", "f:writeConnectionSecretToRef", "f:connectionDetails",
		"f:lastPublishedTime", "f:parameters", "f:crossplane", "f:forProvider", "f:atProvider",
		"f:providerConfigRef", "f:deletionPolicy", "f:managementPolicies",
		"f:crossplane.io/composite", "f:crossplane.io/claim-name", "f:crossplane.io/claim-namespace",
		"f:crossplane.io/composition-resource-name", "f:crossplane.io/external-name",
		`k:{"type":"Ready"}`, `k:{"type":"Synced"}`,
	} {
		m[s] = s
	}
	return m
}()

// maxInterned is the length of the longest interned string.
var maxInterned = func() int { //nolint:gochecknoglobals // Read-only after init.
	n := 0
	for s := range interned {
		n = max(n, len(s))
	}
	return n
}()
