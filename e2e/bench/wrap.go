//go:build e2e

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/loomxr/loom/pkg/stack"
)

// applyServiceFlags points opts at wrappers of the stack's binaries in
// stateDir/bin that add flags (see wrapServices), if there are any flags.
func applyServiceFlags(opts *stack.Options, repo, stateDir string, flags map[string][]string) error {
	if len(flags) == 0 {
		return nil
	}
	dir, err := wrapServices(repo, filepath.Join(stateDir, "bin"), flags)
	if err != nil {
		return err
	}
	opts.BinDir = dir
	return nil
}

// wrapServices fills dir with the stack's binaries: a shell wrapper that
// adds flags for each service that has some, a symbolic link to the real
// binary for the others. The wrapper execs the binary, so process ids and
// command lines stay the service's own.
func wrapServices(repo, dir string, flags map[string][]string) (string, error) {
	real := os.Getenv("LOOM_BIN_DIR")
	if real == "" {
		real = filepath.Join(repo, "bin")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cannot create %s: %w", dir, err)
	}
	for _, svc := range stack.DefaultServices {
		bin := filepath.Join(real, svc)
		dst := filepath.Join(dir, svc)
		_ = os.Remove(dst)
		f, ok := flags[svc]
		if !ok {
			if err := os.Symlink(bin, dst); err != nil {
				return "", fmt.Errorf("cannot link %s: %w", dst, err)
			}
			continue
		}
		quoted := make([]string, len(f))
		for i, a := range f {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		script := fmt.Sprintf("#!/bin/sh\nexec '%s' %s \"$@\"\n", bin, strings.Join(quoted, " "))
		if err := os.WriteFile(dst, []byte(script), 0o755); err != nil {
			return "", fmt.Errorf("cannot write %s: %w", dst, err)
		}
	}
	return dir, nil
}
