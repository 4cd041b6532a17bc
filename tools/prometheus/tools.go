//go:build tools

// Package prometheus pins the Prometheus release that `make observe` and the
// observe end-to-end test run to scrape Loom's services and evaluate the
// shipped dashboard's queries.
//
// It is a module of its own, outside go.work, on purpose: Prometheus brings a
// large dependency graph (its own client, OpenTelemetry and Kubernetes library
// versions) that must not move the versions Loom's modules select. Built with
// GOWORK=off into .cache/tools/prometheus-<version>.
package prometheus

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
)
