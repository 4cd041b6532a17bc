package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/loomxr/loom/pkg/condition"
)

// Kinds that define other kinds. They are applied first, and the kinds
// they define are waited for before the rest is applied.
var (
	crdGK  = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	xrdGK  = schema.GroupKind{Group: "apiextensions.crossplane.io", Kind: "CompositeResourceDefinition"}
	compGK = schema.GroupKind{Group: "apiextensions.crossplane.io", Kind: "Composition"}
	nsGK   = schema.GroupKind{Kind: "Namespace"}
)

// ReadManifests reads every object in paths. A path is a file or a folder;
// folders are walked recursively for .yaml, .yml and .json files in
// lexical order. Files may hold several YAML documents; empty documents
// are skipped. A path that does not exist is an error.
func ReadManifests(paths ...string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, p := range paths {
		var files []string
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch strings.ToLower(filepath.Ext(path)) {
			case ".yaml", ".yml", ".json":
				if !d.IsDir() {
					files = append(files, path)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("cannot read manifests in %s: %w", p, err)
		}
		sort.Strings(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("cannot read %s: %w", f, err)
			}
			o, err := DecodeManifests(b)
			if err != nil {
				return nil, fmt.Errorf("cannot decode %s: %w", f, err)
			}
			objs = append(objs, o...)
		}
	}
	return objs, nil
}

// DecodeManifests decodes a stream of YAML documents or JSON objects.
// Every object must have apiVersion and kind; empty documents are skipped.
func DecodeManifests(b []byte) ([]*unstructured.Unstructured, error) {
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var objs []*unstructured.Unstructured
	for i := 0; ; i++ {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			return nil, fmt.Errorf("document %d: apiVersion and kind are required", i)
		}
		objs = append(objs, u)
	}
}

// applier server-side-applies unstructured objects, discovering their
// resources as it goes.
type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	logf   func(string, ...any)
}

func newApplier(rc *rest.Config, logf func(string, ...any)) (*applier, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create dynamic client: %w", err)
	}
	return &applier{
		dyn:    dyn,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		logf:   logf,
	}, nil
}

// resource maps o to its resource client. A kind the API server does not
// serve yet (its CRD is still being created) is retried with fresh
// discovery until ctx ends.
func (a *applier) resource(ctx context.Context, o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	for {
		m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err == nil {
			if m.Scope.Name() == meta.RESTScopeNameNamespace {
				ns := o.GetNamespace()
				if ns == "" {
					ns = metav1.NamespaceDefault
				}
				return a.dyn.Resource(m.Resource).Namespace(ns), nil
			}
			return a.dyn.Resource(m.Resource), nil
		}
		if !meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("cannot map %s: %w", gvk, err)
		}
		a.mapper.Reset()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cannot apply %s %q: the API server does not serve its kind: %w", gvk.Kind, o.GetName(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// apply server-side-applies each object in order and returns the objects
// as the API server stored them.
func (a *applier) apply(ctx context.Context, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		ri, err := a.resource(ctx, o)
		if err != nil {
			return out, err
		}
		o = o.DeepCopy()
		o.SetResourceVersion("")
		o.SetManagedFields(nil)
		got, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		if err != nil {
			return out, fmt.Errorf("cannot apply %s %q: %w", o.GetKind(), objectName(o), err)
		}
		out = append(out, got)
	}
	return out, nil
}

// waitEstablished waits until every named CRD reports Established=True.
func (a *applier) waitEstablished(ctx context.Context, names []string) error {
	crds := a.dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, n := range names {
		err := waitUntil(ctx, 200*time.Millisecond, func(ctx context.Context) error {
			crd, err := crds.Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !condition.IsTrue(crd, "Established") {
				return fmt.Errorf("CRD %s is not Established yet", n)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("cannot wait for CRD %s: %w", n, err)
		}
	}
	// Discovery learns about new kinds only when asked again.
	a.mapper.Reset()
	return nil
}

// Apply reads the manifests in paths (see ReadManifests) and applies them
// with ApplyObjects.
func (s *Stack) Apply(ctx context.Context, paths ...string) ([]*unstructured.Unstructured, error) {
	objs, err := ReadManifests(paths...)
	if err != nil {
		return nil, err
	}
	return s.ApplyObjects(ctx, objs...)
}

// ApplyObjects server-side-applies objects (field manager FieldManager,
// forcing conflicts) as the admin and returns them as stored. It applies
// in dependency order: Namespaces and CustomResourceDefinitions, then
// CompositeResourceDefinitions and Compositions; it waits for the CRDs and
// for the CRDs the XRDs define (the XR and, if claimNames is set, the
// claim) to be Established; then it applies everything else in the given
// order. Objects of a kind the API server does not serve yet are retried
// until ctx ends, so ctx bounds the whole call. It is idempotent.
func (s *Stack) ApplyObjects(ctx context.Context, objs ...*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	a, err := newApplier(s.RESTConfig(), s.logf)
	if err != nil {
		return nil, err
	}
	return applyOrdered(ctx, a, objs)
}

func applyOrdered(ctx context.Context, a *applier, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	var first, second, rest []*unstructured.Unstructured
	var crds []string
	for _, o := range objs {
		switch o.GroupVersionKind().GroupKind() {
		case nsGK:
			first = append(first, o)
		case crdGK:
			first = append(first, o)
			crds = append(crds, o.GetName())
		case xrdGK, compGK:
			second = append(second, o)
		default:
			rest = append(rest, o)
		}
	}
	out, err := a.apply(ctx, first)
	if err != nil {
		return out, err
	}
	applied, err := a.apply(ctx, second)
	out = append(out, applied...)
	if err != nil {
		return out, err
	}
	for _, o := range second {
		if o.GroupVersionKind().GroupKind() == xrdGK {
			crds = append(crds, xrdCRDNames(o)...)
		}
	}
	if len(second) > 0 && len(crds) > 0 {
		// XRDs' CRDs come from the renderer; say what we wait for.
		a.logf("waiting for %d CRDs to be Established: %s", len(crds), strings.Join(crds, ", "))
	}
	if err := a.waitEstablished(ctx, crds); err != nil {
		return out, err
	}
	applied, err = a.apply(ctx, rest)
	return append(out, applied...), err
}

// xrdCRDNames returns the names of the CRDs a CompositeResourceDefinition
// defines: the composite resource's and, if it offers one, the claim's.
func xrdCRDNames(xrd *unstructured.Unstructured) []string {
	group, _, _ := unstructured.NestedString(xrd.Object, "spec", "group")
	var names []string
	if p, _, _ := unstructured.NestedString(xrd.Object, "spec", "names", "plural"); p != "" {
		names = append(names, p+"."+group)
	}
	if p, _, _ := unstructured.NestedString(xrd.Object, "spec", "claimNames", "plural"); p != "" {
		names = append(names, p+"."+group)
	}
	return names
}

func objectName(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetName()
}

// waitUntil calls f every interval until it returns nil or ctx ends; the error
// then names f's last failure.
func waitUntil(ctx context.Context, interval time.Duration, f func(context.Context) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := f(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}
