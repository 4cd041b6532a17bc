package fn

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/descriptorpb"

	fnv1 "github.com/loomxr/loom/proto/fn/v1"
	fnv1beta1 "github.com/loomxr/loom/proto/fn/v1beta1"
)

// TestWireCompatibility compares Loom's function API, message by message and
// field by field (names, numbers, types, labels, oneofs, enums, the service),
// with the one compiled into Crossplane's function SDK, and Loom's v1 with its
// v1beta1. Only file names, options (go_package) and JSON names may differ.
func TestWireCompatibility(t *testing.T) {
	binaries(t)
	out, err := exec.Command(sdkDescriptor).Output()
	if err != nil {
		t.Fatalf("cannot run sdk-descriptor: %v", err)
	}
	sdk := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(out, sdk); err != nil {
		t.Fatal(err)
	}
	if len(sdk.GetFile()) != 2 {
		t.Fatalf("sdk-descriptor: want 2 files, got %d", len(sdk.GetFile()))
	}
	ours := func(m proto.Message) *descriptorpb.FileDescriptorProto {
		return protodesc.ToFileDescriptorProto(m.ProtoReflect().Descriptor().ParentFile())
	}
	v1 := ours(&fnv1.RunFunctionRequest{})
	beta := ours(&fnv1beta1.RunFunctionRequest{})

	cases := map[string]struct {
		reason string
		want   *descriptorpb.FileDescriptorProto
		got    *descriptorpb.FileDescriptorProto
	}{
		"V1MatchesSDK":      {reason: "Loom's v1 is the SDK's v1.", want: sdk.GetFile()[0], got: v1},
		"V1Beta1MatchesSDK": {reason: "Loom's v1beta1 is the SDK's v1beta1.", want: sdk.GetFile()[1], got: beta},
		"V1Beta1MatchesV1":  {reason: "Loom's v1beta1 is wire-identical to its v1.", want: v1, got: beta},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(normalize(tc.want), normalize(tc.got), protocmp.Transform()); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// normalize drops what does not reach the wire and replaces the package name
// by a placeholder, so that v1 and v1beta1 compare equal.
func normalize(in *descriptorpb.FileDescriptorProto) *descriptorpb.FileDescriptorProto {
	fd := proto.CloneOf(in)
	pkg := "." + fd.GetPackage() + "."
	rename := func(s *string) {
		if s != nil && strings.HasPrefix(*s, pkg) {
			*s = ".PKG." + strings.TrimPrefix(*s, pkg)
		}
	}
	fd.Name, fd.Package, fd.Options, fd.SourceCodeInfo = nil, proto.String("PKG"), nil, nil
	var walk func(m *descriptorpb.DescriptorProto)
	walk = func(m *descriptorpb.DescriptorProto) {
		for _, f := range m.GetField() {
			f.JsonName = nil
			rename(f.TypeName)
		}
		for _, n := range m.GetNestedType() {
			walk(n)
		}
	}
	for _, m := range fd.GetMessageType() {
		walk(m)
	}
	for _, s := range fd.GetService() {
		for _, m := range s.GetMethod() {
			rename(m.InputType)
			rename(m.OutputType)
		}
	}
	return fd
}
