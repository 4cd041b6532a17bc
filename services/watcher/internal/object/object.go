// Package object is the watcher's trimmed view of API objects: the informer
// transforms that strip everything the watcher does not read before an object
// is cached, and the accessors that read what is left.
//
// The watcher caches every object it watches, so what it keeps decides its
// memory. It keeps object metadata (minus annotations, managed fields,
// finalizers and owner references other than the controller) and, only for the
// kinds that need them, a handful of spec fields:
//
//   - CompositeResourceDefinitions: spec.group, spec.names.kind,
//     spec.claimNames.kind and spec.versions[].{name,referenceable,served};
//   - CustomResourceDefinitions: spec.group, spec.names.{kind,plural},
//     spec.scope, spec.versions[].{name,served} and status.conditions[].{type,status};
//   - Compositions: the apiVersion and kind of every template's base, in
//     spec.resources[] and in spec.pipeline[].input.resources[] (the input of
//     function-patch-and-transform);
//   - XRs: spec.claimRef and the apiVersion and kind of spec.resourceRefs[]
//     (also under spec.crossplane, where Crossplane's modern XRs keep them);
//   - claims: spec.resourceRef.
package object

import (
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Well-known labels.
const (
	// LabelComposite is set on every composed resource; its value names the
	// root XR.
	LabelComposite = "crossplane.io/composite"
)

// Shape says which spec fields of an object the watcher keeps. Shapes combine
// with |.
type Shape uint8

// Shapes of the kinds whose spec the watcher reads.
const (
	ShapeXRD Shape = 1 << iota
	ShapeCRD
	ShapeComposition
	ShapeXR
	ShapeClaim
	ShapeRevision
	ShapeRule
)

// fields is a tree of kept field names. A nil subtree keeps the whole value.
// Lists are walked element by element with the same subtree.
type fields map[string]fields

var (
	metadataFields = fields{ //nolint:gochecknoglobals // Treated as a constant.
		"name": nil, "namespace": nil, "uid": nil, "resourceVersion": nil,
		"generation": nil, "labels": nil, "deletionTimestamp": nil,
		"ownerReferences": nil, // filtered to the controller separately
	}
	shapeFields = map[Shape]fields{ //nolint:gochecknoglobals // Treated as a constant.
		ShapeXRD: {"spec": {
			"group":      nil,
			"names":      {"kind": nil},
			"claimNames": {"kind": nil},
			"versions":   {"name": nil, "referenceable": nil, "served": nil},
		}},
		ShapeCRD: {
			"spec": {
				"group":    nil,
				"names":    {"kind": nil, "plural": nil},
				"scope":    nil,
				"versions": {"name": nil, "served": nil},
			},
			"status": {"conditions": {"type": nil, "status": nil}},
		},
		ShapeComposition: {"spec": {
			"mode":      nil,
			"resources": {"base": {"apiVersion": nil, "kind": nil}},
			"pipeline":  {"input": {"resources": {"base": {"apiVersion": nil, "kind": nil}}}},
		}},
		ShapeXR: {"spec": {
			"claimRef":               nil,
			"resourceRefs":           {"apiVersion": nil, "kind": nil},
			"compositionRef":         {"name": nil},
			"compositionRevisionRef": {"name": nil},
			"crossplane": {
				"claimRef":               nil,
				"resourceRefs":           {"apiVersion": nil, "kind": nil},
				"compositionRef":         {"name": nil},
				"compositionRevisionRef": {"name": nil},
			},
		}},
		ShapeClaim:    {"spec": {"resourceRef": nil}},
		ShapeRevision: {"spec": {"mode": nil}},
		ShapeRule: {"spec": {
			"for": {"apiVersion": nil, "kind": nil},
			"references": {
				"target":         {"apiVersion": nil, "kind": nil},
				"valueField":     nil,
				"referenceField": nil,
				"selectorField":  nil,
				"referenceShape": nil,
				"waitFor":        {"conditionType": nil},
				"policy":         {"resolve": nil},
			},
		}},
	}
)

func (s Shape) fields() fields {
	f := fields{"apiVersion": nil, "kind": nil, "metadata": metadataFields}
	for sh, sf := range shapeFields {
		if s&sh != 0 {
			f = merge(f, sf)
		}
	}
	return f
}

// merge returns the union of two trees.
func merge(a, b fields) fields {
	out := fields{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		av, ok := out[k]
		switch {
		case !ok:
			out[k] = v
		case av == nil || v == nil:
			out[k] = nil
		default:
			out[k] = merge(av, v)
		}
	}
	return out
}

// Transform returns an informer transform that keeps what the shape needs of
// an unstructured object and metadata-only fields of a metadata object. It is
// idempotent (client-go may hand it an object it already transformed) and
// leaves other types, such as deletion tombstones, alone.
func Transform(s Shape) cache.TransformFunc {
	keep := s.fields()
	return func(obj any) (any, error) {
		switch o := obj.(type) {
		case *unstructured.Unstructured:
			out := &unstructured.Unstructured{Object: prune(o.Object, keep)}
			keepController(out)
			ann := digestAnnotations(o.GetAnnotations(), o.GetFinalizers())
			if s&ShapeXR != 0 {
				ann = with(ann, AnnotationStatus, statusSummary(o))
			} else {
				if r := readyStatus(o); r != "" {
					ann = with(ann, AnnotationReady, r)
				}
				ann = with(ann, AnnotationStatusFields, statusFields(o))
				ann = with(ann, AnnotationReadyCondition, readyCondition(o))
			}
			if s&(ShapeComposition|ShapeRevision) != 0 {
				ann = with(ann, AnnotationReadsStatus, readsStatus(o))
				ann = with(ann, AnnotationDetailsFromStatus, detailsFromStatus(o))
				ann = with(ann, AnnotationReadsComposedSpec, readsComposedSpec(o))
				ann = with(ann, AnnotationReadsComposedStatus, readsComposedStatus(o))
				ann = with(ann, AnnotationDetailsFromSpec, detailsFromSpec(o))
				ann = with(ann, AnnotationReadyRequired, readyRequired(o))
				ann = with(ann, AnnotationStatusToSpec, statusToSpec(o))
			}
			if s&(ShapeXR|ShapeClaim) != 0 {
				ann = with(ann, AnnotationPropagated, propagatedSummary(o))
			}
			if w := writersOf(o); w != "" {
				ann = with(ann, AnnotationWriters, w)
			}
			out.SetAnnotations(ann)
			return out, nil
		case *metav1.PartialObjectMetadata:
			return stripMetadata(o), nil
		default:
			return obj, nil
		}
	}
}

func prune(in map[string]any, keep fields) map[string]any {
	out := make(map[string]any, len(keep))
	for k, sub := range keep {
		v, ok := in[k]
		if !ok {
			continue
		}
		if sub == nil {
			out[k] = v
			continue
		}
		switch tv := v.(type) {
		case map[string]any:
			out[k] = prune(tv, sub)
		case []any:
			l := make([]any, 0, len(tv))
			for _, e := range tv {
				if m, ok := e.(map[string]any); ok {
					l = append(l, prune(m, sub))
				}
			}
			out[k] = l
		}
	}
	return out
}

func keepController(u *unstructured.Unstructured) {
	refs := u.GetOwnerReferences()
	if len(refs) == 0 {
		return
	}
	if c := controllerOf(refs); c != nil {
		u.SetOwnerReferences([]metav1.OwnerReference{*c})
		return
	}
	u.SetOwnerReferences(nil)
}

func stripMetadata(in *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	out := &metav1.PartialObjectMetadata{TypeMeta: in.TypeMeta}
	out.Name = in.Name
	out.Namespace = in.Namespace
	out.UID = in.UID
	out.ResourceVersion = in.ResourceVersion
	out.Generation = in.Generation
	out.Labels = in.Labels
	out.DeletionTimestamp = in.DeletionTimestamp
	out.Annotations = digestAnnotations(in.Annotations, in.Finalizers)
	if w := writersOf(in); w != "" {
		out.Annotations = with(out.Annotations, AnnotationWriters, w)
	}
	if c := controllerOf(in.OwnerReferences); c != nil {
		out.OwnerReferences = []metav1.OwnerReference{*c}
	}
	return out
}

// AnnotationDigest is the one annotation a cached object keeps: a digest of
// the annotations and finalizers it was cached without, so that the watcher
// can tell a change of them from a change of the status alone. It exists
// only in the watcher's cache, never on the API server.
const AnnotationDigest = "loom.dev/watcher-metadata-digest"

// digestAnnotations returns the cached object's annotations: the digest of
// annotations and finalizers. Input that is already cached (holding just
// the watcher's own annotations, no finalizers) keeps its digest, keeping
// Transform idempotent; the other annotations of the watcher's are left to
// the caller.
func digestAnnotations(annotations map[string]string, finalizers []string) map[string]string {
	user := 0
	for k := range annotations {
		if !watcherAnnotation(k) {
			user++
		}
	}
	if d, ok := annotations[AnnotationDigest]; ok && user == 0 && len(finalizers) == 0 {
		return map[string]string{AnnotationDigest: d}
	}
	if user == 0 && len(finalizers) == 0 {
		return nil
	}
	h := fnv.New64a()
	keys := slices.Sorted(maps.Keys(annotations))
	for _, k := range keys {
		if watcherAnnotation(k) {
			continue
		}
		_, _ = io.WriteString(h, k)
		_, _ = h.Write([]byte{0})
		_, _ = io.WriteString(h, annotations[k])
		_, _ = h.Write([]byte{0})
	}
	_, _ = h.Write([]byte{1})
	for _, f := range finalizers {
		_, _ = io.WriteString(h, f)
		_, _ = h.Write([]byte{0})
	}
	return map[string]string{AnnotationDigest: strconv.FormatUint(h.Sum64(), 16)}
}

// watcherAnnotation reports whether an annotation is one the watcher keeps
// on cached objects.
func watcherAnnotation(k string) bool {
	return k == AnnotationDigest || k == AnnotationStatus || k == AnnotationWriters || k == AnnotationReady ||
		k == AnnotationStatusFields || k == AnnotationReadsStatus || k == AnnotationPropagated ||
		k == AnnotationDetailsFromStatus || k == AnnotationReadsComposedSpec || k == AnnotationDetailsFromSpec ||
		k == AnnotationReadyCondition || k == AnnotationReadsComposedStatus || k == AnnotationReadyRequired ||
		k == AnnotationStatusToSpec
}

// with returns m with k set to v, creating m if it is nil.
func with(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

func controllerOf(refs []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range refs {
		if refs[i].Controller != nil && *refs[i].Controller {
			return &refs[i]
		}
	}
	return nil
}

// Meta is what the watcher knows of any object it caches.
type Meta struct {
	GVK             schema.GroupVersionKind
	Namespace       string
	Name            string
	UID             types.UID
	ResourceVersion string
	Generation      int64
	Labels          map[string]string
	// Controller is the controller owner reference, if any.
	Controller *metav1.OwnerReference
	// Deleting is true once the object has a deletion timestamp.
	Deleting bool
	// Digest summarises the annotations and finalizers (AnnotationDigest);
	// empty when the object has neither.
	Digest string
	// Status summarises an XR's status (AnnotationStatus); empty for other
	// kinds.
	Status string
	// Writers summarises the managed fields (AnnotationWriters).
	Writers string
	// Ready is the status of the Ready condition of an XR (from Status) or
	// of another object cached in full (AnnotationReady).
	Ready string
	// StatusFields summarises the status outside its conditions of an
	// object cached in full other than an XR (AnnotationStatusFields);
	// empty for other objects.
	StatusFields string
	// ReadyCondition summarises the Ready condition of an object cached in
	// full other than an XR (AnnotationReadyCondition); empty for other
	// objects.
	ReadyCondition string
	// Propagated summarises what the binder copies from an XR back to its
	// claim, on an XR or a claim (AnnotationPropagated); empty for other
	// kinds.
	Propagated string
}

// StatusOnly reports whether a change from old to cur touched nothing but
// the status: the generation (which the API server bumps for any change of
// the spec of an object with a status subresource), labels, annotations,
// finalizers, deletion and controller are as they were. It is meaningful
// only for kinds with a status subresource, such as XRs and claims.
func StatusOnly(old, cur Meta) bool {
	return old.UID == cur.UID && old.Generation == cur.Generation && cur.Generation != 0 &&
		maps.Equal(old.Labels, cur.Labels) && old.Digest == cur.Digest &&
		old.Deleting == cur.Deleting && controllerUID(old.Controller) == controllerUID(cur.Controller)
}

func controllerUID(r *metav1.OwnerReference) types.UID {
	if r == nil {
		return ""
	}
	return r.UID
}

// MetaOf returns the metadata of a cached object, unwrapping a deletion
// tombstone. The object's kind is gvk: metadata-only objects do not carry
// their own.
func MetaOf(gvk schema.GroupVersionKind, obj any) (Meta, error) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return Meta{}, fmt.Errorf("cannot read metadata of %T", obj)
	}
	ann := o.GetAnnotations()
	ready, ok := ann[AnnotationReady]
	if s, has := ann[AnnotationStatus]; !ok && has {
		ready, _, _ = strings.Cut(s, "/")
	}
	return Meta{
		GVK:             gvk,
		Namespace:       o.GetNamespace(),
		Name:            o.GetName(),
		UID:             o.GetUID(),
		ResourceVersion: o.GetResourceVersion(),
		Generation:      o.GetGeneration(),
		Labels:          o.GetLabels(),
		Controller:      controllerOf(o.GetOwnerReferences()),
		Deleting:        o.GetDeletionTimestamp() != nil,
		Digest:          o.GetAnnotations()[AnnotationDigest],
		Status:          o.GetAnnotations()[AnnotationStatus],
		Writers:         o.GetAnnotations()[AnnotationWriters],
		Ready:           ready,
		StatusFields:    ann[AnnotationStatusFields],
		ReadyCondition:  ann[AnnotationReadyCondition],
		Propagated:      ann[AnnotationPropagated],
	}, nil
}

// Unstructured returns the cached unstructured object, unwrapping a deletion
// tombstone, or nil when obj is not one.
func Unstructured(obj any) *unstructured.Unstructured {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}
