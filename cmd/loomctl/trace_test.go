package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loomxr/loom/pkg/stack"
)

// fileClient serves the objects of YAML files, as the API server would:
// the reading of objects is the seam `loomctl trace` is tested at; the
// e2e tests run it against a real API server.
type fileClient struct {
	objs []*unstructured.Unstructured
}

func newFileClient(t *testing.T, files ...string) *fileClient {
	t.Helper()
	c := &fileClient{}
	for _, f := range files {
		objs, err := stack.ReadManifests(filepath.Join("testdata", "trace", f))
		if err != nil {
			t.Fatal(err)
		}
		c.objs = append(c.objs, objs...)
	}
	return c
}

func (c *fileClient) Get(_ context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	for _, o := range c.objs {
		// Cluster-scoped objects have no namespace, whatever is asked.
		if o.GroupVersionKind() == gvk && o.GetName() == name && (o.GetNamespace() == "" || o.GetNamespace() == namespace) {
			return o.DeepCopy(), nil
		}
	}
	return nil, kerrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind)}, name)
}

func (c *fileClient) Definitions(context.Context) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range c.objs {
		if o.GetKind() == "CompositeResourceDefinition" {
			out = append(out, o)
		}
	}
	return out, nil
}

var (
	traceDBGVK  = schema.GroupVersionKind{Group: "trace.example.org", Version: "v1alpha1", Kind: "TraceDB"}
	xTraceDBGVK = schema.GroupVersionKind{Group: "trace.example.org", Version: "v1alpha1", Kind: "XTraceDB"}
)

func TestTraceGolden(t *testing.T) {
	cases := map[string]struct {
		reason    string
		file      string
		gvk       schema.GroupVersionKind
		namespace string
		name      string
		output    string
		golden    string
		// want are substrings of lines of the output that must hold
		// whatever the golden file says: the resource and its cause on
		// one line.
		want [][]string
	}{
		"FailingTransform": {
			reason: "The XR's Synced condition and the unrendered template's row name the failing patch and transform.",
			file:   "transform.yaml", gvk: traceDBGVK, namespace: "team-a", name: "db",
			golden: "transform.golden",
			want: [][]string{
				{"XTraceDB/db-p97zq", "False", "False", `ReconcileError: cannot apply patch 0 of template "server"`, `transform 0 (map): key "medium" is not in the map`},
				{"└─ (server)", "RenderFailed: cannot apply patch 0"},
			},
		},
		"UnresolvedReference": {
			reason: "The referencing resource's row says which field waits for which resource; the XR's row keeps the count.",
			file:   "reference.yaml", gvk: traceDBGVK, namespace: "team-a", name: "db",
			golden: "reference.golden",
			want: [][]string{
				{"XTraceDB/db-h4s2z", "WaitingForReferences: 1 unresolved references among 2 composed resources (below)"},
				{"NopResource/db-h4s2z-3d3b70a1f820", "WaitingForReferences: spec.forProvider.fields.traceNetwork waits for NopResource \"db-h4s2z-9b3fc3cdd98c\" to be Ready=True"},
				{"NopResource/db-h4s2z-9b3fc3cdd98c", "False", "Creating: condition Ready is False, want True (Creating)"},
			},
		},
		"MissingConnectionKey": {
			reason: "The XR's row names the connection key the Composition cannot provide, though everything is Ready.",
			file:   "nokey.yaml", gvk: traceDBGVK, namespace: "team-a", name: "db",
			golden: "nokey.golden",
			want: [][]string{
				{"XTraceDB/db-k8h6c", "True", "True", "MissingKeys:", "declares: endpoint"},
			},
		},
		"Wide": {
			reason: "-o wide adds each composed resource's name in its Composition.",
			file:   "reference.yaml", gvk: traceDBGVK, namespace: "team-a", name: "db",
			output: outputWide, golden: "reference.wide.golden",
			want: [][]string{
				{"NopResource/db-h4s2z-3d3b70a1f820", "server", "True", "True", "WaitingForReferences:"},
				{"XTraceDB/db-h4s2z", "(below)"},
			},
		},
		"FromTheXR": {
			reason: "Tracing an XR starts at the XR.",
			file:   "transform.yaml", gvk: xTraceDBGVK, name: "db-p97zq",
			golden: "transform.xr.golden",
		},
		"Nested": {
			reason: "A composed XR is followed; a composed resource without conditions shows the renderer's view; a missing one says so.",
			file:   "nested.yaml", gvk: xTraceDBGVK, name: "db",
			golden: "nested.golden",
			want: [][]string{
				{"├─ XNetwork/db-net", "Creating: Unready resources: subnet"},
				{"│  └─ NopResource/db-net-subnet", "NotFound"},
				{"└─ ConfigMap/db-settings", "-", "True", "Available"},
			},
		},
		"Unbound": {
			reason: "A claim the binder has not bound yet says so.",
			file:   "unbound.yaml", gvk: traceDBGVK, namespace: "team-a", name: "db",
			golden: "unbound.golden",
			want:   [][]string{{"TraceDB/db (team-a)", "-", "-", "Unbound"}},
		},
		"JSON": {
			reason: "-o json prints the tree.",
			file:   "reference.yaml", gvk: traceDBGVK, namespace: "team-a", name: "db",
			output: outputJSON, golden: "reference.json.golden",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newFileClient(t, "xrd.yaml", tc.file)
			n, err := buildTrace(t.Context(), c, tc.gvk, tc.namespace, tc.name)
			if err != nil {
				t.Fatalf("%s\nbuildTrace(...): %v", tc.reason, err)
			}
			var b bytes.Buffer
			if err := printTrace(&b, n, tc.output); err != nil {
				t.Fatal(err)
			}
			got := b.String()
			for _, parts := range tc.want {
				found := false
				for _, l := range strings.Split(got, "\n") {
					all := true
					for _, p := range parts {
						all = all && strings.Contains(l, p)
					}
					found = found || all
				}
				if !found {
					t.Errorf("%s\nno line has all of %q:\n%s", tc.reason, parts, got)
				}
			}
			golden := filepath.Join("testdata", "trace", tc.golden)
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("cannot read golden file (run go test -update to write it): %v", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s\nloomctl trace: -want (%s), +got:\n%s", tc.reason, golden, diff)
			}
		})
	}
}

