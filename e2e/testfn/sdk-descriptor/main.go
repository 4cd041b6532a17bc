// Command sdk-descriptor writes the protobuf descriptors of the function
// SDK's run_function.proto (v1 and v1beta1) to stdout, as a binary
// google.protobuf.FileDescriptorSet. Loom's tests compare them with Loom's
// own proto/fn packages to prove the wire format is the same, field for
// field. It is its own binary because no binary may link both.
package main

import (
	"fmt"
	"os"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	fnv1beta1 "github.com/crossplane/function-sdk-go/proto/v1beta1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
)

func main() {
	set := &descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{
		protodesc.ToFileDescriptorProto((&fnv1.RunFunctionRequest{}).ProtoReflect().Descriptor().ParentFile()),
		protodesc.ToFileDescriptorProto((&fnv1beta1.RunFunctionRequest{}).ProtoReflect().Descriptor().ParentFile()),
	}}
	b, err := proto.Marshal(set)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, err := os.Stdout.Write(b); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
