// Package compose is Loom's patch-and-transform engine: it renders a
// composite resource (XR) through a Composition in mode Resources into the
// desired composed resources, the XR after ToComposite patches, the readiness
// of each composed resource and the connection details they contribute.
//
// Render is pure and deterministic: it does no I/O, reads only its Request
// and returns the same Result for the same Request. Everything the engine
// needs from the cluster (observed composed resources, EnvironmentConfigs) is
// passed in, so the renderer service and `loomctl render` share one code
// path. The semantics are Crossplane v1.20's native patch and transform,
// with function-patch-and-transform's rules where v1.20 is silent (sources
// are observed state, destinations desired state; fromFieldPath Required
// holds back resources that do not exist yet), plus Loom's deterministic
// composed resource names and external-name propagation.
package compose

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/fieldpath"
)

// A Request is everything Render reads.
type Request struct {
	// Composite is the observed composite resource. Render does not modify
	// it. Its UID seeds the names of composed resources.
	Composite *unstructured.Unstructured

	// Composition is the spec to render: a Composition's, or the embedded
	// CompositionSpec of a CompositionRevision. Its mode must be Resources.
	Composition *v1.CompositionSpec

	// Observed are the composed resources that exist, keyed by composition
	// resource name (their crossplane.io/composition-resource-name
	// annotation; see TemplateName). Render does not modify them. Entries
	// that no template names are ignored: they are composed resources whose
	// template was removed, which callers garbage collect.
	Observed map[string]*unstructured.Unstructured

	// EnvironmentConfigs are the EnvironmentConfigs that the Composition's
	// spec.environment may select from, as unstructured objects with a data
	// map. Only needed when the Composition selects EnvironmentConfigs.
	EnvironmentConfigs []*unstructured.Unstructured

	// EnvironmentConfigRefs are the names of the EnvironmentConfigs the
	// composite resource resolved before (its spec.environmentConfigRefs).
	// Under the Composition's resolve policy IfNotPresent (the default) a
	// non-empty list is kept as it is: those EnvironmentConfigs are merged,
	// in order, and the selectors are not evaluated again. Under Always it
	// is ignored.
	EnvironmentConfigRefs []string
}

// A Result is the outcome of a render.
type Result struct {
	// Composite is the desired composite resource: a copy of the observed
	// one with the patches that write to it applied (ToCompositeFieldPath,
	// CombineToComposite, and environment patches to the composite). Like
	// Crossplane, callers should only persist its status.
	Composite *unstructured.Unstructured

	// Resources has one entry per template, in Composition order.
	Resources []Resource

	// ConnectionDetails are the connection details of every composed
	// resource that exists, in template order. When two details have the
	// same Name the later one wins.
	ConnectionDetails []ConnectionDetail

	// Environment is the environment after the environment patches and the
	// template patches that write to it.
	Environment map[string]any

	// EnvironmentConfigs are the names of the EnvironmentConfigs merged into
	// the environment, in merge order (a name may repeat). Callers watch
	// them to re-render when they change.
	EnvironmentConfigs []string

	// EnvironmentConfigRefs are what the composite resource should record
	// in spec.environmentConfigRefs, as Crossplane records them: the name
	// of each Reference source (even one that does not exist, under
	// resolution Optional) and the names each Selector matched, in order;
	// the request's when they were kept. Empty without spec.environment.
	EnvironmentConfigRefs []string

	// Ready is true if every composed resource exists and is ready.
	Ready bool

	// Errors are the templates that failed, each a *PatchError or a
	// *TemplateError naming the template, the patch or field and the cause.
	// A template's error is also in its Resource.
	Errors []error

	// Warnings are notes that did not fail the render, for example a
	// Required patch skipped on a composed resource that already exists.
	Warnings []string
}

// Err returns the errors of the result joined, or nil.
func (r *Result) Err() error { return errors.Join(r.Errors...) }

// A Resource is the outcome of one template.
type Resource struct {
	// Name of the template (the composition resource name).
	Name string

	// Desired is the desired composed resource, ready to apply; nil if the
	// template was skipped or failed. Callers must then leave an existing
	// composed resource as it is (neither update nor delete it).
	Desired *unstructured.Unstructured

	// Observed is true if the composed resource exists.
	Observed bool

	// Skipped says why there is no Desired object although the template did
	// not fail: a patch with policy.fromFieldPath Required whose source does
	// not exist, for a composed resource that does not exist yet.
	Skipped string

	// Err is why the template failed, a *PatchError or *TemplateError.
	Err error

	// Ready is true if the composed resource exists and passes its
	// readiness checks.
	Ready bool

	// Reason says why the resource is not ready; empty when it is.
	Reason string
}

