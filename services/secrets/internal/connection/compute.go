package connection

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/compose"
)

// ErrInvalid matches errors caused by a Composition whose connection details
// are not valid: computing again fails the same way until it changes.
var ErrInvalid = errors.New("invalid connection details")

// An Observed composed resource, as the connection details see it.
type Observed struct {
	// Name is the composition resource name (the resource's
	// crossplane.io/composition-resource-name annotation).
	Name string
	// Object is the resource's content; nil if it does not exist (yet).
	Object map[string]any
	// Prefix is the resource's own AnnotationPrefix, used when its template
	// sets none (resources that functions compose have no template).
	Prefix string
	// HasSecretRef says the resource names a connection Secret
	// (spec.writeConnectionSecretToRef).
	HasSecretRef bool
	// Secret is the data of that Secret; nil if it does not exist (yet)
	// or was not read.
	Secret map[string][]byte
}

// Input is everything Compute reads.
type Input struct {
	// Plan is what the Composition says.
	Plan Plan
	// Resources are the composed resources the XR references, in any order.
	Resources []Observed
	// Keys are the XRD's connectionSecretKeys: when not empty, the only keys
	// published.
	Keys []string
	// Returned are the connection details the XR's function pipeline
	// returned (Plan.Pipeline only), and HasReturned whether the renderer
	// has handed them over at all: until it has, nothing is complete.
	Returned    map[string][]byte
	HasReturned bool
}

// A Conflict is a key that several composed resources' Secrets hold when
// the Composition aggregates. The last template wins.
type Conflict struct {
	// Key is the key, with its prefix.
	Key string
	// Templates hold the key, in template order; the last one wins.
	Templates []string
}

// String describes the conflict, for a Warning event. It names keys and
// templates, never values.
func (c Conflict) String() string {
	return fmt.Sprintf("connection secret key %q is held by the connection Secrets of %s; %q wins (template order)",
		c.Key, quoteJoin(c.Templates), c.Templates[len(c.Templates)-1])
}

// Result is the content of the XR's connection Secret and what is wrong with
// it.
type Result struct {
	// Data is the Secret's data.
	Data map[string][]byte
	// Conflicts are keys held by several Secrets when the Composition
	// aggregates, sorted by key. Only keys that are published are listed.
	Conflicts []Conflict
	// Missing are keys the XRD declares that the Composition cannot provide
	// (sorted): no connection detail writes them. Never set when the
	// Composition aggregates.
	Missing []string
	// Absent are keys that are expected but not available yet (sorted): the
	// XRD's keys that are not missing, or, when the XRD declares none, every
	// key the Composition's connection details name.
	Absent []string
	// Filtered are keys dropped because the XRD does not declare them
	// (sorted). Key names only; for debug logs.
	Filtered []string
	// Pending are the templates (sorted) whose resource does not exist yet,
	// or names a connection Secret that does not exist yet, among those
	// that contribute: every template when the Composition aggregates,
	// those with connection details otherwise. Never set for a pipeline.
	Pending []string
	// Complete is true when nothing more is expected: no expected key is
	// absent, or, for an aggregating Composition whose XRD declares no
	// keys, no template is pending. A pipeline is never complete before
	// its returned details are known (Input.HasReturned).
	Complete bool
}

