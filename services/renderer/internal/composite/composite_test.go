package composite

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
	"github.com/loomxr/loom/pkg/apis/common"
)

func TestReadyCondition(t *testing.T) {
	yes, no := true, false
	cases := map[string]struct {
		reason string
		out    *rendered
		want   common.Condition
	}{
		"AllReady": {reason: "Every resource ready: Available.",
			out:  &rendered{resources: []composed{{name: "a", ready: true}}},
			want: common.Available()},
		"NoResources": {reason: "Nothing to wait for: Available.", out: &rendered{}, want: common.Available()},
		"Unready": {reason: "Unready resources are named, sorted, at most three.",
			out:  &rendered{resources: []composed{{name: "d"}, {name: "a", ready: true}, {name: "c"}, {name: "b"}, {name: "e"}}},
			want: common.Creating().WithMessage("Unready resources: b, c, d, and 1 more")},
		"UnreadyTwo": {reason: "Two unready resources are listed as Crossplane lists them.",
			out:  &rendered{resources: []composed{{name: "b"}, {name: "a"}}},
			want: common.Creating().WithMessage("Unready resources: a, b")},
		"FunctionSaysReady": {reason: "A function's verdict wins.",
			out:  &rendered{resources: []composed{{name: "a"}}, ready: &yes},
			want: common.Available()},
		"FunctionSaysNotReady": {reason: "A function may hold back an XR whose resources are ready.",
			out:  &rendered{resources: []composed{{name: "a", ready: true}}, ready: &no},
			want: common.Creating().WithMessage("The composition function pipeline marked the composite resource not ready")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := readyCondition(tc.out)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(common.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("%s\nreadyCondition(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func nop(name string, conds ...any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource"}}
	u.SetName(name)
	if len(conds) > 0 {
		u.Object["status"] = map[string]any{"conditions": conds}
	}
	return u
}

func TestSummary(t *testing.T) {
	long := strings.Repeat("x", 600)
	out := &rendered{resources: []composed{
		{name: "ready", observed: nop("r"), ready: true},
		{name: "creating", desired: nop("c"), message: "resource does not exist yet"},
		{name: "waiting", observed: nop("w", map[string]any{"type": "Ready", "status": "False", "reason": "Provisioning"}), message: "Ready condition is False"},
		{name: "broken", observed: nop("b"), err: errors.New("bad"), message: long},
		{name: "rejected", desired: nop("j"), applyErr: errors.New("the API server said no")},
	}}
	got := summary(out)
	want := map[string]any{"resources": []any{
		map[string]any{"resourceName": "broken", "apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "name": "b", "ready": "False", "reason": "RenderFailed", "message": long[:509] + "..."},
		map[string]any{"resourceName": "creating", "apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "name": "c", "ready": "False", "reason": "Creating", "message": "resource does not exist yet"},
		map[string]any{"resourceName": "rejected", "apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "name": "j", "ready": "False", "reason": "ApplyFailed", "message": "the API server said no"},
		map[string]any{"resourceName": "waiting", "apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "name": "w", "ready": "False", "reason": "Provisioning", "message": "Ready condition is False"},
		map[string]any{"resourceName": "ready", "apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "name": "r", "ready": "True", "reason": "Available"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summary(...): -want, +got:\n%s", diff)
	}

	many := &rendered{}
	for i := range 105 {
		many.resources = append(many.resources, composed{name: fmt.Sprintf("r%03d", i), ready: i%2 == 0})
	}
	s := summary(many)
	if n := len(s["resources"].([]any)); n != 100 {
		t.Errorf("summary of 105 resources lists %d, want 100", n)
	}
	if got := s["omittedResources"]; got != int64(5) {
		t.Errorf("omittedResources %v, want 5", got)
	}
	if first := s["resources"].([]any)[0].(map[string]any); first["ready"] != "False" {
		t.Errorf("the summary does not list unready resources first: %v", first)
	}
}

func TestResourceRefs(t *testing.T) {
	xr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"resourceRefs": []any{
		map[string]any{"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "name": "a", "namespace": ""},
	}}}}
	xrd := &v1.CompositeResourceDefinition{}
	st := &state{xr: xr, xrd: xrd, machinery: []string{"spec"}}
	cases := map[string]struct {
		reason     string
		st         *state
		out        *rendered
		doomed     map[string]*unstructured.Unstructured
		wantNames  []string
		wantChange bool
	}{
		"Unchanged": {reason: "The same resources, empty namespace or not, are no change.",
			out: &rendered{resources: []composed{{name: "x", desired: nop("a")}}}, wantNames: []string{"a"}},
		"Sorted": {reason: "References are sorted; failed templates keep their observed resource.",
			out:       &rendered{resources: []composed{{name: "x", desired: nop("c")}, {name: "y", observed: nop("a")}, {name: "z", desired: nop("b")}}},
			wantNames: []string{"a", "b", "c"}, wantChange: true},
		"AdoptedOrder": {reason: "An XR whose references name the same resources in another order (Crossplane's template order) keeps them.",
			out: &rendered{resources: []composed{{name: "x", desired: nop("c")}, {name: "y", desired: nop("a")}, {name: "z", desired: nop("b")}}},
			st:  &state{xr: refsXR("b", "a", "c"), xrd: xrd, machinery: []string{"spec"}}, wantNames: []string{"b", "a", "c"}},
		"Doomed": {reason: "Resources being collected stay referenced until they are gone.",
			out: &rendered{resources: []composed{{name: "x", desired: nop("b")}}}, doomed: map[string]*unstructured.Unstructured{"old": nop("a")},
			wantNames: []string{"a", "b"}, wantChange: true},
		"Skipped": {reason: "A template without a resource is not referenced.",
			out: &rendered{resources: []composed{{name: "x"}}}, wantNames: []string{}, wantChange: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := st
			if tc.st != nil {
				in = tc.st
			}
			refs, change := resourceRefs(in, tc.out, tc.doomed)
			names := []string{}
			for _, r := range refs {
				names = append(names, r.(map[string]any)["name"].(string))
			}
			if diff := cmp.Diff(tc.wantNames, names); diff != "" {
				t.Errorf("%s\nresourceRefs names: -want, +got:\n%s", tc.reason, diff)
			}
			if change != tc.wantChange {
				t.Errorf("%s\nresourceRefs change = %v, want %v", tc.reason, change, tc.wantChange)
			}
		})
	}
}

// refsXR is an XR whose spec.resourceRefs name NopResources, in order.
func refsXR(names ...string) *unstructured.Unstructured {
	refs := make([]any, 0, len(names))
	for _, n := range names {
		refs = append(refs, map[string]any{"apiVersion": "nop.crossplane.io/v1alpha1", "kind": "NopResource", "name": n})
	}
	return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"resourceRefs": refs}}}
}

func TestSanitize(t *testing.T) {
	in := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "K",
		"metadata": map[string]any{"name": "n", "resourceVersion": "3", "uid": "u", "managedFields": []any{}, "labels": map[string]any{"a": "b"}},
		"spec":     map[string]any{"x": int64(1)},
		"status":   map[string]any{"y": int64(2)},
	}}
	want := map[string]any{
		"apiVersion": "v1", "kind": "K",
		"metadata": map[string]any{"name": "n", "labels": map[string]any{"a": "b"}},
		"spec":     map[string]any{"x": int64(1)},
	}
	if diff := cmp.Diff(want, sanitize(in).Object); diff != "" {
		t.Errorf("sanitize(...): -want, +got:\n%s", diff)
	}
	if _, ok := in.Object["status"]; !ok {
		t.Error("sanitize modified its input")
	}
}

