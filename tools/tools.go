//go:build tools

// Package tools pins the versions of the programs Loom builds from the Go
// module proxy: the local control plane (kube-apiserver,
// kube-controller-manager, etcd) and code generators. The blank imports keep
// the requirements in go.mod; the Makefile builds each binary from here.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
