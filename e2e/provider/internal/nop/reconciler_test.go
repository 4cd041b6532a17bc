package nop

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestObserve(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	earlier := metav1.NewTime(created)
	type want struct {
		status  NopResourceStatus
		next    time.Duration
		pending bool
		err     string
	}
	nop := func(gen int64, fp NopParameters, st NopResourceStatus) *NopResource {
		return &NopResource{
			ObjectMeta: metav1.ObjectMeta{Name: "n", Generation: gen, CreationTimestamp: metav1.NewTime(created)},
			Spec:       NopResourceSpec{ForProvider: fp},
			Status:     st,
		}
	}
	cases := map[string]struct {
		reason string
		nr     *NopResource
		age    time.Duration
		want   want
	}{
		"MirrorsFields": {
			reason: "atProvider.fields mirrors forProvider.fields.",
			nr:     nop(1, NopParameters{Fields: json.RawMessage(`{"a":1}`)}, NopResourceStatus{}),
			want:   want{status: NopResourceStatus{AtProvider: NopObservation{Fields: json.RawMessage(`{"a":1}`)}}},
		},
		"ClearsFields": {
			reason: "Fields removed from the spec are removed from the status.",
			nr:     nop(1, NopParameters{}, NopResourceStatus{AtProvider: NopObservation{Fields: json.RawMessage(`{"a":1}`)}}),
			want:   want{status: NopResourceStatus{}},
		},
		"ReadyAfterOneSecond": {
			reason: "Before the time, the condition is pending; the wait is what remains.",
			nr:     nop(1, NopParameters{ConditionAfter: []ConditionAfter{ca("1s", "Ready", "True")}}, NopResourceStatus{}),
			age:    250 * time.Millisecond,
			want:   want{next: 750 * time.Millisecond, pending: true},
		},
		"BecomesReady": {
			reason: "Once due, the condition is set with the generation and stamped at the observation time.",
			nr:     nop(3, NopParameters{ConditionAfter: []ConditionAfter{ca("1s", "Ready", "True")}}, NopResourceStatus{}),
			age:    time.Second,
			want: want{status: NopResourceStatus{Conditions: []Condition{{
				Type: "Ready", Status: "True", Reason: ReasonAvailable, ObservedGeneration: 3,
				LastTransitionTime: metav1.NewTime(created.Add(time.Second)),
			}}}},
		},
		"KeepsUnscheduledConditions": {
			reason: "Conditions the schedule does not name (Synced) are left alone, and a condition that stays True keeps its time.",
			nr: nop(2, NopParameters{ConditionAfter: []ConditionAfter{ca("0s", "Ready", "True")}}, NopResourceStatus{Conditions: []Condition{
				{Type: "Synced", Status: "True", Reason: ReasonReconcileSuccess, ObservedGeneration: 1, LastTransitionTime: earlier},
				{Type: "Ready", Status: "True", Reason: ReasonAvailable, ObservedGeneration: 1, LastTransitionTime: earlier},
			}}),
			age: time.Minute,
			want: want{status: NopResourceStatus{Conditions: []Condition{
				{Type: "Synced", Status: "True", Reason: ReasonReconcileSuccess, ObservedGeneration: 1, LastTransitionTime: earlier},
				{Type: "Ready", Status: "True", Reason: ReasonAvailable, ObservedGeneration: 2, LastTransitionTime: earlier},
			}}},
		},
		"BadSchedule": {
			reason: "A schedule that does not parse is an error and leaves the conditions alone.",
			nr:     nop(1, NopParameters{ConditionAfter: []ConditionAfter{ca("later", "Ready", "True")}}, NopResourceStatus{}),
			want:   want{err: `cannot parse spec.forProvider.conditionAfter[0].time: time: invalid duration "later"`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			next, pending, err := Observe(tc.nr, created.Add(tc.age))
			got := want{status: tc.nr.Status, next: next, pending: pending}
			if err != nil {
				got.err = err.Error()
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestStatusPatch(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ready := Condition{Type: "Ready", Status: "True", Reason: ReasonAvailable, LastTransitionTime: at}
	syncedOK := Condition{Type: "Synced", Status: "True", Reason: ReasonReconcileSuccess, ObservedGeneration: 1, LastTransitionTime: at}
	withStatus := func(st NopResourceStatus) *NopResource {
		return &NopResource{
			ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "7"},
			Spec:       NopResourceSpec{ForProvider: NopParameters{Fields: json.RawMessage(`{"x":true}`)}},
			Status:     st,
		}
	}
	cases := map[string]struct {
		reason    string
		got, want *NopResource
		patch     string
	}{
		"NoChangeNoPatch": {
			reason: "Equal statuses give no patch at all, so nothing is written.",
			got:    withStatus(NopResourceStatus{Conditions: []Condition{syncedOK}, AtProvider: NopObservation{Fields: json.RawMessage(`{"a":1}`)}}),
			want:   withStatus(NopResourceStatus{Conditions: []Condition{syncedOK}, AtProvider: NopObservation{Fields: json.RawMessage(`{ "a": 1 }`)}}),
		},
		"NewCondition": {
			reason: "Conditions are replaced as a whole list, and the patch holds nothing but status (no resourceVersion).",
			got:    withStatus(NopResourceStatus{Conditions: []Condition{syncedOK}}),
			want:   withStatus(NopResourceStatus{Conditions: []Condition{syncedOK, ready}}),
			patch:  `{"status":{"conditions":[{"lastTransitionTime":"2026-01-01T00:00:00Z","observedGeneration":1,"reason":"ReconcileSuccess","status":"True","type":"Synced"},{"lastTransitionTime":"2026-01-01T00:00:00Z","reason":"Available","status":"True","type":"Ready"}]}}`,
		},
		"RemovedFieldIsDeleted": {
			reason: "A key gone from the fields is deleted with null; unchanged keys are not sent.",
			got:    withStatus(NopResourceStatus{AtProvider: NopObservation{Fields: json.RawMessage(`{"a":1,"b":{"c":2}}`)}}),
			want:   withStatus(NopResourceStatus{AtProvider: NopObservation{Fields: json.RawMessage(`{"a":1}`)}}),
			patch:  `{"status":{"atProvider":{"fields":{"b":null}}}}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := StatusPatch(tc.got, tc.want)
			if err != nil {
				t.Fatalf("StatusPatch(...): %v", err)
			}
			if diff := cmp.Diff(tc.patch, string(p)); diff != "" {
				t.Errorf("%s\nStatusPatch(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestConnectionDetails(t *testing.T) {
	cases := map[string]struct {
		reason string
		p      NopParameters
		want   map[string][]byte
	}{
		"None": {
			reason: "No details give empty, non-nil data: the Secret is still written.",
			want:   map[string][]byte{},
		},
		"LaterWins": {
			reason: "A later entry with the same name wins.",
			p: NopParameters{ConnectionDetails: []ConnectionDetail{
				{Name: "password", Value: "one"},
				{Name: "user", Value: "admin"},
				{Name: "password", Value: "two"},
			}},
			want: map[string][]byte{"password": []byte("two"), "user": []byte("admin")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ConnectionDetails(tc.p)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nConnectionDetails(...): -want, +got:\n%s", tc.reason, diff)
			}
			if got == nil {
				t.Errorf("%s\nConnectionDetails(...) returned nil", tc.reason)
			}
		})
	}
}

func TestDigest(t *testing.T) {
	cases := map[string]struct {
		reason string
		a, b   map[string][]byte
		same   bool
	}{
		"Equal": {
			reason: "Equal data has equal digests.",
			a:      map[string][]byte{"a": []byte("1"), "b": []byte("2")},
			b:      map[string][]byte{"b": []byte("2"), "a": []byte("1")},
			same:   true,
		},
		"EmptyAndNil": {
			reason: "Empty and nil data are the same Secret data.",
			a:      map[string][]byte{},
			same:   true,
		},
		"Boundaries": {
			reason: "Moving bytes between a key and its value changes the digest.",
			a:      map[string][]byte{"ab": []byte("c")},
			b:      map[string][]byte{"a": []byte("bc")},
		},
		"ValueChange": {
			reason: "A changed value changes the digest.",
			a:      map[string][]byte{"p": []byte("one")},
			b:      map[string][]byte{"p": []byte("two")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := digest(tc.a) == digest(tc.b); got != tc.same {
				t.Errorf("%s\ndigest(a) == digest(b): want %t, got %t", tc.reason, tc.same, got)
			}
		})
	}
}

func TestDeepCopy(t *testing.T) {
	reason := "R"
	in := &NopResource{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}},
		Spec: NopResourceSpec{
			WriteConnectionSecretToRef: &SecretReference{Name: "s", Namespace: "ns"},
			ManagementPolicies:         []string{"*"},
			ProviderConfigRef:          &Reference{Name: "default", Policy: &Policy{Resolve: &reason}},
			ForProvider: NopParameters{
				ConditionAfter:    []ConditionAfter{{Time: "1s", ConditionType: "Ready", ConditionStatus: "True", ConditionReason: &reason}},
				ConnectionDetails: []ConnectionDetail{{Name: "k", Value: "v"}},
				Fields:            json.RawMessage(`{"a":1}`),
			},
		},
		Status: NopResourceStatus{
			Conditions: []Condition{{Type: "Ready", Status: "True"}},
			AtProvider: NopObservation{Fields: json.RawMessage(`{"a":1}`)},
		},
	}
	out := in.DeepCopy()
	if diff := cmp.Diff(in, out); diff != "" {
		t.Fatalf("DeepCopy(): -in, +out:\n%s", diff)
	}
	// Change every reference-typed field of the copy; the original must not
	// move. The snapshot is JSON so that it shares no memory with either.
	before, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out.Labels["a"] = "changed"
	out.Spec.WriteConnectionSecretToRef.Name = "changed"
	out.Spec.ManagementPolicies[0] = "changed"
	out.Spec.ProviderConfigRef.Name = "changed"
	*out.Spec.ProviderConfigRef.Policy.Resolve = "changed"
	out.Spec.ForProvider.ConditionAfter[0].Time = "changed"
	*out.Spec.ForProvider.ConditionAfter[0].ConditionReason = "changed"
	out.Spec.ForProvider.ConnectionDetails[0].Value = "changed"
	out.Spec.ForProvider.Fields[0] = '['
	out.Status.Conditions[0].Status = "changed"
	out.Status.AtProvider.Fields[0] = '['
	after, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(before), string(after)); diff != "" {
		t.Errorf("changing the copy changed the original: -before, +after:\n%s", diff)
	}
}
