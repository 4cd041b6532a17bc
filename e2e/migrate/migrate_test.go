//go:build e2e

package migrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/loomxr/loom/e2e/bench"
	"github.com/loomxr/loom/pkg/bus"
	"github.com/loomxr/loom/pkg/stack"
	"github.com/loomxr/loom/pkg/stack/stacktest"
)

// The benchmark's workload (e2e/bench/testdata/vs/workload.yaml).
var (
	claimGVR    = schema.GroupVersionResource{Group: "bench.example.org", Version: "v1alpha1", Resource: "nopstacks"}
	xrGVR       = schema.GroupVersionResource{Group: "bench.example.org", Version: "v1alpha1", Resource: "xnopstacks"}
	composedGVR = schema.GroupVersionResource{Group: "nop.crossplane.io", Version: "v1alpha1", Resource: "nopresources"}
	revisionGVR = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v1", Resource: "compositionrevisions"}
)

const (
	namespace   = "migrate"
	composition = "xnopstacks-nop3"
	// connectionSecretType is the type of the connection Secrets both
	// engines write.
	connectionSecretType = "connection.crossplane.io/v1alpha1"
)

// loomServices run on the cluster after the switch (the test provider
// keeps running from the first stack).
var loomServices = []string{"watcher", "renderer", "binder", "secrets", "rbac-manager"}

// Report is what a run measured; -out writes it as JSON.
type Report struct {
	StartedAt         time.Time `json:"started_at"`
	CrossplaneVersion string    `json:"crossplane_version"`
	// Claims is how many claims Crossplane created and made Ready.
	Claims int `json:"claims"`
	// ClaimsReady is how many of them were Ready (and Synced) once Loom
	// had reconciled every one.
	ClaimsReady int `json:"claims_ready"`
	// ComposedRecreated counts composed resources that exist after the
	// switch under a name or UID they did not have before it (Loom-named
	// copies, or resources deleted and created again).
	ComposedRecreated int `json:"composed_recreated"`
	// ComposedDeleted counts composed resources that existed before the
	// switch and were gone after it.
	ComposedDeleted int `json:"composed_deleted"`
	// ClaimsRebound counts claims whose spec.resourceRef, or whose XR's
	// UID, changed.
	ClaimsRebound int `json:"claims_rebound"`
	// XRsCreated counts XRs that did not exist before the switch.
	XRsCreated int `json:"xrs_created"`
	// RevisionsCreated counts CompositionRevisions that did not exist
	// before the switch.
	RevisionsCreated int `json:"revisions_created"`
	// RevisionRefsChanged counts XRs whose spec.compositionRevisionRef
	// changed.
	RevisionRefsChanged int `json:"revision_refs_changed"`
	// SecretsChanged counts connection Secrets (claims' and XRs') whose
	// data changed or that disappeared.
	SecretsChanged int `json:"secrets_changed"`
	// LoomWritesPerClaim is Loom's services' API writes (lease renewals
	// aside) from their start until every claim was reconciled once,
	// divided by Claims; LoomWrites is by "service: verb resource".
	LoomWritesPerClaim float64            `json:"loom_writes_per_claim"`
	LoomWrites         map[string]float64 `json:"loom_writes"`
	// LoomClaimWrites is the part of those writes on the claims, XRs,
	// composed resources and connection Secrets of the workload.
	LoomClaimWrites float64 `json:"loom_claim_writes"`
	// SecondsToAdoptAll is from the start of Loom's services until every
	// claim had been reconciled once by Loom (every work stream drained
	// after the watcher's initial resync published every claim and XR).
	SecondsToAdoptAll float64 `json:"seconds_to_adopt_all"`
	// SecondsToStartLoom is the part of SecondsToAdoptAll spent starting
	// Loom's stack (NATS, CRDs, identities, services ready).
	SecondsToStartLoom float64 `json:"seconds_to_start_loom"`
}

