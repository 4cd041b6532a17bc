package stack

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// admissionService is the name of Loom's admission component.
const admissionService = "admission"

// admissionWebhooks is how the stack runs the admission component's
// webhooks: a CA of their own, a serving certificate for 127.0.0.1 only
// (the kube-apiserver of the stack calls it over loopback), and a loopback
// port per replica. The webhook configurations point at replica 0: a
// ValidatingWebhookConfiguration names one URL, and the stack has no load
// balancer. Nothing when the stack runs no admission component.
type admissionWebhooks struct {
	addrs          []string // by replica
	caPEM          []byte
	cert, key      string // files
	webhooksSource string // the webhook configurations the chart installs too
}

// prepareAdmission issues the certificates, writes them to the pki folder
// and picks the ports. Call it before starting any service.
func (s *Stack) prepareAdmission() (*admissionWebhooks, error) {
	n := 0
	if slices.Contains(s.opts.Services, admissionService) {
		n = s.opts.replicas(admissionService)
	}
	if n == 0 {
		return &admissionWebhooks{}, nil
	}
	ca, err := newCA("loom-admission-ca")
	if err != nil {
		return nil, err
	}
	srv, err := ca.issue(certRequest{CommonName: ServiceAccountName(admissionService), IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true})
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(s.opts.StateDir, "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", dir, err)
	}
	w := &admissionWebhooks{caPEM: ca.CertPEM, webhooksSource: filepath.Join(s.opts.RepoRoot, "deploy", "helm", "loom", "files", "admission", "webhooks.yaml")}
	if w.cert, w.key, err = srv.write(dir, "admission-webhook"); err != nil {
		return nil, err
	}
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	for _, p := range ports {
		w.addrs = append(w.addrs, hostPort(p))
	}
	return w, nil
}

// env is the environment that configures a replica of the admission
// component (its flags fall back to it); nil for other services.
func (w *admissionWebhooks) env(service string, replica int) []string {
	if service != admissionService || len(w.addrs) == 0 {
		return nil
	}
	return []string{
		"LOOM_ADMISSION_WEBHOOK_ADDR=" + w.addrs[replica],
		"LOOM_ADMISSION_TLS_CERT_FILE=" + w.cert,
		"LOOM_ADMISSION_TLS_KEY_FILE=" + w.key,
	}
}

// configurations returns the webhook configurations of the chart's
// files/admission/webhooks.yaml with every webhook's clientConfig pointing
// at replica 0 over loopback, with the stack's CA bundle.
func (w *admissionWebhooks) configurations() ([]*unstructured.Unstructured, error) {
	objs, err := ReadManifests(w.webhooksSource)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		hooks, _, err := unstructured.NestedSlice(o.Object, "webhooks")
		if err != nil {
			return nil, fmt.Errorf("cannot read the webhooks of %s %q: %w", o.GetKind(), o.GetName(), err)
		}
		for i, h := range hooks {
			m, ok := h.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("webhook %d of %s %q is not an object", i, o.GetKind(), o.GetName())
			}
			path, _, _ := unstructured.NestedString(m, "clientConfig", "service", "path")
			m["clientConfig"] = map[string]any{
				"url":      "https://" + w.addrs[0] + path,
				"caBundle": base64.StdEncoding.EncodeToString(w.caPEM),
			}
		}
		if err := unstructured.SetNestedSlice(o.Object, hooks, "webhooks"); err != nil {
			return nil, fmt.Errorf("cannot set the webhooks of %s %q: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return objs, nil
}

// registerWebhooks installs the admission component's webhook
// configurations once it serves them, so that the API server never calls
// a webhook that is not there yet. Against an existing cluster it does
// nothing: that cluster's API server cannot reach a loopback address.
func (s *Stack) registerWebhooks(ctx context.Context, w *admissionWebhooks) error {
	if len(w.addrs) == 0 {
		return nil
	}
	if s.opts.Kubeconfig != "" {
		s.logf("admission webhooks not registered: the API server of an existing cluster cannot call %s", w.addrs[0])
		return nil
	}
	objs, err := w.configurations()
	if err != nil {
		return err
	}
	a, err := newApplier(s.RESTConfig(), s.logf)
	if err != nil {
		return err
	}
	if _, err := a.apply(ctx, objs); err != nil {
		return fmt.Errorf("cannot register the admission webhooks: %w", err)
	}
	s.logf("admission webhooks registered at https://%s", w.addrs[0])
	return nil
}