// Compute returns the XR connection Secret's content. It fails only for
// connection details that are not valid (ErrInvalid), naming the template
// and the detail.
func Compute(in Input) (Result, error) {
	byName := make(map[string]Observed, len(in.Resources))
	for _, o := range in.Resources {
		byName[o.Name] = o
	}
	var res Result
	var data map[string][]byte
	var err error
	switch {
	case in.Plan.Pipeline:
		data = maps.Clone(in.Returned)
	case in.Plan.Aggregate:
		data, res.Conflicts, res.Pending = aggregate(in.Plan, in.Resources, byName)
	default:
		data, res.Pending, err = explicit(in.Plan, byName)
		if err != nil {
			return Result{}, err
		}
	}

	res.Data = data
	if len(in.Keys) > 0 {
		res.Data = make(map[string][]byte, len(in.Keys))
		for k, v := range data {
			if slices.Contains(in.Keys, k) {
				res.Data[k] = v
			} else {
				res.Filtered = append(res.Filtered, k)
			}
		}
		slices.Sort(res.Filtered)
		res.Conflicts = slices.DeleteFunc(res.Conflicts, func(c Conflict) bool { return !slices.Contains(in.Keys, c.Key) })
	}

	provides, known := in.Plan.Provides()
	var expected []string
	switch {
	case len(in.Keys) > 0:
		for _, k := range in.Keys {
			if known && !slices.Contains(provides, k) {
				res.Missing = append(res.Missing, k)
				continue
			}
			expected = append(expected, k)
		}
	case known:
		expected = provides
	}
	for _, k := range expected {
		if _, ok := res.Data[k]; !ok {
			res.Absent = append(res.Absent, k)
		}
	}
	res.Missing = sortedUnique(res.Missing)
	res.Absent = sortedUnique(res.Absent)
	res.Complete = len(res.Absent) == 0 && (known || len(in.Keys) > 0 || len(res.Pending) == 0) && (!in.Plan.Pipeline || in.HasReturned)
	if len(res.Data) == 0 {
		res.Data = nil
	}
	return res, nil
}

// explicit applies the templates' connection details in template order; a
// later detail of the same name wins.
func explicit(p Plan, byName map[string]Observed) (map[string][]byte, []string, error) {
	data := map[string][]byte{}
	var pending []string
	for _, t := range p.Templates {
		if len(t.Details) == 0 {
			continue
		}
		o := byName[t.Name]
		if o.Object == nil {
			pending = append(pending, t.Name)
		}
		cds, err := compose.ExtractConnectionDetails(t.Name, o.Object, t.Details)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: template %q: %w", ErrInvalid, t.Name, err)
		}
		needsSecret := false
		for _, cd := range cds {
			switch cd.Type {
			case v1.ConnectionDetailTypeFromConnectionSecretKey:
				needsSecret = true
				if v, ok := o.Secret[cd.FromConnectionSecretKey]; ok {
					data[cd.Name] = v
				}
			default:
				data[cd.Name] = []byte(cd.Value)
			}
		}
		if needsSecret && o.Object != nil && o.HasSecretRef && o.Secret == nil {
			pending = append(pending, t.Name)
		}
	}
	return data, sortedUnique(pending), nil
}

// aggregate is the union of the composed resources' Secrets in template
// order, then resources without a template by name.
func aggregate(p Plan, resources []Observed, byName map[string]Observed) (map[string][]byte, []Conflict, []string) {
	type source struct {
		name, prefix string
		o            Observed
	}
	var order []source
	seen := map[string]bool{}
	for _, t := range p.Templates {
		seen[t.Name] = true
		o := byName[t.Name]
		prefix := t.Prefix
		if prefix == "" {
			prefix = o.Prefix
		}
		order = append(order, source{name: t.Name, prefix: prefix, o: o})
	}
	var extra []source
	for _, o := range resources {
		if !seen[o.Name] {
			seen[o.Name] = true
			extra = append(extra, source{name: o.Name, prefix: o.Prefix, o: o})
		}
	}
	slices.SortFunc(extra, func(a, b source) int { return strings.Compare(a.name, b.name) })
	order = append(order, extra...)

	data := map[string][]byte{}
	holders := map[string][]string{}
	var pending []string
	for _, s := range order {
		if s.o.Object == nil || (s.o.HasSecretRef && s.o.Secret == nil) {
			pending = append(pending, s.name)
		}
		for _, k := range slices.Sorted(maps.Keys(s.o.Secret)) {
			key := s.prefix + k
			data[key] = s.o.Secret[k]
			holders[key] = append(holders[key], s.name)
		}
	}
	var conflicts []Conflict
	for _, k := range slices.Sorted(maps.Keys(holders)) {
		if h := holders[k]; len(h) > 1 {
			conflicts = append(conflicts, Conflict{Key: k, Templates: h})
		}
	}
	return data, conflicts, sortedUnique(pending)
}

func sortedUnique(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	slices.Sort(s)
	return slices.Compact(s)
}

func quoteJoin(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}
