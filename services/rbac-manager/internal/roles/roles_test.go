package roles

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/loomxr/loom/pkg/apis/apiextensions/v1"
)

func xrd(name, group, plural, claimPlural string) *v1.CompositeResourceDefinition {
	x := &v1.CompositeResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.CompositeResourceDefinitionSpec{
			Group: group,
			Names: extv1.CustomResourceDefinitionNames{Kind: "X", Plural: plural},
		},
	}
	if claimPlural != "" {
		x.Spec.ClaimNames = &extv1.CustomResourceDefinitionNames{Kind: "C", Plural: claimPlural}
	}
	return x
}

func rule(group string, verbs []string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
}

func TestRules(t *testing.T) {
	rwatch := []string{"get", "list", "watch"}
	empty := func() map[string][]rbacv1.PolicyRule {
		out := map[string][]rbacv1.PolicyRule{}
		for _, n := range Names() {
			out[n] = []rbacv1.PolicyRule{}
		}
		return out
	}
	withClaim := empty()
	withClaim[Watcher] = []rbacv1.PolicyRule{rule("a.org", rwatch, "xdbs", "dbs")}
	withClaim[Binder] = []rbacv1.PolicyRule{
		rule("a.org", []string{"get", "update", "patch"}, "dbs"),
		rule("a.org", []string{"get", "patch"}, "dbs/status", "xdbs/status"),
		rule("a.org", []string{"get", "create", "patch", "delete"}, "xdbs"),
	}
	withClaim[Renderer] = []rbacv1.PolicyRule{
		rule("a.org", []string{"get", "list", "create", "patch", "delete"}, "xdbs"),
		rule("a.org", []string{"get", "patch"}, "xdbs/status"),
		rule("a.org", []string{"list", "delete"}, "dbs"),
	}
	withClaim[Secrets] = []rbacv1.PolicyRule{
		rule("a.org", []string{"get"}, "xdbs", "dbs"),
		rule("a.org", []string{"get", "patch"}, "xdbs/status"),
	}
	withClaim[Admission] = []rbacv1.PolicyRule{rule("a.org", []string{"get", "list", "patch", "delete"}, "xdbs")}
	withClaim[Edit] = []rbacv1.PolicyRule{rule("a.org", []string{"*"}, "dbs", "dbs/status")}
	withClaim[View] = []rbacv1.PolicyRule{rule("a.org", rwatch, "dbs", "dbs/status")}

	noClaim := empty()
	noClaim[Watcher] = []rbacv1.PolicyRule{rule("b.org", rwatch, "xbuckets")}
	noClaim[Binder] = []rbacv1.PolicyRule{
		rule("b.org", []string{"get", "create", "patch", "delete"}, "xbuckets"),
		rule("b.org", []string{"get", "patch"}, "xbuckets/status"),
	}
	noClaim[Renderer] = []rbacv1.PolicyRule{
		rule("b.org", []string{"get", "list", "create", "patch", "delete"}, "xbuckets"),
		rule("b.org", []string{"get", "patch"}, "xbuckets/status"),
	}
	noClaim[Secrets] = []rbacv1.PolicyRule{
		rule("b.org", []string{"get"}, "xbuckets"),
		rule("b.org", []string{"get", "patch"}, "xbuckets/status"),
	}
	noClaim[Admission] = []rbacv1.PolicyRule{rule("b.org", []string{"get", "list", "patch", "delete"}, "xbuckets")}

	sameGroup := empty()
	sameGroup[Watcher] = []rbacv1.PolicyRule{rule("a.org", rwatch, "xas", "xbs", "bs")}
	sameGroup[Edit] = []rbacv1.PolicyRule{rule("a.org", []string{"*"}, "bs", "bs/status")}
	sameGroup[View] = []rbacv1.PolicyRule{rule("a.org", rwatch, "bs", "bs/status")}

	cases := map[string]struct {
		reason string
		xrds   []*v1.CompositeResourceDefinition
		want   map[string][]rbacv1.PolicyRule
		only   []string // compare only these roles; nil means all
	}{
		"None": {
			reason: "Without XRDs every role is kept, with no rules.",
			want:   empty(),
		},
		"WithClaim": {
			reason: "An XRD offering a claim gives each service its verbs on both kinds and users edit and view rights on the claim kind.",
			xrds:   []*v1.CompositeResourceDefinition{xrd("xdbs.a.org", "a.org", "xdbs", "dbs")},
			want:   withClaim,
		},
		"WithoutClaim": {
			reason: "An XRD offering no claim grants nothing to users and nothing on claims.",
			xrds:   []*v1.CompositeResourceDefinition{xrd("xbuckets.b.org", "b.org", "xbuckets", "")},
			want:   noClaim,
		},
		"SameGroupSorted": {
			reason: "XRDs of one group share rules with the same verbs, in order of XRD name whatever order they come in.",
			xrds:   []*v1.CompositeResourceDefinition{xrd("xbs.a.org", "a.org", "xbs", "bs"), xrd("xas.a.org", "a.org", "xas", "")},
			want:   sameGroup,
			only:   []string{Watcher, Edit, View},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Rules(tc.xrds)
			if tc.only != nil {
				g, w := map[string][]rbacv1.PolicyRule{}, map[string][]rbacv1.PolicyRule{}
				for _, n := range tc.only {
					g[n], w[n] = got[n], tc.want[n]
				}
				got, tc.want = g, w
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nRules(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
