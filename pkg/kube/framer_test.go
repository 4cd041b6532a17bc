package kube

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// frames reads every frame of fr with a buffer of size n, joining the parts
// of frames that do not fit, as client-go's streaming decoder does, and
// returns them with the error that ended the stream.
func frames(fr io.ReadCloser, n int) ([]string, error) {
	var out []string
	buf := make([]byte, n)
	var part []byte
	for {
		m, err := fr.Read(buf)
		part = append(part, buf[:m]...)
		switch {
		case errors.Is(err, io.ErrShortBuffer):
			continue
		case err != nil:
			return out, err
		}
		out = append(out, string(part))
		part = nil
	}
}

// TestObjectFramer checks that the watch stream's frames are the JSON
// objects client-go's framer finds, whatever the stream's chunks and the
// caller's buffer, and that a stream cut inside an object, or holding
// something other than an object, is an error.
func TestObjectFramer(t *testing.T) {
	stream := `{"type":"ADDED","object":{"kind":"X","metadata":{"name":"a"}}}
{"type":"MODIFIED","object":{"s":"a } ] { [ \" \\ \\\" \u00e9 é","n":[1,2.5e3,-0,true,false,null,[],{}]}}

  {"type":"DELETED","object":{"s":"\\"}}` + "\n\t" + `{"a":{"b":{"c":[{"d":"}"}]}}}` + "\n"
	long := `{"type":"ADDED","object":{"data":"` + strings.Repeat("x{\\\"}", 30000) + `"}}` + "\n"

	for name, s := range map[string]string{"Objects": stream, "LongerThanARead": long + stream + long} {
		want, err := frames(json.Framer.NewFrameReader(io.NopCloser(strings.NewReader(s))), 1<<20)
		if !errors.Is(err, io.EOF) {
			t.Fatalf("%s: client-go's framer: %v", name, err)
		}
		for _, n := range []int{1 << 20, 64, 7} {
			for chunks, r := range map[string]func() io.Reader{
				"Whole":   func() io.Reader { return strings.NewReader(s) },
				"OneByte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
				"Halves":  func() io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
			} {
				got, err := frames(objectFramer{}.NewFrameReader(io.NopCloser(r())), n)
				if !errors.Is(err, io.EOF) {
					t.Errorf("%s, %s, buffer %d: the stream ended with %v; want io.EOF", name, chunks, n, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s, %s, buffer %d: frames: -client-go, +ours:\n%s", name, chunks, n, diff)
				}
			}
		}
	}

	for name, tc := range map[string]struct {
		stream string
		want   error
	}{
		"CutInsideAnObject": {stream: `{"type":"ADDED"}` + "\n" + `{"type":"ADDED","object":{"s":"}"`, want: io.ErrUnexpectedEOF},
		"CutInsideAString":  {stream: `{"type":"ADDED","object":{"s":"\"}}`, want: io.ErrUnexpectedEOF},
	} {
		got, err := frames(objectFramer{}.NewFrameReader(io.NopCloser(strings.NewReader(tc.stream))), 64)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: the stream ended with %v after %d frames; want %v", name, err, len(got), tc.want)
		}
	}
	if _, err := frames(objectFramer{}.NewFrameReader(io.NopCloser(strings.NewReader(`{"a":1} [1]`))), 64); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("a stream holding an array: error %v; want one that says it is no object", err)
	}
}

// BenchmarkFramer reads a watch stream of 1,000 events of a composed
// resource's size through client-go's JSON framer and through objectFramer.
func BenchmarkFramer(b *testing.B) {
	ev := `{"type":"MODIFIED","object":{"apiVersion":"nop.crossplane.io/v1alpha1","kind":"NopResource","metadata":{"name":"db-00001-x7k2p-4c8e1f","uid":"1f0c2a9e-1b7d-4e5a-9c3f-8d2e6a4b7c10","resourceVersion":"123456","generation":2,"labels":{"crossplane.io/composite":"db-00001-x7k2p","crossplane.io/claim-name":"db-00001","crossplane.io/claim-namespace":"bench"},"annotations":{"crossplane.io/composition-resource-name":"database","crossplane.io/external-name":"db-00001-x7k2p-4c8e1f"},"ownerReferences":[{"apiVersion":"bench.loom.dev/v1alpha1","kind":"XBenchDB","name":"db-00001-x7k2p","uid":"6b1e0d4c-2a3f-4e5b-8c7d-9e0f1a2b3c4d","controller":true,"blockOwnerDeletion":true}],"managedFields":[{"manager":"loom-renderer","operation":"Apply","apiVersion":"nop.crossplane.io/v1alpha1","time":"2026-11-28T16:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{"f:crossplane.io/composition-resource-name":{},"f:crossplane.io/external-name":{}},"f:labels":{"f:crossplane.io/claim-name":{},"f:crossplane.io/claim-namespace":{},"f:crossplane.io/composite":{}},"f:ownerReferences":{"k:{\"uid\":\"6b1e0d4c-2a3f-4e5b-8c7d-9e0f1a2b3c4d\"}":{}}},"f:spec":{"f:forProvider":{"f:conditionAfter":{},"f:fields":{"f:size":{},"f:region":{}}}}}},{"manager":"provider-nop","operation":"Update","apiVersion":"nop.crossplane.io/v1alpha1","time":"2026-11-28T16:00:01Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:atProvider":{"f:id":{}},"f:conditions":{}}},"subresource":"status"}]},"spec":{"forProvider":{"conditionAfter":[{"conditionType":"Ready","conditionStatus":"True","time":"1s"}],"fields":{"size":"small","region":"eu-west-1"}},"deletionPolicy":"Delete"},"status":{"atProvider":{"id":"db-00001-x7k2p-4c8e1f"},"conditions":[{"type":"Ready","status":"True","reason":"Available","lastTransitionTime":"2026-11-28T16:00:01Z"},{"type":"Synced","status":"True","reason":"ReconcileSuccess","lastTransitionTime":"2026-11-28T16:00:01Z"}]}}}` + "\n"
	stream := strings.Repeat(ev, 1000)
	for name, fr := range map[string]func(io.ReadCloser) io.ReadCloser{
		"ClientGo": json.Framer.NewFrameReader,
		"Object":   objectFramer{}.NewFrameReader,
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			for b.Loop() {
				got, err := frames(fr(io.NopCloser(strings.NewReader(stream))), 16<<10)
				if !errors.Is(err, io.EOF) || len(got) != 1000 {
					b.Fatalf("%d frames, %v", len(got), err)
				}
			}
		})
	}
}
