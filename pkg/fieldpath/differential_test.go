package fieldpath

import (
	"bufio"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	xp "github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"k8s.io/apimachinery/pkg/util/json"
)

// Loom keeps its own field path implementation because it renders the scale
// benchmark's Composition in half the CPU of crossplane-runtime's (see
// BenchmarkRenderBenchComposition in pkg/compose). FuzzDifferential holds
// the two to the same answers: every operation runs on the same inputs
// through both, and any difference in result, in error or no error, or in
// whether an error says "not found", fails. Its seeds are every field path
// of the repository's examples, tests and e2e manifests and of Crossplane
// v1.20.11's e2e manifests (testdata/paths.txt, made by
// testdata/paths.sh), each on a document where it exists.

// seedDoc is a composite resource with a little of everything: nested objects,
// arrays of objects and of scalars, keys with periods and slashes, a null.
const seedDoc = `{"apiVersion":"example.org/v1","kind":"XR","metadata":{"name":"x","uid":"u-1","generation":2,
"labels":{"crossplane.io/claim-name":"c","app.kubernetes.io/name":"n"},"annotations":{"crossplane.io/external-name":"e","a.b/c":"d"}},
"spec":{"parameters":{"size":"small","storageGB":20,"tags":["a","b"],"nested":{"deep":{"x":1.5}},"list":[{"name":"a","v":1},{"name":"b","v":null}]},
"forProvider":{"fields":{"size":"unset"},"region":"eu"},"nil":null,"empty":{},"emptyList":[],"0":"zero","*":"star"},
"status":{"atProvider":{"id":"i-1","fields":{"tier":"cache-s","selfLink":"s"}},"conditions":[{"type":"Ready","status":"True"}],"items":[[1,2],[3]]}}`

// seedPaths returns the field paths of testdata/paths.txt.
func seedPaths(f *testing.F) []string {
	fh, err := os.Open("testdata/paths.txt")
	if err != nil {
		f.Fatalf("cannot read the seed paths: %v", err)
	}
	defer fh.Close() //nolint:errcheck // Read only.
	var out []string
	s := bufio.NewScanner(fh)
	for s.Scan() {
		if l := s.Text(); !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	if err := s.Err(); err != nil {
		f.Fatalf("cannot read the seed paths: %v", err)
	}
	return out
}

func FuzzDifferential(f *testing.F) {
	values := []string{`"v"`, `1`, `{"k":"v","n":null}`, `["a","c"]`, `null`, `""`, `{}`, `[]`, `1.5`, `true`}
	for i, p := range seedPaths(f) {
		f.Add(seedDoc, p, values[i%len(values)], byte(i))
	}
	for _, c := range edgeCases {
		f.Add(c.doc, c.path, c.value, c.opts)
	}
	f.Fuzz(func(t *testing.T, doc, path, value string, opts byte) {
		differ(t, doc, path, decodeValue(value), opts)
	})
}

// decodeValue decodes value as JSON, or returns it as a string if it is not
// JSON.
func decodeValue(value string) any {
	var v any
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		return value
	}
	return v
}

// decodeDoc decodes doc as Kubernetes does (integers as int64), or returns a
// copy of seedDoc if doc is not a JSON object.
func decodeDoc(doc string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(doc), &m); err != nil || m == nil {
		_ = json.Unmarshal([]byte(seedDoc), &m)
	}
	return m
}

// result is what an operation returned, in a comparable form.
type result struct {
	Value    any
	Paths    []string
	Object   map[string]any
	Err      bool
	NotFound bool
	Panic    string
}

func (r result) String() string {
	return fmt.Sprintf("value=%#v paths=%q err=%t notFound=%t panic=%q object=%v", r.Value, r.Paths, r.Err, r.NotFound, r.Panic, r.Object)
}

// run calls fn, turning a panic into a result.
func run(fn func() result) (r result) {
	defer func() {
		if p := recover(); p != nil {
			r = result{Err: true, Panic: fmt.Sprint(p)}
		}
	}()
	return fn()
}

func errResult(err error, notFound func(error) bool) result {
	return result{Err: err != nil, NotFound: err != nil && notFound(err)}
}

