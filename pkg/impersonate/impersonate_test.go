package impersonate

import (
	"errors"
	"testing"

	"k8s.io/client-go/rest"
)

func TestServiceAccountUser(t *testing.T) {
	if got, want := ServiceAccountUser("team-a", "composer"), "system:serviceaccount:team-a:composer"; got != want {
		t.Errorf("ServiceAccountUser() = %q, want %q", got, want)
	}
}

func TestAs(t *testing.T) {
	base := &rest.Config{Host: "https://127.0.0.1:6443", QPS: 7}
	builds := 0
	c := New(base, func(cfg *rest.Config) (*rest.Config, error) {
		builds++
		if cfg.Host == "fail" {
			return nil, errors.New("boom")
		}
		return cfg, nil
	})
	a1, err := c.As("a")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := c.As("a")
	b, _ := c.As("b")
	if a1 != a2 || builds != 2 {
		t.Errorf("As the same user twice: want one client made once; same=%t, builds=%d", a1 == a2, builds)
	}
	if a1.Impersonate.UserName != "a" || b.Impersonate.UserName != "b" || a1.QPS != 7 {
		t.Errorf("clients must carry their user and the base configuration: a=%+v b=%+v", a1.Impersonate, b.Impersonate)
	}
	if base.Impersonate.UserName != "" {
		t.Errorf("the base configuration was changed: %+v", base.Impersonate)
	}

	bad := New(&rest.Config{Host: "fail"}, func(cfg *rest.Config) (*rest.Config, error) {
		if cfg.Host == "fail" {
			return nil, errors.New("boom")
		}
		return cfg, nil
	})
	if _, err := bad.As("x"); err == nil {
		t.Errorf("As with a failing build: want an error")
	}
}
