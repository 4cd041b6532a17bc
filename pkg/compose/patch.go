package compose

import (
	"errors"
	"fmt"
	"strings"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/fieldpath"
)

// A patchRef is a patch together with where it came from, so that errors can
// name it.
type patchRef struct {
	patch         v1.Patch
	index         int    // In the template's patches.
	patchSet      string // The PatchSet it was included from, if any.
	patchSetIndex int
}

// inlinePatches replaces the PatchSet patches of a template with the patches
// of the named sets.
func inlinePatches(template string, ps []v1.Patch, sets map[string][]v1.Patch) ([]patchRef, error) {
	out := make([]patchRef, 0, len(ps))
	for i, p := range ps {
		if p.GetType() != v1.PatchTypePatchSet {
			out = append(out, patchRef{patch: p, index: i})
			continue
		}
		perr := &PatchError{Template: template, Index: i, Type: v1.PatchTypePatchSet}
		if p.PatchSetName == nil || *p.PatchSetName == "" {
			perr.Err = errors.New("patchSetName is required by patch type PatchSet")
			return nil, perr
		}
		set, ok := sets[*p.PatchSetName]
		if !ok {
			perr.Err = fmt.Errorf("no PatchSet named %q in spec.patchSets", *p.PatchSetName)
			return nil, perr
		}
		for j, sp := range set {
			out = append(out, patchRef{patch: sp, index: i, patchSet: *p.PatchSetName, patchSetIndex: j})
		}
	}
	return out, nil
}

// patchScope says what a patch's "composed resource" is.
type patchScope int

const (
	// scopeTemplate patches are between the composite resource, the
	// environment and a composed resource.
	scopeTemplate patchScope = iota
	// scopeEnvironment patches are between the composite resource and the
	// environment.
	scopeEnvironment
)

// objects are the objects a patch may read from and write to. Sources are
// observed state, destinations desired state.
type objects struct {
	observedXR *fieldpath.Paved // Read only.
	desiredXR  *fieldpath.Paved
	env        *fieldpath.Paved
	observedCD *fieldpath.Paved // Read only; nil if the composed resource does not exist.
	desiredCD  *fieldpath.Paved
}

// direction returns the source and destination of a patch type, and whether
// the destination is the composed resource. A nil source means the source is
// a composed resource that does not exist yet.
func direction(t v1.PatchType, scope patchScope, o objects) (src, dst *fieldpath.Paved, toComposed bool, err error) {
	if scope == scopeEnvironment {
		switch t { //nolint:exhaustive // The others are invalid here.
		case v1.PatchTypeFromCompositeFieldPath, v1.PatchTypeCombineFromComposite, v1.PatchTypeToEnvironmentFieldPath:
			return o.observedXR, o.env, false, nil
		case v1.PatchTypeToCompositeFieldPath, v1.PatchTypeCombineToComposite, v1.PatchTypeFromEnvironmentFieldPath:
			return o.env, o.desiredXR, false, nil
		case v1.PatchTypeCombineFromEnvironment, v1.PatchTypeCombineToEnvironment, v1.PatchTypePatchSet:
			return nil, nil, false, fmt.Errorf("patch type %s is not allowed in spec.environment.patches", t)
		}
		return nil, nil, false, fmt.Errorf("unknown patch type %q", t)
	}
	switch t { //nolint:exhaustive // PatchSets are inlined before.
	case v1.PatchTypeFromCompositeFieldPath, v1.PatchTypeCombineFromComposite:
		return o.observedXR, o.desiredCD, true, nil
	case v1.PatchTypeFromEnvironmentFieldPath, v1.PatchTypeCombineFromEnvironment:
		return o.env, o.desiredCD, true, nil
	case v1.PatchTypeToCompositeFieldPath, v1.PatchTypeCombineToComposite:
		return o.observedCD, o.desiredXR, false, nil
	case v1.PatchTypeToEnvironmentFieldPath, v1.PatchTypeCombineToEnvironment:
		return o.observedCD, o.env, false, nil
	case v1.PatchTypePatchSet:
		return nil, nil, false, errors.New("a PatchSet may not include another PatchSet")
	}
	return nil, nil, false, fmt.Errorf("unknown patch type %q (want FromCompositeFieldPath, ToCompositeFieldPath, CombineFromComposite, CombineToComposite, FromEnvironmentFieldPath, ToEnvironmentFieldPath, CombineFromEnvironment, CombineToEnvironment or PatchSet)", t)
}

