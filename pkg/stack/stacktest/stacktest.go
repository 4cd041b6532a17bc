// Package stacktest holds what tests need to run on the local control plane
// without each writing it again.
package stacktest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// ControlPlane starts a local control plane (etcd, kube-apiserver,
// kube-controller-manager and Loom's CRDs) with no Loom service, for a
// test that needs a real API server, and stops it when the test ends. opts
// may add CRDs and the like; the state folder, the binaries, the services
// (none) and, unless set, the log (the test's output) are filled in. It
// skips or fails the test as K8sBinDir does when the binaries are missing.
func ControlPlane(t testing.TB, opts stack.Options) *stack.Stack {
	t.Helper()
	opts.K8sBinDir = K8sBinDir(t)
	opts.StateDir = t.TempDir()
	opts.Services = []string{}
	if opts.Log == nil {
		opts.Log = t.Output()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	s, err := stack.Start(ctx, opts)
	if err != nil {
		t.Fatalf("cannot start the control plane: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("cannot stop the control plane: %v", err)
		}
	})
	return s
}
