package claim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	xv1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

func xrd(mod ...func(*xv1.CompositeResourceDefinition)) *xv1.CompositeResourceDefinition {
	d := &xv1.CompositeResourceDefinition{}
	d.Spec.Group = "example.org"
	d.Spec.Names.Kind = "XDatabase"
	d.Spec.ClaimNames = d.Spec.Names.DeepCopy()
	d.Spec.ClaimNames.Kind = "Database"
	d.Spec.Versions = []xv1.CompositeResourceDefinitionVersion{{Name: "v1", Referenceable: true, Served: true}}
	for _, fn := range mod {
		fn(d)
	}
	return d
}

func u(o map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: o} }

func claimObj(spec map[string]any, meta map[string]any) *unstructured.Unstructured {
	m := map[string]any{"name": "db", "namespace": "team-a"}
	for k, v := range meta {
		m[k] = v
	}
	return u(map[string]any{"apiVersion": "example.org/v1", "kind": "Database", "metadata": m, "spec": spec})
}

func TestCompositeIntent(t *testing.T) {
	claimRef := map[string]any{"apiVersion": "example.org/v1", "kind": "Database", "namespace": "team-a", "name": "db"}
	type args struct {
		cm  *unstructured.Unstructured
		xr  *unstructured.Unstructured
		xrd *xv1.CompositeResourceDefinition
	}
	cases := map[string]struct {
		reason string
		args   args
		want   map[string]any
	}{
		"Propagates": {
			reason: "The claim's spec minus claim-only fields, its labels and annotations minus Kubernetes' own, the claim labels and a claimRef make up the intent.",
			args: args{
				cm: claimObj(map[string]any{
					"parameters":                 map[string]any{"size": "small", "replicas": int64(2)},
					"compositionRef":             map[string]any{"name": "c"},
					"compositionSelector":        map[string]any{"matchLabels": map[string]any{"a": "b"}},
					"compositionUpdatePolicy":    "Automatic",
					"compositionRevisionRef":     map[string]any{"name": "c-1"},
					"compositeDeletePolicy":      "Foreground",
					"resourceRef":                map[string]any{"apiVersion": "example.org/v1", "kind": "XDatabase", "name": "db-x2k9q"},
					"writeConnectionSecretToRef": map[string]any{"name": "db-conn"},
					"reclaimPolicy":              "Retain",
					"resourceRefs":               []any{map[string]any{"name": "smuggled"}},
					"claimRef":                   map[string]any{"name": "smuggled"},
				}, map[string]any{
					"labels": map[string]any{"team": "a", "app.kubernetes.io/name": "db"},
					"annotations": map[string]any{
						"note": "x",
						"kubectl.kubernetes.io/last-applied-configuration": "{}",
						"foo.k8s.io/bar": "y",
					},
				}),
				xrd: xrd(),
			},
			want: map[string]any{
				"apiVersion": "example.org/v1",
				"kind":       "XDatabase",
				"metadata": map[string]any{
					"name":        "db-x2k9q",
					"labels":      map[string]any{"team": "a", LabelClaimName: "db", LabelClaimNamespace: "team-a"},
					"annotations": map[string]any{"note": "x"},
				},
				"spec": map[string]any{
					"parameters":              map[string]any{"size": "small", "replicas": int64(2)},
					"compositionRef":          map[string]any{"name": "c"},
					"compositionSelector":     map[string]any{"matchLabels": map[string]any{"a": "b"}},
					"compositionUpdatePolicy": "Automatic",
					"claimRef":                claimRef,
				},
			},
		},
		"ManualRevision": {
			reason: "Under the Manual update policy the claim's compositionRevisionRef propagates.",
			args: args{
				cm: claimObj(map[string]any{
					"compositionUpdatePolicy": "Manual",
					"compositionRevisionRef":  map[string]any{"name": "c-1"},
					"resourceRef":             map[string]any{"name": "db-x2k9q"},
				}, nil),
				xrd: xrd(),
			},
			want: map[string]any{
				"apiVersion": "example.org/v1",
				"kind":       "XDatabase",
				"metadata": map[string]any{
					"name":   "db-x2k9q",
					"labels": map[string]any{LabelClaimName: "db", LabelClaimNamespace: "team-a"},
				},
				"spec": map[string]any{
					"compositionUpdatePolicy": "Manual",
					"compositionRevisionRef":  map[string]any{"name": "c-1"},
					"claimRef":                claimRef,
				},
			},
		},
		"ManualFromComposite": {
			reason: "Without a policy on the claim, the composite resource's Manual policy lets compositionRevisionRef propagate.",
			args: args{
				cm: claimObj(map[string]any{
					"compositionRevisionRef": map[string]any{"name": "c-1"},
					"resourceRef":            map[string]any{"name": "db-x2k9q"},
				}, nil),
				xr:  u(map[string]any{"spec": map[string]any{"compositionUpdatePolicy": "Manual"}}),
				xrd: xrd(),
			},
			want: map[string]any{
				"apiVersion": "example.org/v1",
				"kind":       "XDatabase",
				"metadata": map[string]any{
					"name":   "db-x2k9q",
					"labels": map[string]any{LabelClaimName: "db", LabelClaimNamespace: "team-a"},
				},
				"spec": map[string]any{
					"compositionUpdatePolicy": "Manual",
					"compositionRevisionRef":  map[string]any{"name": "c-1"},
					"claimRef":                claimRef,
				},
			},
		},
		"ManualFromDefinition": {
			reason: "Without a policy on the claim or a composite resource yet, the XRD's default policy is stated (the API server would default it and record it as the binder's), and under Manual the claim's compositionRevisionRef propagates.",
			args: args{
				cm: claimObj(map[string]any{
					"compositionRevisionRef": map[string]any{"name": "c-1"},
					"resourceRef":            map[string]any{"name": "db-x2k9q"},
				}, nil),
				xrd: xrd(func(d *xv1.CompositeResourceDefinition) {
					manual := xv1.UpdateManual
					d.Spec.DefaultCompositionUpdatePolicy = &manual
				}),
			},
			want: map[string]any{
				"apiVersion": "example.org/v1",
				"kind":       "XDatabase",
				"metadata": map[string]any{
					"name":   "db-x2k9q",
					"labels": map[string]any{LabelClaimName: "db", LabelClaimNamespace: "team-a"},
				},
				"spec": map[string]any{
					"compositionUpdatePolicy": "Manual",
					"compositionRevisionRef":  map[string]any{"name": "c-1"},
					"claimRef":                claimRef,
				},
			},
		},
		"EnforcedComposition": {
			reason: "When the XRD enforces a Composition the claim's compositionRef does not propagate.",
			args: args{
				cm: claimObj(map[string]any{
					"compositionRef": map[string]any{"name": "mine"},
					"resourceRef":    map[string]any{"name": "db-x2k9q"},
				}, nil),
				xrd: xrd(func(d *xv1.CompositeResourceDefinition) {
					d.Spec.EnforcedCompositionRef = &xv1.CompositionReference{Name: "enforced"}
				}),
			},
			want: map[string]any{
				"apiVersion": "example.org/v1",
				"kind":       "XDatabase",
				"metadata": map[string]any{
					"name":   "db-x2k9q",
					"labels": map[string]any{LabelClaimName: "db", LabelClaimNamespace: "team-a"},
				},
				"spec": map[string]any{"compositionUpdatePolicy": "Automatic", "claimRef": claimRef},
			},
		},
		"ExternalNameFromClaim": {
			reason: "The claim's external name flows to a composite resource that has none.",
			args: args{
				cm: claimObj(map[string]any{"resourceRef": map[string]any{"name": "db-x2k9q"}},
					map[string]any{"annotations": map[string]any{AnnotationExternalName: "from-claim"}}),
				xr:  u(map[string]any{"metadata": map[string]any{"name": "db-x2k9q"}}),
				xrd: xrd(),
			},
			want: map[string]any{
				"apiVersion": "example.org/v1",
				"kind":       "XDatabase",
				"metadata": map[string]any{
					"name":        "db-x2k9q",
					"labels":      map[string]any{LabelClaimName: "db", LabelClaimNamespace: "team-a"},
					"annotations": map[string]any{AnnotationExternalName: "from-claim"},
				},
				"spec": map[string]any{"compositionUpdatePolicy": "Automatic", "claimRef": claimRef},
			},
		},
		"ExternalNameKept": {
			reason: "A composite resource's existing external name is kept over the claim's.",
			args: args{
				cm: claimObj(map[string]any{"resourceRef": map[string]any{"name": "db-x2k9q"}},
					map[string]any{"annotations": map[string]any{AnnotationExternalName: "from-claim"}}),
				xr: u(map[string]any{"metadata": map[string]any{
					"name":        "db-x2k9q",
					"annotations": map[string]any{AnnotationExternalName: "existing"},
				}}),
				xrd: xrd(),
			},
			want: map[string]any{
				"apiVersion": "example.org/v1",
				"kind":       "XDatabase",
				"metadata": map[string]any{
					"name":        "db-x2k9q",
					"labels":      map[string]any{LabelClaimName: "db", LabelClaimNamespace: "team-a"},
					"annotations": map[string]any{AnnotationExternalName: "existing"},
				},
				"spec": map[string]any{"compositionUpdatePolicy": "Automatic", "claimRef": claimRef},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := CompositeIntent(tc.args.cm, tc.args.xr, tc.args.xrd)
			if diff := cmp.Diff(tc.want, got.Object); diff != "" {
				t.Errorf("\n%s\nCompositeIntent(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestBackPropagate(t *testing.T) {
	type want struct {
		spec        map[string]any
		annotations map[string]string
		changed     bool
	}
	cases := map[string]struct {
		reason string
		cm     *unstructured.Unstructured
		xr     *unstructured.Unstructured
		xrd    *xv1.CompositeResourceDefinition
		want   want
	}{
		"NothingToPropagate": {
			reason: "A composite resource without references or an external name changes nothing.",
			cm:     claimObj(map[string]any{"parameters": map[string]any{"a": "b"}}, nil),
			xr:     u(map[string]any{"spec": map[string]any{"parameters": map[string]any{"a": "b"}}}),
			xrd:    xrd(),
			want:   want{spec: map[string]any{"parameters": map[string]any{"a": "b"}}},
		},
		"SelectedComposition": {
			reason: "The composition the renderer selected, and its revision under Automatic, flow back to a claim that has none.",
			cm:     claimObj(map[string]any{"compositionSelector": map[string]any{"matchLabels": map[string]any{"a": "b"}}}, nil),
			xr: u(map[string]any{"spec": map[string]any{
				"compositionRef":              map[string]any{"name": "picked"},
				"compositionRevisionRef":      map[string]any{"name": "picked-abc"},
				"compositionRevisionSelector": map[string]any{"matchLabels": map[string]any{"channel": "stable"}},
				"compositionUpdatePolicy":     "Automatic",
			}}),
			xrd: xrd(),
			want: want{
				spec: map[string]any{
					"compositionSelector":         map[string]any{"matchLabels": map[string]any{"a": "b"}},
					"compositionRef":              map[string]any{"name": "picked"},
					"compositionRevisionRef":      map[string]any{"name": "picked-abc"},
					"compositionRevisionSelector": map[string]any{"matchLabels": map[string]any{"channel": "stable"}},
				},
				changed: true,
			},
		},
		"ClaimOpinionKept": {
			reason: "A claim's own compositionRef and revision selector are not overwritten.",
			cm: claimObj(map[string]any{
				"compositionRef":              map[string]any{"name": "mine"},
				"compositionRevisionSelector": map[string]any{"matchLabels": map[string]any{"channel": "dev"}},
			}, nil),
			xr: u(map[string]any{"spec": map[string]any{
				"compositionRef":              map[string]any{"name": "other"},
				"compositionRevisionSelector": map[string]any{"matchLabels": map[string]any{"channel": "stable"}},
			}}),
			xrd: xrd(),
			want: want{spec: map[string]any{
				"compositionRef":              map[string]any{"name": "mine"},
				"compositionRevisionSelector": map[string]any{"matchLabels": map[string]any{"channel": "dev"}},
			}},
		},
		"Enforced": {
			reason: "An enforced composition always flows back, over the claim's own.",
			cm:     claimObj(map[string]any{"compositionRef": map[string]any{"name": "mine"}}, nil),
			xr:     u(map[string]any{"spec": map[string]any{"compositionRef": map[string]any{"name": "enforced"}}}),
			xrd: xrd(func(d *xv1.CompositeResourceDefinition) {
				d.Spec.EnforcedCompositionRef = &xv1.CompositionReference{Name: "enforced"}
			}),
			want: want{spec: map[string]any{"compositionRef": map[string]any{"name": "enforced"}}, changed: true},
		},
		"ManualRevisionNotPropagated": {
			reason: "Under Manual the claim owns compositionRevisionRef; the composite resource's does not flow back.",
			cm:     claimObj(map[string]any{"compositionRevisionRef": map[string]any{"name": "c-1"}}, nil),
			xr: u(map[string]any{"spec": map[string]any{
				"compositionUpdatePolicy": "Manual",
				"compositionRevisionRef":  map[string]any{"name": "c-2"},
			}}),
			xrd:  xrd(),
			want: want{spec: map[string]any{"compositionRevisionRef": map[string]any{"name": "c-1"}}},
		},
		"ExternalName": {
			reason: "The composite resource's external name flows back to the claim.",
			cm:     claimObj(map[string]any{}, map[string]any{"annotations": map[string]any{"keep": "me"}}),
			xr:     u(map[string]any{"metadata": map[string]any{"annotations": map[string]any{AnnotationExternalName: "ext"}}}),
			xrd:    xrd(),
			want: want{
				spec:        map[string]any{},
				annotations: map[string]string{"keep": "me", AnnotationExternalName: "ext"},
				changed:     true,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.cm.DeepCopy()
			got, changed := BackPropagate(tc.cm, tc.xr, tc.xrd)
			spec, _, _ := unstructured.NestedMap(got.Object, "spec")
			if diff := cmp.Diff(tc.want.spec, spec); diff != "" {
				t.Errorf("\n%s\nBackPropagate(...) spec: -want, +got:\n%s", tc.reason, diff)
			}
			if tc.want.annotations != nil {
				if diff := cmp.Diff(tc.want.annotations, got.GetAnnotations()); diff != "" {
					t.Errorf("\n%s\nBackPropagate(...) annotations: -want, +got:\n%s", tc.reason, diff)
				}
			}
			if diff := cmp.Diff(tc.want.changed, changed); diff != "" {
				t.Errorf("\n%s\nBackPropagate(...) changed: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(before.Object, tc.cm.Object); diff != "" {
				t.Errorf("\n%s\nBackPropagate(...) modified its input: -before, +after:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestBind(t *testing.T) {
	type want struct {
		ref        map[string]any
		finalizers []string
		changed    bool
	}
	cases := map[string]struct {
		reason string
		cm     *unstructured.Unstructured
		name   string
		want   want
	}{
		"Dynamic": {
			reason: "An unbound claim gets the generated name and the finalizer.",
			cm:     claimObj(map[string]any{}, nil),
			name:   "db-x2k9q",
			want: want{
				ref:        map[string]any{"apiVersion": "example.org/v1", "kind": "XDatabase", "name": "db-x2k9q"},
				finalizers: []string{Finalizer},
				changed:    true,
			},
		},
		"StaticNameKept": {
			reason: "A claim naming its composite resource keeps that name; the missing apiVersion and kind are filled in.",
			cm:     claimObj(map[string]any{"resourceRef": map[string]any{"name": "existing"}}, map[string]any{"finalizers": []any{"other"}}),
			want: want{
				ref:        map[string]any{"apiVersion": "example.org/v1", "kind": "XDatabase", "name": "existing"},
				finalizers: []string{"other", Finalizer},
				changed:    true,
			},
		},
		"AlreadyBound": {
			reason: "A bound claim with the finalizer is not changed.",
			cm: claimObj(map[string]any{"resourceRef": map[string]any{"apiVersion": "example.org/v1", "kind": "XDatabase", "name": "db-x2k9q"}},
				map[string]any{"finalizers": []any{Finalizer}}),
			want: want{
				ref:        map[string]any{"apiVersion": "example.org/v1", "kind": "XDatabase", "name": "db-x2k9q"},
				finalizers: []string{Finalizer},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, changed := Bind(tc.cm, xrd(), tc.name)
			ref, _, _ := unstructured.NestedMap(got.Object, "spec", "resourceRef")
			if diff := cmp.Diff(tc.want.ref, ref); diff != "" {
				t.Errorf("\n%s\nBind(...) resourceRef: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.finalizers, got.GetFinalizers()); diff != "" {
				t.Errorf("\n%s\nBind(...) finalizers: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.changed, changed); diff != "" {
				t.Errorf("\n%s\nBind(...) changed: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestStatusIntent(t *testing.T) {
	conds := []any{map[string]any{"type": "Ready", "status": "True"}}
	cases := map[string]struct {
		reason string
		src    *unstructured.Unstructured
		want   map[string]any
	}{
		"MirrorsUserFields": {
			reason: "The composite resource's status minus its machinery is mirrored, with the claim's own conditions.",
			src: u(map[string]any{"status": map[string]any{
				"address":             "10.0.0.1",
				"loom":                map[string]any{"omittedResources": int64(0)},
				"conditions":          []any{map[string]any{"type": "Synced", "status": "False"}},
				"connectionDetails":   map[string]any{"lastPublishedTime": "2024-01-01T00:00:00Z"},
				"claimConditionTypes": []any{"Custom"},
				"watchedResourceRefs": []any{},
			}}),
			want: map[string]any{
				"address":    "10.0.0.1",
				"loom":       map[string]any{"omittedResources": int64(0)},
				"conditions": conds,
			},
		},
		"NoStatus": {
			reason: "A composite resource without status mirrors nothing.",
			src:    u(map[string]any{}),
			want:   map[string]any{"conditions": conds},
		},
	}
	cm := claimObj(map[string]any{}, nil)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := StatusIntent(cm, tc.src, conds)
			want := map[string]any{
				"apiVersion": "example.org/v1",
				"kind":       "Database",
				"metadata":   map[string]any{"name": "db", "namespace": "team-a"},
				"status":     tc.want,
			}
			if diff := cmp.Diff(want, got.Object); diff != "" {
				t.Errorf("\n%s\nStatusIntent(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestLastPublished(t *testing.T) {
	const t1, t2 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"
	claim := func(wants bool, cur string) *unstructured.Unstructured {
		spec := map[string]any{}
		if wants {
			spec["writeConnectionSecretToRef"] = map[string]any{"name": "db-conn"}
		}
		cm := claimObj(spec, nil)
		if cur != "" {
			cm.Object["status"] = map[string]any{"connectionDetails": map[string]any{"lastPublishedTime": cur}}
		}
		return cm
	}
	xr := func(ready bool, last string) *unstructured.Unstructured {
		st := "False"
		if ready {
			st = "True"
		}
		status := map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": st}}}
		if last != "" {
			status["connectionDetails"] = map[string]any{"lastPublishedTime": last}
		}
		return u(map[string]any{"status": status})
	}
	cases := map[string]struct {
		reason string
		cm     *unstructured.Unstructured
		src    *unstructured.Unstructured
		want   string
	}{
		"ReadyXR":      {reason: "A Ready XR's time is the claim's, when the claim asks for a Secret.", cm: claim(true, ""), src: xr(true, t1), want: t1},
		"NotReadyYet":  {reason: "Before the XR is Ready the claim's Secret is not written: no time.", cm: claim(true, ""), src: xr(false, t1), want: ""},
		"NotAsked":     {reason: "A claim without writeConnectionSecretToRef gets no time.", cm: claim(false, ""), src: xr(true, t1), want: ""},
		"Newer":        {reason: "A newer publication (a rotated password) moves the claim's time, Ready or not.", cm: claim(true, t1), src: xr(false, t2), want: t2},
		"AdoptedNewer": {reason: "A claim's own later time (Crossplane's, written after the XR's) stays.", cm: claim(true, t2), src: xr(true, t1), want: t2},
		"KeepsOwn":     {reason: "A claim's time is kept when the XR has none.", cm: claim(true, t1), src: xr(true, ""), want: t1},
		"SelfSource":   {reason: "With the claim as its own source (paused, refused), its time stays.", cm: claim(true, t1), want: t1},
		"Unparsable":   {reason: "An XR time that does not parse does not replace the claim's.", cm: claim(true, t1), src: xr(true, "yesterday"), want: t1},
		"NoTimeAnyway": {reason: "Nothing anywhere: no time.", cm: claim(true, ""), src: xr(true, ""), want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := tc.src
			if src == nil {
				src = tc.cm
			}
			if diff := cmp.Diff(tc.want, lastPublished(tc.cm, src)); diff != "" {
				t.Errorf("%s\nlastPublished(...): -want, +got:\n%s", tc.reason, diff)
			}
			got := StatusIntent(tc.cm, src, nil)
			gotT, _, _ := unstructured.NestedString(got.Object, "status", "connectionDetails", "lastPublishedTime")
			if gotT != tc.want {
				t.Errorf("%s\nStatusIntent(...): lastPublishedTime %q, want %q", tc.reason, gotT, tc.want)
			}
		})
	}
}

func TestIsReserved(t *testing.T) {
	cases := map[string]struct {
		reason string
		key    string
		want   bool
	}{
		"Kubectl":    {reason: "kubectl's annotations belong to Kubernetes.", key: "kubectl.kubernetes.io/last-applied-configuration", want: true},
		"K8sIO":      {reason: "Prefixes ending in k8s.io belong to Kubernetes.", key: "node.k8s.io/x", want: true},
		"Bare":       {reason: "A key without a prefix is the user's.", key: "kubernetes.io", want: false},
		"Crossplane": {reason: "Crossplane's keys are copied.", key: "crossplane.io/external-name", want: false},
		"Lookalike":  {reason: "Only the prefix matters.", key: "example.org/kubernetes.io", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, isReserved(tc.key)); diff != "" {
				t.Errorf("\n%s\nisReserved(%q): -want, +got:\n%s", tc.reason, tc.key, diff)
			}
		})
	}
}

func TestPolicies(t *testing.T) {
	fg := xv1.CompositeDeleteForeground
	cases := map[string]struct {
		reason      string
		cm          *unstructured.Unstructured
		xr          *unstructured.Unstructured
		xrd         *xv1.CompositeResourceDefinition
		wantReclaim string
		wantDelete  xv1.CompositeDeletePolicy
	}{
		"Defaults": {
			reason:      "Without any policy a claim deletes its composite resource in the background.",
			cm:          claimObj(map[string]any{}, nil),
			xrd:         xrd(),
			wantReclaim: ReclaimDelete,
			wantDelete:  xv1.CompositeDeleteBackground,
		},
		"XRDDefault": {
			reason:      "The XRD's default delete policy applies when the claim has none.",
			cm:          claimObj(map[string]any{}, nil),
			xrd:         xrd(func(d *xv1.CompositeResourceDefinition) { d.Spec.DefaultCompositeDeletePolicy = &fg }),
			wantReclaim: ReclaimDelete,
			wantDelete:  xv1.CompositeDeleteForeground,
		},
		"ClaimWins": {
			reason:      "The claim's own policies win.",
			cm:          claimObj(map[string]any{"compositeDeletePolicy": "Background", "reclaimPolicy": "Retain"}, nil),
			xr:          u(map[string]any{"spec": map[string]any{"reclaimPolicy": "Delete"}}),
			xrd:         xrd(func(d *xv1.CompositeResourceDefinition) { d.Spec.DefaultCompositeDeletePolicy = &fg }),
			wantReclaim: ReclaimRetain,
			wantDelete:  xv1.CompositeDeleteBackground,
		},
		"CompositeRetain": {
			reason:      "A composite resource's own Retain applies when the claim has no reclaim policy.",
			cm:          claimObj(map[string]any{}, nil),
			xr:          u(map[string]any{"spec": map[string]any{"reclaimPolicy": "Retain"}}),
			xrd:         xrd(),
			wantReclaim: ReclaimRetain,
			wantDelete:  xv1.CompositeDeleteBackground,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantReclaim, ReclaimPolicy(tc.cm, tc.xr)); diff != "" {
				t.Errorf("\n%s\nReclaimPolicy(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantDelete, DeletePolicy(tc.cm, tc.xrd)); diff != "" {
				t.Errorf("\n%s\nDeletePolicy(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