// state is what the test records of the cluster at one moment.
type state struct {
	claims    map[string]claimState        // claim name → state
	xrs       map[string]types.UID         // XR name → UID
	composed  map[string]types.UID         // NopResource name → UID
	xrRefs    map[string][]string          // XR name → names of its resourceRefs
	xrRevs    map[string]string            // XR name → its compositionRevisionRef
	secrets   map[string]map[string][]byte // namespace/name → data
	revisions map[string]types.UID         // CompositionRevision name → UID
}

type claimState struct {
	uid           types.UID
	xr            string
	ready, synced bool
	summary       string
}

// TestMigrate takes over a live Crossplane v1 platform with Loom and hands
// it back (package doc).
func TestMigrate(t *testing.T) {
	ctx := t.Context()
	xpDir := crossplaneDir(t)
	stacktest.K8sBinDir(t)
	n := *flagClaims
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := stack.FindRepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(root, "bench", "results", "tmp")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	stateDir, err := os.MkdirTemp(base, "migrate-")
	if err != nil {
		t.Fatal(err)
	}
	logw := newTestLog(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("state and logs kept in %s", stateDir)
			return
		}
		_ = os.RemoveAll(stateDir)
	})
	logf := func(format string, args ...any) { t.Logf(format, args...) }
	rep := &Report{StartedAt: time.Now(), CrossplaneVersion: filepath.Base(xpDir), Claims: n}

	// The cluster: the control plane and the test provider, with
	// upstream's CRDs, as a Crossplane installation has them.
	audit, auditLog, err := bench.AuditFlags(filepath.Join(stateDir, "audit"))
	if err != nil {
		t.Fatal(err)
	}
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	cluster, err := stack.Start(startCtx, stack.Options{
		RepoRoot: root, StateDir: filepath.Join(stateDir, "cluster"),
		Services: []string{"provider-nop"}, CRDDirs: []string{filepath.Join(xpDir, "crds")},
		APIServerArgs: audit, Log: logw,
	})
	cancel()
	if err != nil {
		t.Fatalf("cannot start the cluster: %v", err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = cluster.Stop(sctx)
	})
	rc := rest.CopyConfig(cluster.RESTConfig())
	rc.QPS, rc.Burst = -1, 0
	rc.UserAgent = "loom-migrate-test"
	kube := kubernetes.NewForConfigOrDie(rc)
	dyn := dynamic.NewForConfigOrDie(rc)

	// Crossplane runs the platform.
	xp, err := bench.StartCrossplane(ctx, cluster, kube, xpDir, filepath.Join(stateDir, "crossplane-1"), logf)
	if err != nil {
		t.Fatal(err)
	}
	xpRunning := true
	t.Cleanup(func() {
		if xpRunning {
			_ = xp.Stop()
		}
	})
	objs, err := stack.ReadManifests(filepath.Join(root, "e2e", "bench", "testdata", "vs", "workload.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": namespace}}}
	actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	_, err = cluster.ApplyObjects(actx, append([]*unstructured.Unstructured{ns}, objs...)...)
	cancel()
	if err != nil {
		t.Fatalf("cannot install the workload: %v", err)
	}
	logf("creating %d claims with Crossplane running", n)
	if err := createClaims(ctx, dyn, n); err != nil {
		t.Fatal(err)
	}
	readyTimeout := 10*time.Minute + time.Duration(n)*time.Second
	if err := poll(ctx, readyTimeout, 2*time.Second, func() error { return allReady(ctx, dyn, kube, n) }); err != nil {
		t.Fatalf("Crossplane did not make the claims Ready: %v", err)
	}
	before, err := record(ctx, dyn, kube)
	if err != nil {
		t.Fatal(err)
	}
	logf("Crossplane: %d claims Ready, %d XRs, %d composed resources, %d connection Secrets, %d CompositionRevisions",
		len(before.claims), len(before.xrs), len(before.composed), len(before.secrets), len(before.revisions))
	if len(before.composed) != 3*n || len(before.xrs) != n {
		t.Fatalf("Crossplane made %d XRs and %d composed resources for %d claims, want %d and %d", len(before.xrs), len(before.composed), n, n, 3*n)
	}

	// The switch: Crossplane stops, Loom starts on the same cluster with
	// the CRDs it adds (loom.dev), as its Helm chart installs them where
	// Crossplane's already exist (Helm leaves existing CRDs alone).
	if err := xp.Stop(); err != nil {
		t.Fatal(err)
	}
	xpRunning = false
	logf("Crossplane stopped; starting Loom")
	loomCRDs, err := loomOnlyCRDs(root, filepath.Join(stateDir, "loom-crds"))
	if err != nil {
		t.Fatal(err)
	}
	rbac, err := stack.ReadManifests(filepath.Join(root, "e2e", "bench", "testdata", "vs", "loom-rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.ApplyObjects(ctx, rbac...); err != nil {
		t.Fatalf("cannot grant Loom's services their rights on the workload's kinds: %v", err)
	}
	// The operator's check before the switch passes, and counts what
	// Loom will adopt.
	if err := migrateCheck(ctx, root, cluster.AdminKubeconfig(), n); err != nil {
		t.Fatal(err)
	}
	loomStart := time.Now()
	startCtx, cancel = context.WithTimeout(ctx, 5*time.Minute)
	loom, err := stack.Start(startCtx, stack.Options{
		RepoRoot: root, StateDir: filepath.Join(stateDir, "loom"), Kubeconfig: cluster.AdminKubeconfig(),
		Services: loomServices, CRDDirs: []string{loomCRDs}, ExtraCRDDirs: []string{}, Log: logw,
	})
	cancel()
	if err != nil {
		t.Fatalf("cannot start Loom: %v", err)
	}
	loomRunning := true
	stopLoom := func() {
		if !loomRunning {
			return
		}
		loomRunning = false
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := loom.Stop(sctx); err != nil {
			t.Errorf("cannot stop Loom: %v", err)
		}
	}
	t.Cleanup(stopLoom)
	rep.SecondsToStartLoom = round(time.Since(loomStart).Seconds())
	adopted, err := awaitDrained(ctx, loom.NATSURL(), n, 5*time.Minute+time.Duration(n)*200*time.Millisecond)
	if err != nil {
		t.Fatalf("Loom did not reconcile every claim: %v", err)
	}
	rep.SecondsToAdoptAll = round(adopted.Sub(loomStart).Seconds())
	logf("Loom reconciled every claim %.1fs after its start (%.1fs of it starting)", rep.SecondsToAdoptAll, rep.SecondsToStartLoom)

	after, err := record(ctx, dyn, kube)
	if err != nil {
		t.Fatal(err)
	}
	compare(rep, before, after)
	writes, err := bench.ReadAudit(auditLog, loomStart, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rep.LoomWrites = map[string]float64{}
	var total float64
	for k, v := range writes {
		if !k.IsLoom() || !k.IsWrite() || k.Resource == "leases" {
			continue
		}
		rep.LoomWrites[fmt.Sprintf("%s: %s %s %d", k.Client, k.Verb, k.Resource, k.Code)] += v
		total += v
		if perClaimResource(k.Resource) {
			rep.LoomClaimWrites += v
		}
	}
	rep.LoomWritesPerClaim = round(total / float64(n))
	writeReport(t, rep)
	logf("after the switch: %d/%d claims Ready, %d composed re-created, %d deleted, %d claims re-bound, %d XRs and %d revisions created, %d Secrets changed, %.2f Loom writes per claim (%v)",
		rep.ClaimsReady, n, rep.ComposedRecreated, rep.ComposedDeleted, rep.ClaimsRebound, rep.XRsCreated, rep.RevisionsCreated, rep.SecretsChanged, rep.LoomWritesPerClaim, rep.LoomWrites)

	for _, c := range []struct {
		what      string
		got, want int
	}{
		{"claims Ready and Synced", rep.ClaimsReady, n},
		{"composed resources re-created", rep.ComposedRecreated, 0},
		{"composed resources deleted", rep.ComposedDeleted, 0},
		{"claims re-bound", rep.ClaimsRebound, 0},
		{"XRs created", rep.XRsCreated, 0},
		{"CompositionRevisions created", rep.RevisionsCreated, 0},
		{"XRs whose compositionRevisionRef changed", rep.RevisionRefsChanged, 0},
		{"connection Secrets changed", rep.SecretsChanged, 0},
		{"Loom's writes on unchanged claims, XRs, composed resources and Secrets", int(rep.LoomClaimWrites), 0},
	} {
		if c.got != c.want {
			t.Errorf("after the switch to Loom: %s: got %d, want %d", c.what, c.got, c.want)
		}
	}
	if t.Failed() {
		for name, c := range after.claims {
			if !c.ready || !c.synced {
				t.Logf("claim %s: %s", name, c.summary)
				break
			}
		}
		t.FailNow()
	}

	// Loom reconciles what it adopted: a change of a claim reaches its
	// composed resources, updated in place.
	edited := claimName(0)
	if err := setSize(ctx, dyn, edited, "large"); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, 2*time.Minute, time.Second, func() error {
		return composedHold(ctx, dyn, after, before.claims[edited].xr, "large")
	}); err != nil {
		t.Fatalf("Loom did not carry claim %s's change to its composed resources: %v", edited, err)
	}
	// Writing them, Loom took their fields over from Crossplane's field
	// managers, and said so.
	if err := poll(ctx, time.Minute, time.Second, func() error {
		return tookOver(ctx, dyn, kube, after, before.claims[edited].xr)
	}); err != nil {
		t.Fatalf("Loom did not take over the fields of claim %s's composed resources: %v", edited, err)
	}

	// Deleting a claim Crossplane created deletes its XR and composed
	// resources, and Crossplane's finalizers do not hold them.
	gone := claimName(1)
	goneXR := before.claims[gone].xr
	if err := dyn.Resource(claimGVR).Namespace(namespace).Delete(ctx, gone, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("cannot delete claim %s: %v", gone, err)
	}
	if err := poll(ctx, 2*time.Minute, time.Second, func() error {
		return deleted(ctx, dyn, gone, goneXR, before.xrRefs[goneXR])
	}); err != nil {
		t.Fatalf("deleting claim %s with Loom running: %v", gone, err)
	}
	logf("claim %s, its XR and its composed resources deleted by Loom", gone)

	// And back: Loom stops, Crossplane starts again and keeps every claim
	// Ready, and it carries a change of a claim to the composed resources
	// Loom last wrote.
	stopLoom()
	xp, err = bench.StartCrossplane(ctx, cluster, kube, xpDir, filepath.Join(stateDir, "crossplane-2"), logf)
	if err != nil {
		t.Fatal(err)
	}
	xpRunning = true
	if err := setSize(ctx, dyn, edited, "medium"); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, 3*time.Minute, time.Second, func() error {
		return composedHold(ctx, dyn, after, before.claims[edited].xr, "medium")
	}); err != nil {
		t.Fatalf("Crossplane did not carry claim %s's change to its composed resources after Loom: %v", edited, err)
	}
	if err := poll(ctx, readyTimeout, 2*time.Second, func() error { return allReady(ctx, dyn, kube, n-1) }); err != nil {
		t.Fatalf("claims not Ready after switching back to Crossplane: %v", err)
	}
	back, err := record(ctx, dyn, kube)
	if err != nil {
		t.Fatal(err)
	}
	for name, uid := range after.composed {
		if got, ok := back.composed[name]; ok && got != uid {
			t.Errorf("Crossplane re-created composed resource %s after Loom", name)
		}
	}
	if len(back.composed) != 3*(n-1) {
		t.Errorf("after switching back to Crossplane: %d composed resources, want %d", len(back.composed), 3*(n-1))
	}
	logf("switched back to Crossplane: %d claims Ready", len(back.claims))
}

