package fn

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	fnv1 "github.com/loomxr/loom/proto/fn/v1"
)

func TestTag(t *testing.T) {
	input := func(v string) *fnv1.RunFunctionRequest {
		in, _ := structpb.NewStruct(map[string]any{"a": v, "b": map[string]any{"c": 1, "d": []any{"x", "y"}}})
		return &fnv1.RunFunctionRequest{
			Meta:  &fnv1.RequestMeta{Capabilities: []fnv1.Capability{fnv1.Capability_CAPABILITY_CAPABILITIES}},
			Input: in,
		}
	}
	tag := func(r *fnv1.RunFunctionRequest) string {
		t.Helper()
		s, err := Tag(r)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	r := input("1")
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tag(r), hexSHA256(b); got != want {
		t.Errorf("Tag: want hex SHA-256 of the deterministic encoding %s, got %s", want, got)
	}
	for i := 0; i < 20; i++ {
		// Map order must not matter.
		if got := tag(input("1")); got != tag(r) {
			t.Fatalf("Tag of equal requests differs: %s", got)
		}
	}
	if tag(input("2")) == tag(r) {
		t.Errorf("Tag of different requests is the same")
	}
	tagged := input("1")
	tagged.Meta.Tag = "previous"
	if got := tag(tagged); got != tag(r) {
		t.Errorf("Tag depends on the tag already set: %s", got)
	}
	if tagged.GetMeta().GetTag() != "previous" {
		t.Errorf("Tag changed the request's tag to %q", tagged.GetMeta().GetTag())
	}
}