// isCombine reports whether a patch type combines variables.
func isCombine(t v1.PatchType) bool {
	switch t { //nolint:exhaustive // Only the combine types.
	case v1.PatchTypeCombineFromComposite, v1.PatchTypeCombineToComposite,
		v1.PatchTypeCombineFromEnvironment, v1.PatchTypeCombineToEnvironment:
		return true
	}
	return false
}

// describe returns the From and To of a patch for messages.
func describe(p v1.Patch) (from, to string) {
	if isCombine(p.GetType()) && p.Combine != nil {
		vars := make([]string, len(p.Combine.Variables))
		for i, v := range p.Combine.Variables {
			vars[i] = v.FromFieldPath
		}
		return strings.Join(vars, ", "), ptrOr(p.ToFieldPath, "")
	}
	return p.GetFromFieldPath(), p.GetToFieldPath()
}

func ptrOr(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}

// patchOutcome is what happened to a patch that did not fail.
type patchOutcome int

const (
	// patchApplied means the destination was written.
	patchApplied patchOutcome = iota
	// patchNoSource means the source is a composed resource that does not
	// exist yet; the patch is skipped silently.
	patchNoSource
	// patchSourceMissing means the source field does not exist.
	patchSourceMissing
)

// A compiledPatch is a patch whose configuration was validated and whose
// field paths were parsed.
type compiledPatch struct {
	patch v1.Patch
	from  fieldpath.Segments   // The source path, unless combine.
	vars  []fieldpath.Segments // The combine variables.
	to    fieldpath.Segments
	merge *fieldpath.MergeOptions
}

// compilePatch validates a patch's configuration, independently of the
// objects it is applied to, so that a bad patch fails even while its source
// does not exist yet.
func compilePatch(p v1.Patch) (compiledPatch, error) {
	c := compiledPatch{patch: p}
	if err := validatePolicy(p.Policy); err != nil {
		return c, err
	}
	mo, err := mergeOptions(p.Policy)
	if err != nil {
		return c, err
	}
	c.merge = mo

	if isCombine(p.GetType()) {
		cb := p.Combine
		if cb == nil {
			return c, fmt.Errorf("combine is required by patch type %s", p.GetType())
		}
		if len(cb.Variables) == 0 {
			return c, errors.New("combine.variables must list at least one variable")
		}
		if !strings.EqualFold(string(cb.Strategy), string(v1.CombineStrategyString)) {
			return c, fmt.Errorf("unknown combine strategy %q (want string)", cb.Strategy)
		}
		if cb.String == nil {
			return c, errors.New("combine.string is required by combine strategy string")
		}
		for i, v := range cb.Variables {
			path, err := fieldpath.Parse(v.FromFieldPath)
			if err != nil {
				return c, fmt.Errorf("combine.variables[%d].fromFieldPath: %w", i, err)
			}
			if len(path) == 0 {
				return c, fmt.Errorf("combine.variables[%d].fromFieldPath is required", i)
			}
			c.vars = append(c.vars, path)
		}
		if p.ToFieldPath == nil || *p.ToFieldPath == "" {
			return c, fmt.Errorf("toFieldPath is required by patch type %s", p.GetType())
		}
	} else {
		if p.FromFieldPath == nil || *p.FromFieldPath == "" {
			return c, fmt.Errorf("fromFieldPath is required by patch type %s", p.GetType())
		}
		if c.from, err = fieldpath.Parse(*p.FromFieldPath); err != nil {
			return c, fmt.Errorf("fromFieldPath: %w", err)
		}
	}
	if c.to, err = fieldpath.Parse(p.GetToFieldPath()); err != nil {
		return c, fmt.Errorf("toFieldPath: %w", err)
	}
	return c, nil
}

