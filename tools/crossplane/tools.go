//go:build tools

// Package crossplane pins the upstream Crossplane release that `make bench
// VS=crossplane` measures Loom against (issue 19): `make crossplane` builds
// its core binary (cmd/crossplane) into .cache/crossplane/<version>/ and
// copies the CRDs of the same module (cluster/crds) beside it.
//
// It is a module of its own, outside go.work, on purpose: Crossplane brings
// its own dependency graph (crossplane-runtime, controller-runtime, its
// Kubernetes libraries, container registry clients) that must not move the
// versions Loom's modules select, and that Loom must not move either: the
// binary is built from upstream's own requirements. Built with GOWORK=off.
package crossplane

import (
	_ "github.com/crossplane/crossplane/cmd/crossplane"
)
