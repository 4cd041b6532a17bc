//go:build e2e

// Package migrate proves that Loom takes over a live Crossplane v1 platform
// without re-creating anything (issue 21). It runs upstream Crossplane core
// (built by `make crossplane` into .cache/crossplane) on a local control
// plane with upstream's CRDs, creates claims of the side-by-side
// benchmark's Composition (mode Resources, with connection details) and
// waits for them Ready; then it stops Crossplane, starts Loom's services on
// the same cluster and checks that every claim stays bound to the same XR,
// every XR keeps the same composed resources, every connection Secret keeps
// its data, and counts Loom's writes; then it deletes a claim through Loom
// and finally hands the platform back to Crossplane.
//
// `make e2e` runs it with 50 claims; `make e2e-migrate N=1000` at scale,
// writing bench/results/migrate.json:
//
//	cd e2e && go test -tags e2e -run '^TestMigrate$' -v ./migrate -claims 1000 -out ../bench/results/migrate.json
package migrate

import (
	"flag"
	"os"
	"testing"
)

var (
	flagClaims = flag.Int("claims", 50, "how many claims Crossplane creates before the switch")
	flagOut    = flag.String("out", "", "write the report (JSON) to this file")
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}
