//go:build tools

// Package helm pins the Helm release that `make chart-test` uses to lint and
// render the chart in deploy/helm/loom.
//
// It is a module of its own, outside go.work, on purpose: Helm brings a large
// dependency graph (its own Kubernetes library versions, ORAS, containerd
// packages) that must not move the versions Loom's modules select. Built with
// GOWORK=off into .cache/tools/helm.
//
// Helm v4.1.4 is the newest release whose Kubernetes libraries are v0.35,
// the minor Loom pins; later v4 releases move to v0.36 and v0.37.
package helm

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
