// Command protogen compiles the .proto files under a source root with a pure-Go
// compiler and runs the standard protoc plugins (protoc-gen-go,
// protoc-gen-go-grpc) on them, so that `make generate` needs nothing but the Go
// module proxy: no protoc binary, no buf.
//
// Usage: protogen -root proto -plugin protoc-gen-go=PATH -plugin protoc-gen-go-grpc=PATH FILE.proto...
// Each plugin is run with paths=source_relative and writes next to its input.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

type plugins []string

func (p *plugins) String() string     { return strings.Join(*p, ",") }
func (p *plugins) Set(v string) error { *p = append(*p, v); return nil }

func main() {
	root := flag.String("root", ".", "source root the .proto paths are relative to")
	var ps plugins
	flag.Var(&ps, "plugin", "NAME=PATH of a protoc plugin to run (repeatable)")
	flag.Parse()
	if err := run(context.Background(), *root, ps, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "protogen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, root string, ps []string, files []string) error {
	if len(files) == 0 || len(ps) == 0 {
		return errors.New("need at least one -plugin and one .proto file")
	}
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{root}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := c.Compile(ctx, files...)
	if err != nil {
		return fmt.Errorf("cannot compile protos: %w", err)
	}
	// Every file and its transitive imports, dependencies first, as protoc sends them.
	var all []*descriptorpb.FileDescriptorProto
	seen := map[string]bool{}
	var visit func(fd protoreflect.FileDescriptor)
	visit = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		for i := 0; i < fd.Imports().Len(); i++ {
			visit(fd.Imports().Get(i).FileDescriptor)
		}
		all = append(all, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range compiled {
		visit(f)
	}
	for _, p := range ps {
		name, path, ok := strings.Cut(p, "=")
		if !ok {
			return fmt.Errorf("plugin %q: want NAME=PATH", p)
		}
		req := &pluginpb.CodeGeneratorRequest{
			FileToGenerate: files,
			Parameter:      proto.String("paths=source_relative"),
			ProtoFile:      all,
			CompilerVersion: &pluginpb.Version{
				Major: proto.Int32(0), Minor: proto.Int32(0), Patch: proto.Int32(0), Suffix: proto.String("protocompile"),
			},
		}
		if err := runPlugin(ctx, root, name, path, req); err != nil {
			return err
		}
	}
	return nil
}

func runPlugin(ctx context.Context, root, name, path string, req *pluginpb.CodeGeneratorRequest) error {
	in, err := proto.Marshal(req)
	if err != nil {
		return fmt.Errorf("cannot encode request for %s: %w", name, err)
	}
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &out, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cannot run %s: %w: %s", name, err, stderr.String())
	}
	resp := &pluginpb.CodeGeneratorResponse{}
	if err := proto.Unmarshal(out.Bytes(), resp); err != nil {
		return fmt.Errorf("cannot decode response of %s: %w", name, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("%s: %s", name, resp.GetError())
	}
	for _, f := range resp.File {
		dst := filepath.Join(root, f.GetName())
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, []byte(f.GetContent()), 0o644); err != nil {
			return fmt.Errorf("cannot write %s: %w", dst, err)
		}
	}
	return nil
}
