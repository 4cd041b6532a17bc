// Package stacktest holds what tests need to run on the local control plane
// without each writing it again.
package stacktest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/loomxr/loom/pkg/stack"
)

// K8sBinDir returns the folder of the control-plane binaries for a test that
// starts a kube-apiserver. With -short it skips the test. When the binaries
// are missing it skips the test on a developer's machine, but fails it when
// the CI environment variable is set: CI must never pass by skipping.
func K8sBinDir(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a kube-apiserver; skipped with -short")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := stack.FindRepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := stack.K8sBinDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "kube-apiserver")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no kube-apiserver in %s with CI set: run `make control-plane` first", bin)
		}
		t.Skipf("no kube-apiserver in %s (run `make control-plane`)", bin)
	}
	return bin
}
