package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestFindRepoRoot(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.work"), []byte("go 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := FindRepoRoot(deep)
	if err != nil {
		t.Fatal(err)
	}
	if got != root {
		t.Errorf("FindRepoRoot(%s): got %s, want %s", deep, got, root)
	}
	if _, err := FindRepoRoot(t.TempDir()); err == nil {
		t.Error("FindRepoRoot outside a checkout: want error, got nil")
	}
}

func TestWithDefaults(t *testing.T) {
	t.Setenv("LOOM_BIN_DIR", "")
	t.Setenv("LOOM_K8S_BIN_DIR", "")
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	mod := "module example.com/tools\n\nrequire (\n\tk8s.io/kubernetes v1.99.1\n)\n"
	if err := os.WriteFile(filepath.Join(root, "tools", "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason string
		in     Options
		want   Options
		err    bool
	}{
		"Defaults": {
			reason: "Unset folders default to the checkout's; services to all of them.",
			in:     Options{RepoRoot: root},
			want: Options{
				RepoRoot:     root,
				StateDir:     filepath.Join(root, ".loom"),
				BinDir:       filepath.Join(root, "bin"),
				K8sBinDir:    filepath.Join(root, ".cache", "k8s", "v1.99.1"),
				RBACDir:      filepath.Join(root, "deploy", "helm", "loom", "files", "rbac"),
				Services:     DefaultServices,
				CRDDirs:      []string{filepath.Join(root, "deploy", "helm", "loom", "crds")},
				ExtraCRDDirs: []string{filepath.Join(root, "e2e", "provider", "crds")},
			},
		},
		"NoServices": {
			reason: "An empty, non-nil Services runs none.",
			in:     Options{RepoRoot: root, StateDir: "/s", BinDir: "/b", K8sBinDir: "/k", RBACDir: "/r", Services: []string{}, CRDDirs: []string{}, ExtraCRDDirs: []string{}},
			want:   Options{RepoRoot: root, StateDir: "/s", BinDir: "/b", K8sBinDir: "/k", RBACDir: "/r", Services: []string{}, CRDDirs: []string{}, ExtraCRDDirs: []string{}},
		},
		"NegativeReplicas": {
			reason: "A negative replica count is an error.",
			in:     Options{RepoRoot: root, Replicas: map[string]int{"renderer": -1}},
			err:    true,
		},
		"NATSCluster": {
			reason: "Three NATS servers form a cluster.",
			in:     Options{RepoRoot: root, StateDir: "/s", BinDir: "/b", K8sBinDir: "/k", RBACDir: "/r", Services: []string{}, CRDDirs: []string{}, ExtraCRDDirs: []string{}, NATSServers: 3},
			want:   Options{RepoRoot: root, StateDir: "/s", BinDir: "/b", K8sBinDir: "/k", RBACDir: "/r", Services: []string{}, CRDDirs: []string{}, ExtraCRDDirs: []string{}, NATSServers: 3},
		},
		"TwoNATSServers": {
			reason: "A two-server cluster loses its quorum with either server; it is refused.",
			in:     Options{RepoRoot: root, NATSServers: 2},
			err:    true,
		},
		"TooManyNATSServers": {
			reason: "More than five servers is more than the stack needs to prove anything.",
			in:     Options{RepoRoot: root, NATSServers: 6},
			err:    true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := tc.in.withDefaults()
			if (err != nil) != tc.err {
				t.Fatalf("%s\nwithDefaults(): err %v, want error %v", tc.reason, err, tc.err)
			}
			if tc.err {
				return
			}
			// Not compared: writers and durations have fixed defaults.
			got.Log, got.GracePeriod, got.ReadyTimeout = nil, 0, 0
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nwithDefaults(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestReplicas(t *testing.T) {
	o := Options{Replicas: map[string]int{"renderer": 3, "binder": 0}}
	got := map[string]int{"renderer": o.replicas("renderer"), "binder": o.replicas("binder"), "watcher": o.replicas("watcher")}
	if diff := cmp.Diff(map[string]int{"renderer": 3, "binder": 0, "watcher": 1}, got); diff != "" {
		t.Errorf("replicas: missing means 1, zero means none: -want, +got:\n%s", diff)
	}
}

func TestReadInfo(t *testing.T) {
	cases := map[string]struct {
		reason  string
		content string
		wantErr error
		want    Info
	}{
		"Running": {
			reason:  "Info of a live stack process is returned.",
			content: fmt.Sprintf(`{"kubeconfig":"/s/kubeconfig","natsURL":"nats://127.0.0.1:1","pid":%d}`, os.Getpid()),
			want:    Info{Kubeconfig: "/s/kubeconfig", NATSURL: "nats://127.0.0.1:1", PID: os.Getpid()},
		},
		"Stale": {
			reason:  "Info left by a dead process means no stack runs.",
			content: `{"kubeconfig":"/s/kubeconfig","pid":2147483646}`,
			wantErr: os.ErrNotExist,
		},
		"Missing": {
			reason:  "No info file means no stack runs.",
			wantErr: os.ErrNotExist,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.content != "" {
				if err := os.WriteFile(filepath.Join(dir, infoFile), []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ReadInfo(dir)
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nReadInfo(...): error -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nReadInfo(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestMirrorEnv(t *testing.T) {
	cases := map[string]struct {
		reason string
		opts   Options
		want   []string
	}{
		"On": {
			reason: "By default the state plane is on: the watcher's writes and the workers' reads.",
			want:   []string{"LOOM_WATCHER_MIRROR=true", "LOOM_MIRROR=true"},
		},
		"Off": {
			reason: "NoMirror turns both off, whatever the stack's own environment says.",
			opts:   Options{NoMirror: true},
			want:   []string{"LOOM_WATCHER_MIRROR=false", "LOOM_MIRROR=false"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.opts.mirrorEnv()); diff != "" {
				t.Errorf("\n%s\nmirrorEnv(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