// differ runs every operation on path through both implementations and fails
// t on any difference.
func differ(t *testing.T, doc, path string, value any, opts byte) {
	t.Helper()
	check := func(op string, loom, upstream result) {
		t.Helper()
		// An upstream panic is an error (controller-runtime recovers it as
		// one). After an error, what is left of the object is not compared:
		// both callers drop it.
		up := upstream
		up.Panic = ""
		if loom.Err || up.Err {
			loom.Object, up.Object = nil, nil
		}
		if loom.Panic != "" || !reflect.DeepEqual(loom, up) {
			t.Errorf("%s(%q) on %s differs:\nloom:     %s\nupstream: %s", op, path, doc, loom, upstream)
		}
	}

	// Parse.
	check("Parse", run(func() result {
		s, err := Parse(path)
		r := errResult(err, IsNotFound)
		if err == nil {
			r.Value = fmt.Sprintf("%+v", []Segment(s))
		}
		return r
	}), run(func() result {
		s, err := xp.Parse(path)
		r := errResult(err, xp.IsNotFound)
		if err == nil {
			conv := make([]Segment, len(s))
			for i := range s {
				conv[i] = Segment{Type: SegmentType(s[i].Type), Field: s[i].Field, Index: s[i].Index}
			}
			r.Value = fmt.Sprintf("%+v", conv)
		}
		return r
	}))

	// Get.
	check("GetValue", run(func() result {
		v, err := Pave(decodeDoc(doc)).GetValue(path)
		r := errResult(err, IsNotFound)
		r.Value = v
		return r
	}), run(func() result {
		v, err := xp.Pave(decodeDoc(doc)).GetValue(path)
		r := errResult(err, xp.IsNotFound)
		r.Value = v
		return r
	}))

	// Set.
	check("SetValue", run(func() result {
		p := Pave(decodeDoc(doc))
		r := errResult(p.SetValue(path, value), IsNotFound)
		r.Object = p.UnstructuredContent()
		return r
	}), run(func() result {
		p := xp.Pave(decodeDoc(doc))
		r := errResult(p.SetValue(path, value), xp.IsNotFound)
		r.Object = p.UnstructuredContent()
		return r
	}))

	// Delete.
	check("DeleteField", run(func() result {
		p := Pave(decodeDoc(doc))
		r := errResult(p.DeleteField(path), IsNotFound)
		r.Object = p.UnstructuredContent()
		return r
	}), run(func() result {
		p := xp.Pave(decodeDoc(doc))
		r := errResult(p.DeleteField(path), xp.IsNotFound)
		r.Object = p.UnstructuredContent()
		return r
	}))

	// Expand wildcards. Upstream expands an object's keys in map order, Loom
	// in sorted order: compare as sets.
	check("ExpandWildcards", run(func() result {
		paths, err := Pave(decodeDoc(doc)).ExpandWildcards(path)
		r := errResult(err, IsNotFound)
		r.Paths = sortedOrNil(paths)
		return r
	}), run(func() result {
		paths, err := xp.Pave(decodeDoc(doc)).ExpandWildcards(path)
		r := errResult(err, xp.IsNotFound)
		r.Paths = sortedOrNil(paths)
		return r
	}))

	// Merge, with the options opts selects: none, or KeepMapValues and
	// AppendSlice from its low bits.
	var mo *MergeOptions
	var xmo *xp.MergeOptions
	if opts&4 != 0 {
		keep, appendSlice := opts&1 != 0, opts&2 != 0
		mo = &MergeOptions{KeepMapValues: keep, AppendSlice: appendSlice}
		xmo = &xp.MergeOptions{KeepMapValues: &keep, AppendSlice: &appendSlice}
	}
	check(fmt.Sprintf("MergeValue[%+v]", mo), run(func() result {
		p := Pave(decodeDoc(doc))
		r := errResult(p.MergeValue(path, value, mo), IsNotFound)
		r.Object = p.UnstructuredContent()
		return r
	}), run(func() result {
		p := xp.Pave(decodeDoc(doc))
		r := errResult(p.MergeValue(path, value, xmo), xp.IsNotFound)
		r.Object = p.UnstructuredContent()
		return r
	}))
}

func sortedOrNil(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Sorted(slices.Values(s))
}
