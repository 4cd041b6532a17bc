//go:build e2e

// Package upstream runs Crossplane v1.20.11's own end-to-end cases of its
// API extensions against Loom (issue 20). It has its own stack, so that
// `make e2e` runs it beside the main e2e package; its cases wait minutes on
// upstream's "must not change" checks and would otherwise add those minutes
// to the suite.
package upstream

import (
	"os"
	"testing"

	"github.com/loomxr/loom/e2e/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Run(m)) }
