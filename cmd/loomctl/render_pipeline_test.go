package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testFunctions builds the test composition functions of e2e/testfn, starts
// them in plaintext (as development functions run) on 127.0.0.1, and writes
// a FUNCTIONS file pointing at them. Everything stops when the test ends.
func testFunctions(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	var manifests []string
	for _, name := range []string{"compose-from-env", "read-context"} {
		bin := filepath.Join(dir, name)
		build := exec.Command("go", "build", "-o", bin, "./testfn/"+name)
		build.Dir = filepath.Join("..", "..", "e2e")
		build.Env = append(os.Environ(), "GOTOOLCHAIN=local")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("cannot build test function %s: %v\n%s", name, err, out)
		}
		addr := startInsecure(t, bin)
		manifests = append(manifests, fmt.Sprintf(`apiVersion: pkg.crossplane.io/v1beta1
kind: Function
metadata:
  name: %s
  annotations:
    render.crossplane.io/runtime: Development
    render.crossplane.io/runtime-development-target: %s
spec:
  package: xpkg.example.org/%s:v0.1.0
`, name, addr, name))
	}
	if extra != "" {
		manifests = append(manifests, extra)
	}
	path := filepath.Join(dir, "functions.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(manifests, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startInsecure runs a test function with --insecure on a free 127.0.0.1
// port and returns the address once it accepts connections.
func startInsecure(t *testing.T, bin string) string {
	t.Helper()
	for attempt := 0; attempt < 3; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		cmd := exec.Command(bin, "--insecure", "--address", addr)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			select {
			case <-exited:
				deadline = time.Time{} // The port was taken; try another.
				continue
			default:
			}
			if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
				_ = c.Close()
				return addr
			}
			time.Sleep(20 * time.Millisecond) // Polling the listener, not waiting for an outcome.
		}
	}
	t.Fatalf("test function %s did not start", bin)
	return ""
}

const (
	pipelineXR   = "testdata/render/pipeline/xr.yaml"
	pipelineComp = "testdata/render/pipeline/composition.yaml"
	pipelineEnvs = "testdata/render/pipeline/environmentconfigs.yaml"
)

func TestRenderPipeline(t *testing.T) {
	fns := testFunctions(t, "")
	args := []string{"render", "-e", pipelineEnvs, pipelineXR, pipelineComp, fns}
	stdout, stderr, err := execute(t.Context(), args...)
	if err != nil {
		t.Fatalf("loomctl %v: %v\nstderr: %s", args, err, stderr)
	}
	golden := "testdata/render/pipeline/golden.yaml"
	if *update {
		if err := os.WriteFile(golden, []byte(stdout), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("cannot read golden file (run go test -update to write it): %v", err)
	}
	if diff := cmp.Diff(string(want), stdout); diff != "" {
		t.Errorf("loomctl render of a two-step pipeline: -want (%s), +got:\n%s", golden, diff)
	}
}

func TestRenderPipelineErrors(t *testing.T) {
	docker := `apiVersion: pkg.crossplane.io/v1beta1
kind: Function
metadata:
  name: function-auto-ready
  annotations:
    render.crossplane.io/runtime: Docker
`
	fns := testFunctions(t, "")
	withDocker := testFunctions(t, docker)
	dir := t.TempDir()
	unreachable := filepath.Join(dir, "unreachable.yaml")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	if err := os.WriteFile(unreachable, []byte(`apiVersion: pkg.crossplane.io/v1beta1
kind: Function
metadata:
  name: compose-from-env
  annotations:
    render.crossplane.io/runtime-development-target: `+closed+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	cases := map[string]struct {
		reason string
		args   []string
		want   string // a prefix of the error
	}{
		"Fatal": {
			reason: "A Fatal result fails the render, naming the step.",
			args:   []string{pipelineXR, "testdata/render/pipeline/fatal.yaml", fns},
			want:   `cannot render composite resource XThing "thing-7dk2q" with Composition fatal: pipeline step "compose" returned a fatal result: no network for this environment`,
		},
		"UnknownFunction": {
			reason: "A step whose function FUNCTIONS does not define is named.",
			args:   []string{pipelineXR, "testdata/render/pipeline/unknown-function.yaml", fns},
			want:   `cannot render composite resource XThing "thing-7dk2q" with Composition unknown-function: pipeline step "auto-ready" runs function "function-auto-ready", which FUNCTIONS does not define`,
		},
		"DockerRuntime": {
			reason: "loomctl does not start functions.",
			args:   []string{pipelineXR, "testdata/render/pipeline/unknown-function.yaml", withDocker},
			want:   `cannot render composite resource XThing "thing-7dk2q" with Composition unknown-function: function "function-auto-ready": runtime "Docker" is not supported: loomctl render does not start functions; run it yourself and annotate it with render.crossplane.io/runtime: Development`,
		},
		"Unreachable": {
			reason: "A function that is not running is reported as unreachable, naming step and function.",
			args:   []string{pipelineXR, "testdata/render/pipeline/fatal.yaml", unreachable},
			want:   `cannot render composite resource XThing "thing-7dk2q" with Composition fatal: cannot run pipeline step "compose" (function "compose-from-env"): function is unreachable: `,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			stdout, _, err := execute(t.Context(), append([]string{"render"}, tc.args...)...)
			if err == nil {
				t.Fatalf("%s\nloomctl render %v: want an error, got none", tc.reason, tc.args)
			}
			got := err.Error()
			if strings.HasPrefix(got, tc.want) {
				got = tc.want
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nloomctl render %v: -want error (prefix), +got error:\n%s", tc.reason, tc.args, diff)
			}
			if stdout != "" {
				t.Errorf("%s\nloomctl render %v: want no output on error, got:\n%s", tc.reason, tc.args, stdout)
			}
		})
	}
}
