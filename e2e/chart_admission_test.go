//go:build e2e

package e2e

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestChartAdmission renders the admission component: its Deployment runs
// as its own ServiceAccount with its own ClusterRole, serves its webhooks
// through a Service with a certificate the chart generates (or the user
// gives), and the webhook configurations point at that Service, trust that
// certificate's CA and fail closed, as Crossplane's do.
func TestChartAdmission(t *testing.T) {
	objs := renderChart(t)

	var d appsv1.Deployment
	chartFind(t, objs, "Deployment", "loom-admission", &d)
	spec := d.Spec.Template.Spec
	if spec.ServiceAccountName != "loom-admission" {
		t.Errorf("the admission component runs as %q, want loom-admission", spec.ServiceAccountName)
	}
	chartCheckSecurity(t, spec)
	c := chartContainer(t, &d)
	if c.Image != "ghcr.io/loomxr/loom-admission:0.1.0" {
		t.Errorf("image %q, want ghcr.io/loomxr/loom-admission:0.1.0", c.Image)
	}
	env := chartEnv(c)
	for k, v := range map[string]string{
		"LOOM_ADMISSION_WEBHOOK_ADDR":  ":9443",
		"LOOM_ADMISSION_TLS_CERT_FILE": "/etc/loom/admission-tls/tls.crt",
		"LOOM_ADMISSION_TLS_KEY_FILE":  "/etc/loom/admission-tls/tls.key",
	} {
		if env[k].Value != v {
			t.Errorf("%s = %q, want %q", k, env[k].Value, v)
		}
	}
	if got := chartSecretVolume(spec, "tls"); got != "loom-admission-tls" {
		t.Errorf("the admission component mounts Secret %q, want loom-admission-tls", got)
	}

	var svc corev1.Service
	chartFind(t, objs, "Service", "loom-admission", &svc)
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == 443 && p.TargetPort.StrVal == "webhooks" }) {
		t.Errorf("Service loom-admission does not serve port 443 from the container's webhooks port: %v", svc.Spec.Ports)
	}

	var b rbacv1.ClusterRoleBinding
	chartFind(t, objs, "ClusterRoleBinding", "loom-admission", &b)
	if len(b.Subjects) != 1 || b.Subjects[0].Name != "loom-admission" || b.RoleRef.Name != "loom-admission" {
		t.Errorf("loom-admission is bound to %v (role %s), want ClusterRole loom-admission for ServiceAccount loom-admission only", b.Subjects, b.RoleRef.Name)
	}

	var sec corev1.Secret
	chartFind(t, objs, "Secret", "loom-admission-tls", &sec)
	block, _ := pem.Decode(sec.Data["tls.crt"])
	if block == nil {
		t.Fatal("loom-admission-tls has no PEM tls.crt")
	}
	crt, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := crt.VerifyHostname("loom-admission." + chartNamespace + ".svc"); err != nil {
		t.Errorf("the serving certificate does not name the Service: %v", err)
	}

	// Crossplane's webhook names and paths, fail closed, at the Service,
	// trusting the generated CA.
	want := map[string]string{
		"compositions.apiextensions.crossplane.io": "/validate-apiextensions-crossplane-io-v1-composition",
		"nousages.apiextensions.crossplane.io":     "/validate-no-usages",
	}
	got := map[string]string{}
	for _, name := range chartNames(objs, "ValidatingWebhookConfiguration") {
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		chartFind(t, objs, "ValidatingWebhookConfiguration", name, &vwc)
		for _, h := range vwc.Webhooks {
			s := h.ClientConfig.Service
			if s == nil || s.Name != "loom-admission" || s.Namespace != chartNamespace || s.Path == nil || s.Port == nil || *s.Port != 443 {
				t.Errorf("webhook %s does not call Service loom-admission on port 443: %+v", h.Name, s)
				continue
			}
			got[h.Name] = *s.Path
			if h.FailurePolicy == nil || *h.FailurePolicy != admissionregistrationv1.Fail {
				t.Errorf("webhook %s does not fail closed", h.Name)
			}
			if !bytes.Equal(h.ClientConfig.CABundle, sec.Data["ca.crt"]) {
				t.Errorf("webhook %s does not trust the CA of loom-admission-tls", h.Name)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("webhooks: -want, +got:\n%s", diff)
	}

	// A Secret the user keeps is mounted, and the chart generates none.
	objs = renderChart(t, "--set", "admission.tls.secretName=admission-cert", "--set", "admission.tls.caBundle=Y2E=")
	if slices.Contains(chartNames(objs, "Secret"), "loom-admission-tls") {
		t.Errorf("with admission.tls.secretName the chart still generates loom-admission-tls")
	}
	chartFind(t, objs, "Deployment", "loom-admission", &d)
	if got := chartSecretVolume(d.Spec.Template.Spec, "tls"); got != "admission-cert" {
		t.Errorf("the admission component mounts Secret %q, want admission-cert", got)
	}

	// Disabled: nothing of it, and no webhook calls a component that is not
	// there.
	objs = renderChart(t, "--set", "admission.enabled=false")
	for _, o := range objs {
		if o.GetLabels()["app.kubernetes.io/component"] == "admission" {
			t.Errorf("admission.enabled=false renders %s %s", o.GetKind(), o.GetName())
		}
	}
}
