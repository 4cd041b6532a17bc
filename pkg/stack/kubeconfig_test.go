package stack

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
)

func TestWriteKubeconfig(t *testing.T) {
	ca, err := newCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.issue(certRequest{CommonName: "someone", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		host     string
		ca       []byte
		cert     []byte
		key      []byte
		token    string
		insecure bool
	}
	cases := map[string]struct {
		reason string
		server string
		ca     []byte
		creds  credentials
		want   want
	}{
		"ClientCertificate": {
			reason: "A certificate kubeconfig carries the CA, certificate and key inline.",
			server: "https://127.0.0.1:6443",
			ca:     ca.CertPEM,
			creds:  credentials{CertPEM: client.CertPEM, KeyPEM: client.KeyPEM},
			want:   want{host: "https://127.0.0.1:6443", ca: ca.CertPEM, cert: client.CertPEM, key: client.KeyPEM},
		},
		"Token": {
			reason: "A ServiceAccount kubeconfig carries the CA and the bearer token.",
			server: "https://127.0.0.1:6443",
			ca:     ca.CertPEM,
			creds:  credentials{Token: "t0ken"},
			want:   want{host: "https://127.0.0.1:6443", ca: ca.CertPEM, token: "t0ken"},
		},
		"Insecure": {
			reason: "A cluster reached without verification stays that way.",
			server: "https://10.1.2.3:443",
			creds:  credentials{Token: "t", Insecure: true},
			want:   want{host: "https://10.1.2.3:443", token: "t", insecure: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kubeconfig")
			if err := writeKubeconfig(path, tc.server, tc.ca, tc.creds); err != nil {
				t.Fatalf("%s\nwriteKubeconfig(...): %v", tc.reason, err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s\nmode %v: want no access for group and others", tc.reason, fi.Mode().Perm())
			}
			rc, err := restConfigFromKubeconfig(path)
			if err != nil {
				t.Fatalf("%s\nrestConfigFromKubeconfig(...): %v", tc.reason, err)
			}
			got := want{host: rc.Host, ca: rc.CAData, cert: rc.CertData, key: rc.KeyData, token: rc.BearerToken, insecure: rc.Insecure}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nloaded config: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestClusterOf(t *testing.T) {
	caPath := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caPath, []byte("from-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason string
		rc     *rest.Config
		wantCA string
	}{
		"InlineCA": {reason: "Inline CA data is used as is.", rc: &rest.Config{Host: "h", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("inline")}}, wantCA: "inline"},
		"CAFile":   {reason: "A CA file is read.", rc: &rest.Config{Host: "h", TLSClientConfig: rest.TLSClientConfig{CAFile: caPath}}, wantCA: "from-file"},
		"NoCA":     {reason: "No CA means the system roots.", rc: &rest.Config{Host: "h"}, wantCA: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			host, ca, _, err := clusterOf(tc.rc)
			if err != nil {
				t.Fatalf("%s\nclusterOf(...): %v", tc.reason, err)
			}
			if host != "h" || string(ca) != tc.wantCA {
				t.Errorf("%s\nclusterOf(...): got %q, %q; want h, %q", tc.reason, host, ca, tc.wantCA)
			}
		})
	}
}
