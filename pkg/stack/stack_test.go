package stack

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartFailsCleanly(t *testing.T) {
	root := t.TempDir()
	state := filepath.Join(root, "state")
	opts := Options{
		RepoRoot:  root,
		StateDir:  state,
		K8sBinDir: filepath.Join(root, "no-such-dir"),
		Services:  []string{},
		Log:       io.Discard,
	}
	for i := range 2 {
		// The second start would fail with ErrStateDirInUse if the first
		// had not released the state folder.
		_, err := Start(t.Context(), opts)
		if err == nil || !strings.Contains(err.Error(), "make control-plane") {
			t.Fatalf("Start #%d without control-plane binaries: got %v, want an error naming make control-plane", i+1, err)
		}
	}
	if _, err := os.Stat(filepath.Join(state, infoFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed start left %s behind: %v", infoFile, err)
	}
}

func TestStartMissingService(t *testing.T) {
	root := t.TempDir()
	// BinDir is set explicitly: the default comes from $LOOM_BIN_DIR, which
	// the Makefile points at the real binaries.
	_, err := Start(t.Context(), Options{RepoRoot: root, StateDir: filepath.Join(root, "state"), BinDir: filepath.Join(root, "bin"), Services: []string{"renderer"}, Log: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("Start without service binaries: got %v, want an error naming make build", err)
	}
}

func TestStateDirInUse(t *testing.T) {
	state := t.TempDir()
	holder := &Stack{opts: Options{StateDir: state}}
	if err := holder.prepareStateDir(); err != nil {
		t.Fatal(err)
	}
	defer holder.unlock()
	_, err := Start(t.Context(), Options{RepoRoot: t.TempDir(), StateDir: state, Services: []string{}, Log: io.Discard})
	if !errors.Is(err, ErrStateDirInUse) {
		t.Errorf("Start on a locked state folder: got %v, want ErrStateDirInUse", err)
	}
}

func TestStopIsIdempotent(t *testing.T) {
	s := testStack(t)
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
