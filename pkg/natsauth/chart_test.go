package natsauth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// natsClusterValues is the part of deploy/helm/loom/values-nats-cluster.yaml
// (values for the official NATS chart) that configures Loom's users.
type natsClusterValues struct {
	Config struct {
		Merge struct {
			Authorization struct {
				Users []struct {
					User        string `json:"user"`
					Password    string `json:"password"`
					Permissions *struct {
						Publish struct {
							Allow []string `json:"allow"`
						} `json:"publish"`
						Subscribe struct {
							Allow []string `json:"allow"`
						} `json:"subscribe"`
					} `json:"permissions"`
				} `json:"users"`
			} `json:"authorization"`
		} `json:"merge"`
	} `json:"config"`
	Container struct {
		Env map[string]struct {
			ValueFrom struct {
				SecretKeyRef struct {
					Name string `json:"name"`
					Key  string `json:"key"`
				} `json:"secretKeyRef"`
			} `json:"valueFrom"`
		} `json:"env"`
	} `json:"container"`
}

// TestNATSClusterValues keeps the production NATS servers' authorization,
// documented in the chart's values for the official NATS chart, equal to what
// the local stack enforces: the same users, the same permissions, and each
// password from the key of Secret loom-nats that Loom's chart gives the
// service.
func TestNATSClusterValues(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "helm", "loom", "values-nats-cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v natsClusterValues
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("cannot parse values-nats-cluster.yaml: %v", err)
	}
	got := map[string]Permissions{}
	for _, u := range v.Config.Merge.Authorization.Users {
		key := strings.TrimPrefix(u.User, "loom-")
		env := "LOOM_" + strings.ToUpper(key) + "_PASSWORD"
		if want := "<< $" + env + " >>"; u.Password != want {
			t.Errorf("user %s: password %q, want %q", u.User, u.Password, want)
		}
		ref := v.Container.Env[env].ValueFrom.SecretKeyRef
		if ref.Name != "loom-nats" || ref.Key != key {
			t.Errorf("user %s: %s comes from secret %q key %q, want secret loom-nats key %q", u.User, env, ref.Name, ref.Key, key)
		}
		if u.User == AdminUser {
			if u.Permissions != nil {
				t.Errorf("user %s: has permissions, want none (it may do anything)", u.User)
			}
			continue
		}
		if u.Permissions == nil {
			t.Errorf("user %s: no permissions, so it may do anything", u.User)
			continue
		}
		got[key] = Permissions{Publish: u.Permissions.Publish.Allow, Subscribe: u.Permissions.Subscribe.Allow}
	}
	want := map[string]Permissions{}
	for _, s := range Services {
		p, err := For(s)
		if err != nil {
			t.Fatal(err)
		}
		want[s] = p
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("values-nats-cluster.yaml differs from natsauth.For (regenerate its users): -want, +got:\n%s", diff)
	}
}
