//go:build e2e

// Package e2e holds Loom's end-to-end tests. They run against one local
// stack (pkg/stack) shared by the whole package: see package framework.
// Run them with `make e2e`, which builds the binaries and the control plane
// first.
package e2e

import (
	"os"
	"testing"

	"github.com/loomxr/loom/e2e/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Run(m)) }
