package composite

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loomxr/loom/services/secrets/internal/secret"
)

func TestConflictsChanged(t *testing.T) {
	cases := map[string]struct {
		reason string
		before []string // conflicts recorded first, in order
		now    string
		want   bool
	}{
		"NeverSeenNoConflicts": {
			reason: "An XR never seen with no conflicts has nothing to report.",
			now:    "",
			want:   false,
		},
		"NeverSeenConflicts": {
			reason: "An XR never seen with conflicts reports them.",
			now:    "a\n",
			want:   true,
		},
		"Unchanged": {
			reason: "The same conflicts as last reported are not reported again.",
			before: []string{"a\n"},
			now:    "a\n",
			want:   false,
		},
		"Changed": {
			reason: "A new set of conflicts is reported.",
			before: []string{"a\n"},
			now:    "a\nb\n",
			want:   true,
		},
		"Resolved": {
			reason: "Conflicts gone since the last report count as a change.",
			before: []string{"a\n"},
			now:    "",
			want:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := newMemo(4)
			for _, b := range tc.before {
				m.conflictsChanged("xr", b)
			}
			if got := m.conflictsChanged("xr", tc.now); got != tc.want {
				t.Errorf("%s\nconflictsChanged(%q) = %t, want %t", tc.reason, tc.now, got, tc.want)
			}
		})
	}
}

// TestMemoBound crosses the memos' bound: with room for 8 XRs, 20 XRs
// reported and read leave the 8 most recent remembered (nothing reported or
// read again on an unchanged resync) and the 12 oldest forgotten, instead of
// forgetting all of them at once.
func TestMemoBound(t *testing.T) {
	const size, xrs = 8, 20
	m := newMemo(size)
	uid := func(i int) types.UID { return types.UID(fmt.Sprintf("xr-%02d", i)) }
	for i := range xrs {
		if !m.conflictsChanged(uid(i), "a\n") {
			t.Fatalf("conflictsChanged(%s): false for an XR never seen", uid(i))
		}
		m.putTemplate(uid(i), "ref", "tmpl")
	}
	// Look at the most recent first, so that looking does not evict.
	var reported, read []int
	for i := xrs - 1; i >= 0; i-- {
		if m.conflictsChanged(uid(i), "a\n") {
			reported = append(reported, i)
		}
		if _, ok := m.template(uid(i), "ref"); !ok {
			read = append(read, i)
		}
	}
	forgotten := []int{11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}
	if diff := cmp.Diff(forgotten, reported); diff != "" {
		t.Errorf("XRs whose unchanged conflicts were reported again: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(forgotten, read); diff != "" {
		t.Errorf("XRs whose templates were forgotten: -want, +got:\n%s", diff)
	}
}

func TestMemoSecret(t *testing.T) {
	k := secret.Key{Namespace: "crossplane-system", Name: "db-conn"}
	read := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name, ResourceVersion: "10", Labels: map[string]string{"a": "b"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte("s3cr3t")},
	}
	kept := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name, ResourceVersion: "10"},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte("s3cr3t")},
	}
	cases := map[string]struct {
		reason string
		put    *corev1.Secret
		rv     string
		want   *corev1.Secret
	}{
		"NeverRead": {
			reason: "A Secret never read must be read.",
			rv:     "10",
		},
		"SameVersion": {
			reason: "A Secret the informer shows at the version last read is known without a read; only the fields the reconciler reads are kept.",
			put:    read,
			rv:     "10",
			want:   kept,
		},
		"InformerBehind": {
			reason: "A Secret read at a newer version than the informer shows yet is known: the read was the newer.",
			put:    read,
			rv:     "9",
			want:   kept,
		},
		"Changed": {
			reason: "A Secret the informer shows at a newer version than the one read changed since: it must be read again.",
			put:    read,
			rv:     "11",
		},
		"UnknownToInformer": {
			reason: "A Secret the informer does not know (no version) must be read.",
			put:    read,
			rv:     "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := newMemo(4)
			if tc.put != nil {
				m.putSecret(k, tc.put)
			}
			got, _ := m.secret(k, tc.rv)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nsecret(%q): -want, +got:\n%s", tc.reason, tc.rv, diff)
			}
		})
	}
}