// crossplaneDir returns the folder of upstream Crossplane's binary and
// CRDs, as `make crossplane` builds it ($LOOM_CROSSPLANE_DIR, else
// .cache/crossplane/<version of tools/crossplane/go.mod>). When it is
// missing the test is skipped, or fails with CI set.
func crossplaneDir(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs Crossplane and Loom on a local control plane; skipped with -short")
	}
	dir := os.Getenv("LOOM_CROSSPLANE_DIR")
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		root, err := stack.FindRepoRoot(wd)
		if err != nil {
			t.Fatal(err)
		}
		v, err := crossplaneVersion(filepath.Join(root, "tools", "crossplane", "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, ".cache", "crossplane", v)
	}
	for _, p := range []string{filepath.Join(dir, "crossplane"), filepath.Join(dir, "crds")} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("no upstream Crossplane with CI set: %v (make crossplane builds it)", err)
			}
			t.Skipf("no upstream Crossplane: %v (make crossplane builds it)", err)
		}
	}
	return dir
}

// crossplaneVersion reads the required github.com/crossplane/crossplane
// version from a go.mod.
func crossplaneVersion(gomod string) (string, error) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", gomod, err)
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "require" && f[1] == "github.com/crossplane/crossplane" {
			return f[2], nil
		}
	}
	return "", fmt.Errorf("cannot find the crossplane version in %s", gomod)
}

