package stack

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// contextName is the name of the only cluster, user and context in every
// kubeconfig the stack writes.
const contextName = "loom"

// credentials identify a client to the API server: a client certificate or
// a bearer token.
type credentials struct {
	CertPEM []byte
	KeyPEM  []byte
	Token   string
	// Insecure skips verifying the server's certificate; set only when the
	// cluster's own kubeconfig does.
	Insecure bool
}

// writeKubeconfig writes a self-contained kubeconfig (CA and credentials
// inlined) for server to path, readable by the owner only.
func writeKubeconfig(path, server string, caPEM []byte, c credentials) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM, InsecureSkipTLSVerify: c.Insecure}
	cfg.AuthInfos[contextName] = &clientcmdapi.AuthInfo{
		ClientCertificateData: c.CertPEM,
		ClientKeyData:         c.KeyPEM,
		Token:                 c.Token,
	}
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: contextName}
	cfg.CurrentContext = contextName
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("cannot write kubeconfig %s: %w", path, err)
	}
	return nil
}

// restConfigFromKubeconfig loads path's current context.
func restConfigFromKubeconfig(path string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("cannot load kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// clusterOf returns the server URL, CA bundle and TLS verification mode of
// rc, so that kubeconfigs for other identities point at the same cluster.
func clusterOf(rc *rest.Config) (server string, caPEM []byte, insecure bool, err error) {
	caPEM = rc.CAData
	if len(caPEM) == 0 && rc.CAFile != "" {
		if caPEM, err = os.ReadFile(rc.CAFile); err != nil {
			return "", nil, false, fmt.Errorf("cannot read CA of the cluster: %w", err)
		}
	}
	return rc.Host, caPEM, rc.Insecure, nil
}
