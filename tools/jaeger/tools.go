//go:build tools

// Package jaeger pins the Jaeger release that `make observe` and the observe
// end-to-end test run to receive Loom's services' OTLP traces and serve them
// back over Jaeger's query API.
//
// It is a module of its own, outside go.work, on purpose: Jaeger is built on
// the OpenTelemetry Collector, whose dependency graph must not move the
// versions Loom's modules select. Built with GOWORK=off into
// .cache/tools/jaeger-<version>.
package jaeger

import (
	_ "github.com/jaegertracing/jaeger/cmd/jaeger"
)
