package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// tokenLifetime is how long the services' ServiceAccount tokens are valid.
// A local stack never runs that long.
const tokenLifetime = 30 * 24 * time.Hour

var (
	clusterRoleGK = schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}
	roleGK        = schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "Role"}
)

// ServiceAccountName returns the ServiceAccount a service runs as.
func ServiceAccountName(service string) string { return "loom-" + service }

// install puts Loom's CRDs and the services' identities into the cluster:
// CRDs (waiting for Established), the namespace, a ServiceAccount and its
// roles and bindings per service, and a token-based kubeconfig per
// service.
func (s *Stack) install(ctx context.Context) error {
	a, err := newApplier(s.RESTConfig(), s.logf)
	if err != nil {
		return err
	}
	start := time.Now()
	n := 0
	for _, dir := range append(append([]string{}, s.opts.CRDDirs...), s.opts.ExtraCRDDirs...) {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			continue
		}
		objs, err := ReadManifests(dir)
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, s.opts.ReadyTimeout)
		_, err = applyOrdered(wctx, a, objs)
		cancel()
		if err != nil {
			return fmt.Errorf("cannot install CRDs from %s: %w", dir, err)
		}
		n += len(objs)
	}
	s.logf("%d CRDs installed and Established (%s)", n, since(start))

	// Every role in the RBAC folder is installed, including those that
	// only aggregate into a service's role (for example the rights on a
	// provider's kinds); a service is bound to the roles of its own file.
	all, err := readRoles(s.opts.RBACDir)
	if err != nil {
		return err
	}
	// crossplane-system exists in every Crossplane installation, and Crossplane
	// manifests (the examples among them) write connection Secrets there.
	objs := append([]*unstructured.Unstructured{
		object("v1", "Namespace", "", Namespace),
		object("v1", "Namespace", "", CrossplaneNamespace),
	}, all...)
	for _, svc := range s.opts.Services {
		if s.opts.replicas(svc) == 0 {
			continue
		}
		sa := object("v1", "ServiceAccount", Namespace, ServiceAccountName(svc))
		objs = append(objs, sa)
		roles, err := readRoles(filepath.Join(s.opts.RBACDir, svc+".yaml"))
		if err != nil {
			return err
		}
		if len(roles) == 0 {
			return fmt.Errorf("cannot use RBAC of %s: no ClusterRole or Role in %s.yaml", svc, svc)
		}
		for _, r := range roles {
			objs = append(objs, binding(r, sa))
		}
	}
	if _, err := applyOrdered(ctx, a, objs); err != nil {
		return fmt.Errorf("cannot install service identities: %w", err)
	}

	cs, err := kubernetes.NewForConfig(s.RESTConfig())
	if err != nil {
		return fmt.Errorf("cannot create client: %w", err)
	}
	server, caPEM, insecure, err := clusterOf(s.RESTConfig())
	if err != nil {
		return err
	}
	dir := filepath.Join(s.opts.StateDir, "kubeconfigs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cannot create %s: %w", dir, err)
	}
	n = 0
	for _, svc := range s.opts.Services {
		if s.opts.replicas(svc) == 0 {
			continue
		}
		n++
		secs := int64(tokenLifetime.Seconds())
		tr, err := cs.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, ServiceAccountName(svc),
			&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("cannot request a token for ServiceAccount %s: %w", ServiceAccountName(svc), err)
		}
		if err := writeKubeconfig(s.ServiceKubeconfig(svc), server, caPEM, credentials{Token: tr.Status.Token, Insecure: insecure}); err != nil {
			return err
		}
	}
	s.logf("ServiceAccounts, RBAC and kubeconfigs ready for %d services", n)
	return nil
}

// readRoles reads the ClusterRoles and Roles in path (a file or a folder).
// Roles without a namespace go to Namespace; any other kind is an error.
func readRoles(path string) ([]*unstructured.Unstructured, error) {
	objs, err := ReadManifests(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read RBAC: %w", err)
	}
	for _, o := range objs {
		switch o.GroupVersionKind().GroupKind() {
		case clusterRoleGK:
		case roleGK:
			if o.GetNamespace() == "" {
				o.SetNamespace(Namespace)
			}
		default:
			return nil, fmt.Errorf("cannot use RBAC in %s: %s %q is not a ClusterRole or Role", path, o.GetKind(), o.GetName())
		}
	}
	return objs, nil
}

// binding binds role to the ServiceAccount sa: a ClusterRoleBinding for a
// ClusterRole, a RoleBinding in the role's namespace for a Role.
func binding(role, sa *unstructured.Unstructured) *unstructured.Unstructured {
	kind := "ClusterRoleBinding"
	if role.GetKind() == "Role" {
		kind = "RoleBinding"
	}
	b := object("rbac.authorization.k8s.io/v1", kind, role.GetNamespace(), role.GetName())
	b.Object["roleRef"] = map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": role.GetKind(), "name": role.GetName()}
	b.Object["subjects"] = []any{map[string]any{"kind": "ServiceAccount", "name": sa.GetName(), "namespace": sa.GetNamespace()}}
	return b
}

func object(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{}}
	o.SetAPIVersion(apiVersion)
	o.SetKind(kind)
	o.SetNamespace(namespace)
	o.SetName(name)
	return o
}
