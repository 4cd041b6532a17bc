//go:build e2e

// Package observe runs Loom as an operator sees it (issue 22): a local
// stack (pkg/stack) whose services export traces to a real Jaeger and are
// scraped, with NATS and kube-apiserver, by a real Prometheus, both built
// from the Go module proxy into .cache/tools (make observe-tools). It puts a
// small load on the stack, some claims broken on purpose, then evaluates
// every query of every panel of the shipped Grafana dashboard
// (deploy/helm/loom/dashboards/loom.json) against Prometheus's HTTP API, and
// reads one healthy and one broken claim's trace back from Jaeger's API.
//
// NATS's monitoring endpoint serves JSON (/varz), which Prometheus cannot
// scrape; a small exporter in this package (natsExporter) turns /varz into
// the Prometheus text format under the names of the NATS project's own
// exporter (gnatsd_varz_*), so the dashboard's NATS panels read the same
// series in a cluster that runs prometheus-nats-exporter beside NATS. The
// backlog of each service's work stream is not taken from NATS but from the
// services themselves (loom_bus_consumer_*), which read their consumers'
// info from JetStream: those series exist wherever Loom runs, with no extra
// exporter to deploy, labelled by service and partition as the dashboard
// and a scaling decision need them.
//
// `make observe` runs cmd/loomobserve, which leaves both servers up for a
// person to look at; the e2e test TestObserve runs the same checks with a
// smaller load.
package observe