// migrateCheck runs `loomctl migrate check --output json` on the cluster
// and checks that it passes and counts n claims, n XRs and 3n composed
// resources to adopt.
func migrateCheck(ctx context.Context, root, kubeconfig string, n int) error {
	bin := os.Getenv("LOOM_BIN_DIR")
	if bin == "" {
		bin = filepath.Join(root, "bin")
	}
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "loomctl"), "migrate", "check", "--kubeconfig", kubeconfig, "--output", "json")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("loomctl migrate check: %w: %s%s", err, out.String(), errOut.String())
	}
	var rep struct {
		OK    bool           `json:"ok"`
		Adopt map[string]int `json:"adopt"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return fmt.Errorf("cannot decode the output of loomctl migrate check: %w: %s", err, out.String())
	}
	want := map[string]int{"claims": n, "composite resources": n, "composed resources": 3 * n}
	for k, v := range want {
		if rep.Adopt[k] != v {
			return fmt.Errorf("loomctl migrate check counts %d %s to adopt, want %d: %s", rep.Adopt[k], k, v, out.String())
		}
	}
	return nil
}

// loomOnlyCRDs copies Loom's own CRDs (group loom.dev) into dir.
func loomOnlyCRDs(root, dir string) (string, error) {
	src := filepath.Join(root, "deploy", "helm", "loom", "crds")
	files, err := filepath.Glob(filepath.Join(src, "loom.dev_*.yaml"))
	if err != nil || len(files) == 0 {
		return "", fmt.Errorf("cannot find Loom's CRDs in %s: %v", src, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

func claimName(i int) string { return fmt.Sprintf("c-%05d", i) }

// createClaims creates n claims of the workload, eight at a time.
func createClaims(ctx context.Context, dyn dynamic.Interface, n int) error {
	claims := dyn.Resource(claimGVR).Namespace(namespace)
	next := make(chan int)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range next {
				name := claimName(i)
				c := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": claimGVR.GroupVersion().String(),
					"kind":       "NopStack",
					"metadata":   map[string]any{"name": name, "namespace": namespace},
					"spec": map[string]any{
						"parameters":                 map[string]any{"size": "small"},
						"compositionRef":             map[string]any{"name": composition},
						"writeConnectionSecretToRef": map[string]any{"name": name + "-conn"},
					},
				}}
				if _, err := claims.Create(ctx, c, metav1.CreateOptions{}); err != nil && !kerrors.IsAlreadyExists(err) {
					mu.Lock()
					first = errors.Join(first, fmt.Errorf("cannot create claim %s: %w", name, err))
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// allReady checks that n claims exist, each Ready and Synced with its
// connection Secret written.
func allReady(ctx context.Context, dyn dynamic.Interface, kube kubernetes.Interface, n int) error {
	s, err := record(ctx, dyn, kube)
	if err != nil {
		return err
	}
	if len(s.claims) != n {
		return fmt.Errorf("%d claims, want %d", len(s.claims), n)
	}
	ready := 0
	var example string
	for name, c := range s.claims {
		if c.ready && c.synced && len(s.secrets[namespace+"/"+name+"-conn"]["endpoint"]) > 0 {
			ready++
		} else if example == "" {
			example = name + ": " + c.summary
		}
	}
	if ready != n {
		return fmt.Errorf("%d of %d claims Ready and Synced with their connection Secret (%s)", ready, n, example)
	}
	return nil
}

// record lists the workload's objects.
func record(ctx context.Context, dyn dynamic.Interface, kube kubernetes.Interface) (*state, error) {
	s := &state{
		claims: map[string]claimState{}, xrs: map[string]types.UID{}, composed: map[string]types.UID{},
		xrRefs: map[string][]string{}, xrRevs: map[string]string{}, secrets: map[string]map[string][]byte{}, revisions: map[string]types.UID{},
	}
	l, err := dyn.Resource(claimGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot list claims: %w", err)
	}
	for _, c := range l.Items {
		xr, _, _ := unstructured.NestedString(c.Object, "spec", "resourceRef", "name")
		s.claims[c.GetName()] = claimState{
			uid: c.GetUID(), xr: xr,
			ready: conditionTrue(&c, "Ready"), synced: conditionTrue(&c, "Synced"), summary: conditions(&c),
		}
	}
	if l, err = dyn.Resource(xrGVR).List(ctx, metav1.ListOptions{}); err != nil {
		return nil, fmt.Errorf("cannot list XRs: %w", err)
	}
	for _, x := range l.Items {
		s.xrs[x.GetName()] = x.GetUID()
		s.xrRevs[x.GetName()], _, _ = unstructured.NestedString(x.Object, "spec", "compositionRevisionRef", "name")
		refs, _, _ := unstructured.NestedSlice(x.Object, "spec", "resourceRefs")
		for _, r := range refs {
			if m, ok := r.(map[string]any); ok {
				name, _ := m["name"].(string)
				s.xrRefs[x.GetName()] = append(s.xrRefs[x.GetName()], name)
			}
		}
		sort.Strings(s.xrRefs[x.GetName()])
	}
	if l, err = dyn.Resource(composedGVR).List(ctx, metav1.ListOptions{}); err != nil {
		return nil, fmt.Errorf("cannot list composed resources: %w", err)
	}
	for _, c := range l.Items {
		s.composed[c.GetName()] = c.GetUID()
	}
	if l, err = dyn.Resource(revisionGVR).List(ctx, metav1.ListOptions{}); err != nil {
		return nil, fmt.Errorf("cannot list CompositionRevisions: %w", err)
	}
	for _, r := range l.Items {
		s.revisions[r.GetName()] = r.GetUID()
	}
	for _, ns := range []string{namespace, stack.CrossplaneNamespace} {
		sl, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("cannot list Secrets in %s: %w", ns, err)
		}
		for _, sec := range sl.Items {
			if sec.Type == connectionSecretType {
				s.secrets[ns+"/"+sec.Name] = sec.Data
			}
		}
	}
	return s, nil
}

// compare fills in rep's counts from the states before and after the
// switch.
func compare(rep *Report, before, after *state) {
	for name, c := range after.claims {
		if c.ready && c.synced {
			rep.ClaimsReady++
		}
		b := before.claims[name]
		if c.xr != b.xr || after.xrs[c.xr] != before.xrs[b.xr] {
			rep.ClaimsRebound++
		}
	}
	for name, uid := range after.xrs {
		if before.xrs[name] != uid {
			rep.XRsCreated++
		}
	}
	for name, uid := range after.composed {
		if before.composed[name] != uid {
			rep.ComposedRecreated++
		}
	}
	for name := range before.composed {
		if _, ok := after.composed[name]; !ok {
			rep.ComposedDeleted++
		}
	}
	for name, rev := range after.xrRevs {
		if rev != before.xrRevs[name] {
			rep.RevisionRefsChanged++
		}
	}
	for name, uid := range after.revisions {
		if before.revisions[name] != uid {
			rep.RevisionsCreated++
		}
	}
	for name, data := range before.secrets {
		got, ok := after.secrets[name]
		if !ok || len(got) != len(data) {
			rep.SecretsChanged++
			continue
		}
		for k, v := range data {
			if !bytes.Equal(got[k], v) {
				rep.SecretsChanged++
				break
			}
		}
	}
}

// perClaimResource reports whether writes on resource are about the
// workload's claims (rather than, say, its XRD or Composition).
func perClaimResource(resource string) bool {
	r, _, _ := strings.Cut(resource, "/")
	switch r {
	case claimGVR.Resource, xrGVR.Resource, composedGVR.Resource, "secrets":
		return true
	}
	return false
}

// awaitDrained waits until Loom's watcher has published at least n events
// to each work stream (its initial resync names every claim and XR) and
// every stream has been empty for three seconds, and returns when the
// streams were first seen empty in that quiet spell.
func awaitDrained(ctx context.Context, url string, n int, timeout time.Duration) (time.Time, error) {
	nc, err := nats.Connect(url, nats.Name("loom-migrate-test"))
	if err != nil {
		return time.Time{}, fmt.Errorf("cannot connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return time.Time{}, fmt.Errorf("cannot open JetStream: %w", err)
	}
	var emptySince time.Time
	var last string
	err = poll(ctx, timeout, 250*time.Millisecond, func() error {
		var pending uint64
		var status []string
		for _, svc := range bus.Services {
			name := bus.StreamName(svc)
			s, err := js.Stream(ctx, name)
			if err != nil {
				return fmt.Errorf("cannot open stream %s: %w", name, err)
			}
			info, err := s.Info(ctx)
			if err != nil {
				return fmt.Errorf("cannot read stream %s: %w", name, err)
			}
			if info.State.LastSeq < uint64(n) {
				return fmt.Errorf("stream %s: %d messages so far, want at least %d", name, info.State.LastSeq, n)
			}
			pending += info.State.Msgs
			status = append(status, fmt.Sprintf("%s %d published, %d pending", name, info.State.LastSeq, info.State.Msgs))
		}
		last = strings.Join(status, "; ")
		if pending > 0 {
			emptySince = time.Time{}
			return errors.New(last)
		}
		if emptySince.IsZero() {
			emptySince = time.Now()
		}
		if time.Since(emptySince) < 3*time.Second {
			return errors.New("streams empty for less than three seconds")
		}
		return nil
	})
	return emptySince, err
}

// setSize sets a claim's spec.parameters.size.
func setSize(ctx context.Context, dyn dynamic.Interface, claim, size string) error {
	patch := fmt.Appendf(nil, `{"spec":{"parameters":{"size":%q}}}`, size)
	if _, err := dyn.Resource(claimGVR).Namespace(namespace).Patch(ctx, claim, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cannot set the size of claim %s: %w", claim, err)
	}
	return nil
}

// composedHold checks that XR xr's composed resources (as recorded in s)
// are the same objects and hold the patches of size.
func composedHold(ctx context.Context, dyn dynamic.Interface, s *state, xr, size string) error {
	want := map[string]string{"nop-a": size, "nop-b": "b-" + size, "nop-c": strings.ToUpper(size)}
	for _, name := range s.xrRefs[xr] {
		c, err := dyn.Resource(composedGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.GetUID() != s.composed[name] {
			return fmt.Errorf("composed resource %s was re-created", name)
		}
		tmpl := c.GetAnnotations()["crossplane.io/composition-resource-name"]
		got, _, _ := unstructured.NestedString(c.Object, "spec", "forProvider", "fields", "size")
		if got != want[tmpl] {
			return fmt.Errorf("composed resource %s (%s): size %q, want %q", name, tmpl, got, want[tmpl])
		}
	}
	return nil
}

// tookOver checks that no Crossplane field manager is left on XR xr's
// composed resources and that an event on the XR says Loom took them over.
func tookOver(ctx context.Context, dyn dynamic.Interface, kube kubernetes.Interface, s *state, xr string) error {
	for _, name := range s.xrRefs[xr] {
		c, err := dyn.Resource(composedGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, e := range c.GetManagedFields() {
			if e.Manager == "crossplane" || strings.HasPrefix(e.Manager, "apiextensions.crossplane.io/") {
				return fmt.Errorf("composed resource %s still has Crossplane's field manager %s", name, e.Manager)
			}
		}
	}
	evs, err := kube.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + xr + ",reason=TakeFieldOwnership"})
	if err != nil {
		return fmt.Errorf("cannot list events: %w", err)
	}
	if len(evs.Items) == 0 {
		return fmt.Errorf("no TakeFieldOwnership event about XR %s", xr)
	}
	return nil
}

// deleted checks that the claim, its XR and its composed resources are
// gone.
func deleted(ctx context.Context, dyn dynamic.Interface, claim, xr string, composed []string) error {
	if c, err := dyn.Resource(claimGVR).Namespace(namespace).Get(ctx, claim, metav1.GetOptions{}); !kerrors.IsNotFound(err) {
		return fmt.Errorf("claim %s still exists (finalizers %v): %v", claim, finalizers(c), err)
	}
	if x, err := dyn.Resource(xrGVR).Get(ctx, xr, metav1.GetOptions{}); !kerrors.IsNotFound(err) {
		return fmt.Errorf("XR %s still exists (finalizers %v): %v", xr, finalizers(x), err)
	}
	for _, name := range composed {
		if c, err := dyn.Resource(composedGVR).Get(ctx, name, metav1.GetOptions{}); !kerrors.IsNotFound(err) {
			return fmt.Errorf("composed resource %s still exists (finalizers %v): %v", name, finalizers(c), err)
		}
	}
	return nil
}

func finalizers(u *unstructured.Unstructured) []string {
	if u == nil {
		return nil
	}
	return u.GetFinalizers()
}

func conditionTrue(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m["status"] == string(corev1.ConditionTrue)
		}
	}
	return false
}

func conditions(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var s []string
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			s = append(s, fmt.Sprintf("%v=%v %v: %v", m["type"], m["status"], m["reason"], m["message"]))
		}
	}
	return strings.Join(s, "; ")
}

// writeReport writes rep to -out, if set.
func writeReport(t *testing.T, rep *Report) {
	t.Helper()
	if *flagOut == "" {
		return
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(*flagOut), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*flagOut, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("report written to %s", *flagOut)
}

// poll calls f every interval until it returns nil or timeout passes.
func poll(ctx context.Context, timeout, interval time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not done within %s: %w", timeout, err)
		case <-time.After(interval):
		}
	}
}

func round(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// testLog writes the stacks' progress lines to the test log until the
// test's last cleanup (a stack's goroutines may still write after it).
type testLog struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func newTestLog(t *testing.T) *testLog {
	l := &testLog{t: t}
	t.Cleanup(func() { l.mu.Lock(); l.done = true; l.mu.Unlock() })
	return l
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
