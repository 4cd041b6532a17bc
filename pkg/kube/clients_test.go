package kube

import (
	"testing"

	"k8s.io/client-go/rest"
)

func TestNewClients(t *testing.T) {
	cases := map[string]struct {
		reason  string
		rc      *rest.Config
		wantErr bool
	}{
		"Valid": {
			reason: "A usable configuration makes every client, without a request.",
			rc:     &rest.Config{Host: "https://127.0.0.1:1"},
		},
		"BadHost": {
			reason:  "A host that is not a URL is an error naming the first client that refused it.",
			rc:      &rest.Config{Host: "http://[::1"},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := NewClients(tc.rc)
			if (err != nil) != tc.wantErr {
				t.Fatalf("\n%s\nNewClients(...): got error %v, want error %t", tc.reason, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if c.REST != tc.rc || c.Dynamic == nil || c.Metadata == nil || c.Discovery == nil || c.Kubernetes == nil || c.Mapper == nil {
				t.Errorf("\n%s\nNewClients(...): got %+v, want every client and the configuration itself", tc.reason, c)
			}
		})
	}
}