func TestTraceStatusCut(t *testing.T) {
	long := traceCause{Reason: "ReconcileError", Message: strings.Repeat("x", 300) + "\n  end"}
	if got := (printer{}).status(long); len([]rune(got)) != maxStatus || !strings.HasSuffix(got, "…") {
		t.Errorf("default status: got %d runes %q, want %d ending in …", len([]rune(got)), got, maxStatus)
	}
	if got := (printer{wide: true}).status(long); !strings.HasSuffix(got, "x end") {
		t.Errorf("wide status: got %q, want it whole on one line", got)
	}
}

func TestTraceJSONRoundTrip(t *testing.T) {
	c := newFileClient(t, "xrd.yaml", "reference.yaml")
	n, err := buildTrace(t.Context(), c, traceDBGVK, "team-a", "db")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := printTrace(&b, n, outputJSON); err != nil {
		t.Fatal(err)
	}
	got := &traceNode{}
	if err := json.Unmarshal(b.Bytes(), got); err != nil {
		t.Fatalf("cannot decode the JSON output: %v", err)
	}
	if diff := cmp.Diff(n, got); diff != "" {
		t.Errorf("JSON round trip: -want, +got:\n%s", diff)
	}
	if got.Healthy() || len(got.Children) != 1 || len(got.Children[0].Children) != 2 {
		t.Errorf("decoded tree: healthy %t, want a claim with one XR of two resources", got.Healthy())
	}
}

func TestTraceErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		gvk    schema.GroupVersionKind
		name   string
		want   string
	}{
		"NotFound": {
			reason: "A claim that does not exist is an error naming it.",
			gvk:    traceDBGVK, name: "nope",
			want: `cannot get TraceDB "nope"`,
		},
		"NotAClaim": {
			reason: "A kind no XRD defines is refused.",
			gvk:    schema.GroupVersionKind{Group: "nop.crossplane.io", Version: "v1alpha1", Kind: "NopResource"}, name: "db-h4s2z-3d3b70a1f820",
			want: "neither a claim nor a composite resource kind",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newFileClient(t, "xrd.yaml", "reference.yaml")
			_, err := buildTrace(t.Context(), c, tc.gvk, "team-a", tc.name)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nbuildTrace(...): error %v, want one containing %q", tc.reason, err, tc.want)
			}
		})
	}
}

func TestTraceArgs(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   []string
		want   string
	}{
		"NoSlash":   {reason: "KIND/NAME is required.", args: []string{"trace", "tracedb"}, want: "want KIND/NAME"},
		"BadOutput": {reason: "Unknown output formats are refused.", args: []string{"trace", "tracedb/db", "-o", "yaml"}, want: "unknown output format"},
		"NoArgs":    {reason: "One argument is required.", args: []string{"trace"}, want: "accepts 1 arg"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := execute(t.Context(), tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nloomctl %v: error %v, want one containing %q", tc.reason, tc.args, err, tc.want)
			}
		})
	}
}

func TestWatchTrace(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	reads := [][]byte{[]byte("same\n"), []byte("same\n"), nil, []byte("changed\n"), []byte("changed\n")}
	i := 0
	read := func() ([]byte, error) {
		defer func() { i++ }()
		switch {
		case i >= len(reads):
			cancel()
			return []byte("changed\n"), nil
		case reads[i] == nil:
			return nil, context.DeadlineExceeded
		}
		return reads[i], nil
	}
	var out bytes.Buffer
	if err := watchTrace(ctx, &out, time.Millisecond, []byte("same\n"), read); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.Count(got, "same") != 0 || strings.Count(got, "changed") != 1 || strings.Count(got, "cannot read the trace") != 1 {
		t.Errorf("watchTrace printed, want one failure and the change once:\n%s", got)
	}
}