func TestPermanentAndWaiting(t *testing.T) {
	cases := map[string]struct {
		err       error
		permanent bool
		waiting   bool
	}{
		"Invalid":       {err: fmt.Errorf("x: %w", errInvalidSpec), permanent: true},
		"NoComp":        {err: fmt.Errorf("x: %w", errNoCompatible), waiting: true},
		"NoRevision":    {err: fmt.Errorf("x: %w", errNoRevision), waiting: true},
		"Transient":     {err: errors.New("connection refused")},
		"JoinedInvalid": {err: errors.Join(errors.New("a"), fmt.Errorf("b: %w", errInvalidSpec)), permanent: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := permanent(tc.err); got != tc.permanent {
				t.Errorf("permanent(%v) = %v, want %v", tc.err, got, tc.permanent)
			}
			if got := waiting(tc.err); got != tc.waiting {
				t.Errorf("waiting(%v) = %v, want %v", tc.err, got, tc.waiting)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	m := newMemo(16)
	var got []time.Duration
	for range 7 {
		got = append(got, m.retryAfter("xr"))
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("retryAfter(): consecutive refused renders back off from 2s doubling to a minute: -want, +got:\n%s", diff)
	}
	if d := m.retryAfter("other"); d != 2*time.Second {
		t.Errorf("retryAfter(other) = %s, want 2s: each XR backs off on its own", d)
	}
	m.forgetRetries("xr")
	if d := m.retryAfter("xr"); d != 2*time.Second {
		t.Errorf("retryAfter() after a render that succeeded = %s, want 2s", d)
	}
}

func TestStatusWait(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	xr := func(age time.Duration, conds ...any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.org/v1", "kind": "XNop"}}
		u.SetName("x")
		u.SetCreationTimestamp(metav1.NewTime(now.Add(-age)))
		if len(conds) > 0 {
			u.Object["status"] = map[string]any{"conditions": conds}
		}
		return u
	}
	unready := &rendered{resources: []composed{{name: "a"}}}
	// created is a composed resource its provider has reported on (not
	// Ready); unobserved one it has not looked at yet.
	created := func(age time.Duration) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
			"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "Creating"}}}}}
		u.SetCreationTimestamp(metav1.NewTime(now.Add(-age)))
		return u
	}
	unobserved := func(age time.Duration) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetCreationTimestamp(metav1.NewTime(now.Add(-age)))
		return u
	}
	cases := map[string]struct {
		reason string
		xr     *unstructured.Unstructured
		out    *rendered
		err    error
		opts   []Option
		want   time.Duration
	}{
		"NewUnready": {
			reason: "A new XR whose resources are not Ready waits for them until the wait is over.",
			xr:     xr(2 * time.Second), out: unready,
			want: DefaultFirstStatusWait - 2*time.Second,
		},
		"NewReady": {
			reason: "A new XR whose resources are Ready gets its status at once.",
			xr:     xr(2 * time.Second), out: &rendered{resources: []composed{{name: "a", ready: true}}},
		},
		"WaitOver": {
			reason: "Once the wait is over, an unready XR gets its status.",
			xr:     xr(DefaultFirstStatusWait), out: unready,
		},
		"HasReadyCondition": {
			reason: "An XR that has a Ready condition is not new: its status follows at once.",
			xr:     xr(time.Second, map[string]any{"type": "Ready", "status": "False", "reason": "Creating"}), out: unready,
		},
		"ResourcesCreatedLate": {
			reason: "An XR rendered late (it waited in a backlog) waits from its resources' creation, not its own.",
			xr:     xr(time.Minute), out: &rendered{resources: []composed{{name: "a", observed: created(time.Second)}, {name: "b", ready: true, observed: created(time.Minute)}}},
			want: DefaultFirstStatusWait - time.Second,
		},
		"ResourcesCreatedLongAgo": {
			reason: "Resources older than the wait do not extend it.",
			xr:     xr(time.Minute), out: &rendered{resources: []composed{{name: "a", observed: created(time.Minute)}}},
		},
		"Failed": {
			reason: "A failed render says so at once.",
			xr:     xr(time.Second), out: unready, err: errors.New("boom"),
		},
		"Unobserved": {
			reason: "A resource its provider has not looked at yet (no status) extends the wait to the unobserved wait: \"Creating\" would say nothing its first status does not.",
			xr:     xr(time.Minute), out: &rendered{resources: []composed{{name: "a", observed: unobserved(10 * time.Second)}, {name: "b", observed: created(10 * time.Second)}}},
			want: DefaultUnobservedWait - 10*time.Second,
		},
		"UnobservedLongAgo": {
			reason: "The unobserved wait ends too: a provider that never answers shows.",
			xr:     xr(time.Minute), out: &rendered{resources: []composed{{name: "a", observed: unobserved(DefaultUnobservedWait)}}},
		},
		"UnobservedReady": {
			reason: "A Ready resource without a status (a readiness check of None, say) does not extend the wait.",
			xr:     xr(time.Minute), out: &rendered{resources: []composed{{name: "a", ready: true, observed: unobserved(10 * time.Second)}, {name: "b", observed: created(10 * time.Second)}}},
		},
		"UnobservedWaitOff": {
			reason: "Without an unobserved wait, the first status wait alone counts.",
			xr:     xr(time.Minute), out: &rendered{resources: []composed{{name: "a", observed: unobserved(time.Second)}}},
			opts: []Option{WithUnobservedWait(0)},
			want: DefaultFirstStatusWait - time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := NewReconciler(nil, nil, nil, append([]Option{WithClock(func() time.Time { return now })}, tc.opts...)...)
			got := r.statusWait(&state{xr: tc.xr}, tc.out, tc.err)
			if got < 0 {
				got = 0
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nstatusWait(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
