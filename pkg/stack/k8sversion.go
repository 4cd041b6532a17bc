package stack

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KubernetesVersion returns the release of the control-plane binaries the
// stack runs: the k8s.io/kubernetes requirement of <repoRoot>/tools/go.mod,
// the one place the release is written (the Makefile reads it there too and
// builds the binaries into .cache/k8s/<release>).
func KubernetesVersion(repoRoot string) (string, error) {
	p := filepath.Join(repoRoot, "tools", "go.mod")
	f, err := os.Open(p) //nolint:gosec // A file of the repository.
	if err != nil {
		return "", fmt.Errorf("cannot read the Kubernetes release: %w", err)
	}
	defer f.Close() //nolint:errcheck // Read only.
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "k8s.io/kubernetes" && strings.HasPrefix(fields[1], "v") {
			return fields[1], nil
		}
	}
	if err := s.Err(); err != nil {
		return "", fmt.Errorf("cannot read %s: %w", p, err)
	}
	return "", fmt.Errorf("cannot find the Kubernetes release in %s: no k8s.io/kubernetes requirement", p)
}

// DefaultK8sBinDir is where the Makefile builds the control-plane binaries:
// <repoRoot>/.cache/k8s/<KubernetesVersion>.
func DefaultK8sBinDir(repoRoot string) (string, error) {
	v, err := KubernetesVersion(repoRoot)
	if err != nil {
		return "", err
	}
	return filepath.Join(repoRoot, ".cache", "k8s", v), nil
}

// K8sBinDir is the folder of the control-plane binaries: $LOOM_K8S_BIN_DIR
// (the Makefile exports it), else DefaultK8sBinDir.
func K8sBinDir(repoRoot string) (string, error) {
	if d := os.Getenv("LOOM_K8S_BIN_DIR"); d != "" {
		return d, nil
	}
	return DefaultK8sBinDir(repoRoot)
}