// TemplateName returns the composition resource name of the template at
// index i: its name, or its index if it has none.
func TemplateName(t *v1.ComposedTemplate, i int) string {
	if n := t.GetName(); n != "" {
		return n
	}
	return strconv.Itoa(i)
}

// maxNameLength is the longest name of a composed resource; names are used as
// label values.
const maxNameLength = 63

// ComposedName returns the deterministic name of a composed resource: prefix
// (with one trailing "-" ensured) followed by the first 12 hex characters of
// the SHA-256 of the composite resource's UID and the template name. The
// prefix is truncated so that the name is at most 63 characters. The same
// inputs always give the same name, so a render that is repeated after a
// crash never creates a second copy.
func ComposedName(prefix string, owner types.UID, template string) string {
	h := sha256.Sum256([]byte(string(owner) + template))
	suffix := hex.EncodeToString(h[:])[:12]
	if !strings.HasSuffix(prefix, "-") {
		prefix += "-"
	}
	if max := maxNameLength - len(suffix); len(prefix) > max {
		prefix = strings.TrimRight(prefix[:max-1], "-.") + "-"
	}
	return prefix + suffix
}

// Render renders a composite resource through a Composition in mode
// Resources. Problems of single templates (a failing patch or transform, an
// invalid readiness check) are reported in the Result and do not stop the
// other templates. Problems that affect every template (a Composition that is
// not in mode Resources or is for another kind of composite resource,
// duplicate template names, an undefined PatchSet in a PatchSet, an
// environment that cannot be built) return an error and no Result. Every
// error matches ErrInvalid or ErrUnavailable.
func Render(req Request) (*Result, error) {
	if req.Composite == nil {
		return nil, &CompositionError{Field: "composite resource", Err: errors.New("is required")}
	}
	if req.Composition == nil {
		return nil, &CompositionError{Field: "spec", Err: errors.New("is required")}
	}
	spec := req.Composition
	if m := spec.GetMode(); m != v1.CompositionModeResources {
		return nil, &CompositionError{Field: "spec.mode", Err: fmt.Errorf("mode %s is not rendered by patch and transform (want %s)", m, v1.CompositionModeResources)}
	}
	xr := req.Composite
	if ref := spec.CompositeTypeRef; ref.APIVersion != xr.GetAPIVersion() || ref.Kind != xr.GetKind() {
		return nil, &CompositionError{Field: "spec.compositeTypeRef", Err: fmt.Errorf("the Composition is for %s, %s, not for the composite resource's %s, %s", ref.Kind, ref.APIVersion, xr.GetKind(), xr.GetAPIVersion())}
	}
	names, err := templateNames(spec.Resources)
	if err != nil {
		return nil, err
	}
	sets, err := patchSets(spec.PatchSets)
	if err != nil {
		return nil, err
	}
	if err := validateReadinessChecks(spec.Resources); err != nil {
		return nil, err
	}

	desiredContent, err := fieldpath.ToJSON(xr.Object)
	if err != nil {
		return nil, &CompositionError{Field: "composite resource", Err: err}
	}
	desiredXR := &unstructured.Unstructured{Object: desiredContent.(map[string]any)} //nolint:forcetypeassert // An object stays an object.
	o := objects{
		observedXR: fieldpath.Pave(xr.Object),
		desiredXR:  fieldpath.Pave(desiredXR.Object),
	}

	env, err := buildEnvironment(spec.Environment, o.observedXR, req.EnvironmentConfigs, req.EnvironmentConfigRefs)
	if err != nil {
		return nil, err
	}
	o.env = fieldpath.Pave(env.data)
	if spec.Environment != nil {
		for j := range spec.Environment.Patches {
			p := spec.Environment.Patches[j].ToPatch()
			_, outcome, err := applyPatch(p, scopeEnvironment, o)
			if err == nil && outcome == patchSourceMissing && p.Policy.GetFromFieldPathPolicy() == v1.FromFieldPathPolicyRequired {
				err = errors.New("the source field does not exist and policy.fromFieldPath is Required")
			}
			if err != nil {
				from, to := describe(p)
				return nil, &PatchError{Index: j, Type: p.GetType(), From: from, To: to, Err: err}
			}
		}
	}

	res := &Result{Composite: desiredXR, Resources: make([]Resource, len(spec.Resources)), EnvironmentConfigs: env.selected, EnvironmentConfigRefs: env.refs, Ready: true}
	for i := range spec.Resources {
		t := &spec.Resources[i]
		name := names[i]
		r := Resource{Name: name}

		var obs map[string]any
		if u := req.Observed[name]; u != nil {
			r.Observed = true
			obs = u.Object
		}
		o.observedCD = nil
		if obs != nil {
			o.observedCD = fieldpath.Pave(obs)
		}

		var warnings []string
		r.Desired, r.Skipped, warnings, r.Err = renderTemplate(t, name, sets, xr, req.Observed[name], o)
		res.Warnings = append(res.Warnings, warnings...)
		mismatch := false
		if err := checkKind(r.Desired, req.Observed[name]); err != nil && r.Err == nil {
			r.Desired, r.Err, mismatch = nil, &TemplateError{Template: name, Field: "base.kind", Err: err}, true
		}

		ready, reason, err := IsReady(obs, t.ReadinessChecks)
		if err != nil && r.Err == nil {
			r.Err = &TemplateError{Template: name, Field: "readinessChecks", Err: err}
			var ce *ReadinessCheckError
			if errors.As(err, &ce) {
				r.Err = &TemplateError{Template: name, Field: fmt.Sprintf("readinessChecks[%d]", ce.Index), Err: ce.Err}
			}
		}
		r.Ready, r.Reason = ready && !mismatch, reason
		if !ready && r.Skipped != "" && !r.Observed {
			r.Reason = r.Skipped
		}

		cds, err := ExtractConnectionDetails(name, obs, t.ConnectionDetails)
		if err != nil && r.Err == nil {
			r.Err = &TemplateError{Template: name, Field: "connectionDetails", Err: err}
		}
		res.ConnectionDetails = append(res.ConnectionDetails, cds...)

		if r.Err != nil {
			res.Errors = append(res.Errors, r.Err)
		}
		res.Ready = res.Ready && r.Ready
		res.Resources[i] = r
	}
	res.Environment = o.env.UnstructuredContent()
	return res, nil
}

