//go:build tools

// Package codegen pins the code generators `make generate` runs
// (controller-gen for deepcopy functions and CRDs of pkg/apis).
//
// It is a module of its own, outside go.work, on purpose: controller-tools
// v0.20.0 requires newer spf13/cobra and pflag releases than the ones Loom pins,
// and a requirement in any workspace module would raise them for every module
// (cmd/loomctl included). Built with GOWORK=off, the generators' dependency
// graph stays separate from Loom's.
package codegen

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
