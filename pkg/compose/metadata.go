package compose

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

// SetComposedMetadata sets what the composition machinery owns on obj, the
// desired composed resource of the composition resource name template of the
// composite resource xr, whether patch and transform or a function pipeline
// produced it. The rules, the same for every renderer of Loom:
//
//   - name: observed's (the composed resource that exists, nil if none),
//     else the one obj already has, else ComposedName of obj's generateName
//     (default: the root composite's name and "-"), xr's UID and template;
//     generateName is cleared, and the name must be a DNS-1123 subdomain;
//   - namespace: observed's, if it has one; a namespaced composite resource
//     (xr has a namespace) imposes its own. Callers that must refuse a
//     template asking for another namespace check that with CheckNamespace
//     before calling;
//   - labels crossplane.io/composite (the root composite: xr's own label, else
//     its name) and, when xr belongs to a claim (labels, else spec.claimRef),
//     crossplane.io/claim-name and crossplane.io/claim-namespace;
//   - annotation crossplane.io/composition-resource-name: template;
//   - a controller owner reference to xr, replacing one to xr already there.
//
// It returns an error, naming the field below metadata, if obj is already
// controlled by another owner or its name is invalid.
func SetComposedMetadata(xr, obj *unstructured.Unstructured, template string, observed *unstructured.Unstructured) error {
	root := xr.GetLabels()[v1.LabelComposite]
	if root == "" {
		root = xr.GetName()
	}

	switch {
	case observed != nil:
		obj.SetName(observed.GetName())
		if observed.GetNamespace() != "" {
			obj.SetNamespace(observed.GetNamespace())
		}
	case obj.GetName() != "":
	default:
		prefix := obj.GetGenerateName()
		if prefix == "" {
			prefix = root + "-"
		}
		obj.SetName(ComposedName(prefix, xr.GetUID(), template))
	}
	obj.SetGenerateName("")
	if xr.GetNamespace() != "" {
		obj.SetNamespace(xr.GetNamespace())
	}
	if errs := validation.IsDNS1123Subdomain(obj.GetName()); len(errs) > 0 {
		return fmt.Errorf("name %q: %s", obj.GetName(), strings.Join(errs, "; "))
	}

	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1.LabelComposite] = root
	claimName, claimNS := xr.GetLabels()[v1.LabelClaimName], xr.GetLabels()[v1.LabelClaimNamespace]
	if claimName == "" || claimNS == "" {
		claimName, _, _ = unstructured.NestedString(xr.Object, "spec", "claimRef", "name")
		claimNS, _, _ = unstructured.NestedString(xr.Object, "spec", "claimRef", "namespace")
	}
	if claimName != "" && claimNS != "" {
		labels[v1.LabelClaimName] = claimName
		labels[v1.LabelClaimNamespace] = claimNS
	}
	obj.SetLabels(labels)

	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[v1.AnnotationCompositionResourceName] = template
	obj.SetAnnotations(annotations)

	refs := obj.GetOwnerReferences()
	kept := make([]metav1.OwnerReference, 0, len(refs)+1)
	for _, ref := range refs {
		if ref.Controller != nil && *ref.Controller {
			if ref.UID != xr.GetUID() {
				return fmt.Errorf("ownerReferences: already controlled by %s %q", ref.Kind, ref.Name)
			}
			continue
		}
		kept = append(kept, ref)
	}
	yes := true
	kept = append(kept, metav1.OwnerReference{
		APIVersion:         xr.GetAPIVersion(),
		Kind:               xr.GetKind(),
		Name:               xr.GetName(),
		UID:                xr.GetUID(),
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	})
	obj.SetOwnerReferences(kept)
	return nil
}

// PatchedNamespace is what TemplateNamespace returns for a template whose
// patches write metadata.namespace: the namespace it asks for is known only
// per render, and SetComposedMetadata imposes a namespaced composite
// resource's own anyway.
const PatchedNamespace = "*"

// TemplateNamespace returns the namespace template i of spec (mode
// Resources) asks for: PatchedNamespace when one of its patches (its
// PatchSets' included) writes the composed resource's metadata.namespace,
// else the namespace its base names, else "". A base that does not decode
// asks for none (Render reports it).
func TemplateNamespace(spec *v1.CompositionSpec, i int) string {
	t := spec.Resources[i]
	patches := t.Patches
	for _, p := range t.Patches {
		if p.Type != v1.PatchTypePatchSet || p.PatchSetName == nil {
			continue
		}
		for _, ps := range spec.PatchSets {
			if ps.Name == *p.PatchSetName {
				patches = append(patches, ps.Patches...)
			}
		}
	}
	for _, p := range patches {
		switch p.Type { //nolint:exhaustive // Only patches into the composed resource can set its namespace.
		case "", v1.PatchTypeFromCompositeFieldPath, v1.PatchTypeCombineFromComposite,
			v1.PatchTypeFromEnvironmentFieldPath, v1.PatchTypeCombineFromEnvironment:
			if p.GetToFieldPath() == "metadata.namespace" {
				return PatchedNamespace
			}
		}
	}
	base, err := bases.get(t.Base.Raw)
	if err != nil {
		return ""
	}
	md, _ := base["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	return ns
}

// CheckNamespace refuses the composed resource of composition resource name
// template when its composite resource xr is namespaced (has a namespace)
// and the template or function asked for another namespace: requested is the
// namespace it named before SetComposedMetadata imposed xr's ("" if none,
// PatchedNamespace if a patch writes it, see TemplateNamespace). A namespaced
// composite resource may compose only into its own namespace, and Loom
// refuses rather than silently moving the resource. It returns nil for a
// cluster-scoped composite resource.
func CheckNamespace(xr *unstructured.Unstructured, template, requested string) error {
	ns := xr.GetNamespace()
	switch {
	case ns == "" || requested == "" || requested == ns:
		return nil
	case requested == PatchedNamespace:
		return fmt.Errorf("composed resource %q: a patch writes metadata.namespace, and a Namespaced composite resource may compose only into its own namespace", template)
	default:
		return fmt.Errorf("composed resource %q: namespace %q is not the composite resource's namespace %q, and a Namespaced composite resource may compose only into its own", template, requested, ns)
	}
}