// checkKind refuses a desired composed resource whose kind differs from the
// observed one's, as Crossplane v1.20 does: either the template's kind was
// changed or the template is not the one the resource was composed from (the
// order of anonymous templates changed), and applying it would overwrite
// another resource. Like Crossplane, only the kind is compared: a template may
// move a resource to another version or group.
func checkKind(desired, observed *unstructured.Unstructured) error {
	if desired == nil || observed == nil || observed.GetKind() == "" || desired.GetKind() == observed.GetKind() {
		return nil
	}
	return fmt.Errorf("cannot change the kind of composed resource %q from %s to %s (possible composed resource template mismatch)", observed.GetName(), observed.GetKind(), desired.GetKind())
}

// templateNames returns the composition resource names of the templates,
// checking that either all or none are named and that names are unique.
func templateNames(ts []v1.ComposedTemplate) ([]string, error) {
	names := make([]string, len(ts))
	seen := make(map[string]int, len(ts))
	named := 0
	for i := range ts {
		if ts[i].GetName() != "" {
			named++
		}
		names[i] = TemplateName(&ts[i], i)
		if j, dup := seen[names[i]]; dup {
			return nil, &CompositionError{Field: fmt.Sprintf("spec.resources[%d].name", i), Err: fmt.Errorf("duplicate name %q (also spec.resources[%d])", names[i], j)}
		}
		seen[names[i]] = i
	}
	if named != 0 && named != len(ts) {
		for i := range ts {
			if ts[i].GetName() == "" {
				return nil, &CompositionError{Field: fmt.Sprintf("spec.resources[%d].name", i), Err: errors.New("is required: either all or no templates must be named")}
			}
		}
	}
	return names, nil
}