// applyPatch applies one patch. It returns whether the destination is the
// composed resource, what happened, and an error that does not yet name the
// patch.
func applyPatch(p v1.Patch, scope patchScope, o objects) (toComposed bool, outcome patchOutcome, err error) {
	src, dst, toComposed, err := direction(p.GetType(), scope, o)
	if err != nil {
		return false, patchApplied, err
	}
	c, err := compilePatch(p)
	if err != nil {
		return toComposed, patchApplied, err
	}
	if src == nil {
		return toComposed, patchNoSource, nil
	}

	var in any
	if isCombine(p.GetType()) {
		vars := make([]any, len(c.vars))
		for i, path := range c.vars {
			v, err := fieldpath.GetSegments(src.UnstructuredContent(), path)
			if fieldpath.IsNotFound(err) {
				return toComposed, patchSourceMissing, nil
			}
			if err != nil {
				return toComposed, patchApplied, fmt.Errorf("cannot read combine.variables[%d].fromFieldPath: %w", i, err)
			}
			vars[i] = v
		}
		in = fmt.Sprintf(p.Combine.String.Format, vars...)
	} else {
		v, err := fieldpath.GetSegments(src.UnstructuredContent(), c.from)
		if fieldpath.IsNotFound(err) {
			return toComposed, patchSourceMissing, nil
		}
		if err != nil {
			return toComposed, patchApplied, fmt.Errorf("cannot read fromFieldPath: %w", err)
		}
		in = v
	}

	out, err := Transforms(p.Transforms, in)
	if err != nil {
		return toComposed, patchApplied, err
	}
	return toComposed, patchApplied, write(dst, c.to, out, c.merge)
}

// write writes a patched value to the destination path, expanding wildcards
// to every existing field they match.
func write(dst *fieldpath.Paved, to fieldpath.Segments, v any, mo *fieldpath.MergeOptions) error {
	if !to.HasWildcard() {
		if err := dst.MergeSegments(to, v, mo); err != nil {
			return fmt.Errorf("cannot write toFieldPath: %w", err)
		}
		return nil
	}
	paths, err := dst.ExpandSegments(to)
	if err != nil {
		return fmt.Errorf("cannot expand toFieldPath: %w", err)
	}
	if len(paths) == 0 {
		return fmt.Errorf("toFieldPath %s matches no existing field", to)
	}
	for _, path := range paths {
		if err := dst.MergeSegments(path, v, mo); err != nil {
			return fmt.Errorf("cannot write toFieldPath %s: %w", path, err)
		}
	}
	return nil
}

// mergeOptions returns how a patch writes its destination, from Crossplane
// v1's policy.mergeOptions or function-patch-and-transform's
// policy.toFieldPath. Nil means replace.
func mergeOptions(pp *v1.PatchPolicy) (*fieldpath.MergeOptions, error) {
	if pp == nil {
		return nil, nil
	}
	if pp.MergeOptions != nil && pp.ToFieldPath != nil {
		return nil, errors.New("policy.mergeOptions and policy.toFieldPath are mutually exclusive")
	}
	if pp.MergeOptions != nil {
		return &fieldpath.MergeOptions{KeepMapValues: pp.MergeOptions.IsKeepMapValues(), AppendSlice: pp.MergeOptions.IsAppendSlice()}, nil
	}
	if pp.ToFieldPath == nil {
		return nil, nil
	}
	switch *pp.ToFieldPath {
	case v1.ToFieldPathPolicyReplace, "":
		return nil, nil
	case v1.ToFieldPathPolicyMergeObjects, v1.ToFieldPathPolicyMergeObject:
		return &fieldpath.MergeOptions{KeepMapValues: true}, nil
	case v1.ToFieldPathPolicyMergeObjectsAppendArrays:
		return &fieldpath.MergeOptions{KeepMapValues: true, AppendSlice: true}, nil
	case v1.ToFieldPathPolicyForceMergeObjects:
		return &fieldpath.MergeOptions{}, nil
	case v1.ToFieldPathPolicyForceMergeObjectsAppendArrays, v1.ToFieldPathPolicyAppendArray:
		return &fieldpath.MergeOptions{AppendSlice: true}, nil
	}
	return nil, fmt.Errorf("unknown policy.toFieldPath %q (want Replace, MergeObjects, MergeObjectsAppendArrays, ForceMergeObjects or ForceMergeObjectsAppendArrays)", *pp.ToFieldPath)
}

// validatePolicy checks the fromFieldPath policy of a patch.
func validatePolicy(pp *v1.PatchPolicy) error {
	switch pp.GetFromFieldPathPolicy() {
	case v1.FromFieldPathPolicyOptional, v1.FromFieldPathPolicyRequired:
		return nil
	}
	return fmt.Errorf("unknown policy.fromFieldPath %q (want Optional or Required)", *pp.FromFieldPath)
}