// patchSets indexes the PatchSets by name, checking that none includes
// another.
func patchSets(ps []v1.PatchSet) (map[string][]v1.Patch, error) {
	sets := make(map[string][]v1.Patch, len(ps))
	for i, s := range ps {
		if _, dup := sets[s.Name]; dup {
			return nil, &CompositionError{Field: fmt.Sprintf("spec.patchSets[%d].name", i), Err: fmt.Errorf("duplicate name %q", s.Name)}
		}
		for j, p := range s.Patches {
			if p.GetType() == v1.PatchTypePatchSet {
				return nil, &CompositionError{Field: fmt.Sprintf("spec.patchSets[%d].patches[%d]", i, j), Err: errors.New("a PatchSet may not include another PatchSet")}
			}
		}
		sets[s.Name] = s.Patches
	}
	return sets, nil
}

// renderTemplate renders one template into its desired composed resource.
func renderTemplate(t *v1.ComposedTemplate, name string, sets map[string][]v1.Patch, xr, observed *unstructured.Unstructured, o objects) (desired *unstructured.Unstructured, skipped string, warnings []string, err error) {
	base, err := decodeBase(t)
	if err != nil {
		return nil, "", nil, &TemplateError{Template: name, Field: "base", Err: err}
	}
	desired = &unstructured.Unstructured{Object: base}
	propagateExternalName(desired, xr)
	o.desiredCD = fieldpath.Pave(desired.Object)

	refs, err := inlinePatches(name, t.Patches, sets)
	if err != nil {
		return nil, "", nil, err
	}
	for _, ref := range refs {
		p := ref.patch
		toComposed, outcome, err := applyPatch(p, scopeTemplate, o)
		if err != nil {
			from, to := describe(p)
			return nil, "", warnings, &PatchError{Template: name, Index: ref.index, PatchSet: ref.patchSet, PatchSetIndex: ref.patchSetIndex, Type: p.GetType(), From: from, To: to, Err: err}
		}
		if outcome != patchSourceMissing || p.Policy.GetFromFieldPathPolicy() != v1.FromFieldPathPolicyRequired {
			continue
		}
		from, _ := describe(p)
		what := fmt.Sprintf("patch %d (%s %s)", ref.index, p.GetType(), from)
		if ref.patchSet != "" {
			what = fmt.Sprintf("patch %d (patch %d of PatchSet %q: %s %s)", ref.index, ref.patchSetIndex, ref.patchSet, p.GetType(), from)
		}
		if toComposed && observed == nil {
			return nil, fmt.Sprintf("not created: the source of %s does not exist and its policy.fromFieldPath is Required", what), warnings, nil
		}
		warnings = append(warnings, fmt.Sprintf("template %q: skipped %s: the source does not exist and its policy.fromFieldPath is Required", name, what))
	}

	if err := SetComposedMetadata(xr, desired, name, observed); err != nil {
		return nil, "", warnings, &TemplateError{Template: name, Field: "metadata", Err: err}
	}
	return desired, "", warnings, nil
}

// decodeBase returns a copy of a template's base object.
func decodeBase(t *v1.ComposedTemplate) (map[string]any, error) {
	raw := t.Base.Raw
	if len(raw) == 0 && t.Base.Object != nil {
		v, err := fieldpath.ToJSON(t.Base.Object)
		if err != nil {
			return nil, err
		}
		m, _ := v.(map[string]any)
		return checkBase(m)
	}
	m, err := copyBase(raw)
	if err != nil {
		return nil, err
	}
	return checkBase(m)
}

func checkBase(m map[string]any) (map[string]any, error) {
	if m == nil {
		return nil, errors.New("is required")
	}
	for _, k := range []string{"apiVersion", "kind"} {
		if s, ok := m[k].(string); !ok || s == "" {
			return nil, fmt.Errorf("%s is required", k)
		}
	}
	return m, nil
}

// propagateExternalName sets the external name of a composed resource to the
// composite resource's, with the prefix and suffix the template's base
// declares in annotations. A base that sets an external name keeps it.
func propagateExternalName(desired, xr *unstructured.Unstructured) {
	ext := xr.GetAnnotations()[v1.AnnotationExternalName]
	if ext == "" {
		return
	}
	a := desired.GetAnnotations()
	if a[v1.AnnotationExternalName] != "" {
		return
	}
	if a == nil {
		a = map[string]string{}
	}
	a[v1.AnnotationExternalName] = a[v1.AnnotationExternalNamePrefix] + ext + a[v1.AnnotationExternalNameSuffix]
	desired.SetAnnotations(a)
}
