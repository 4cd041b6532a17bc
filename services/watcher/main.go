// Command watcher is Loom's watcher service: it lists and watches the API server and publishes change events to JetStream.
// main only wires the shared runtime (pkg/service); behaviour lives in
// internal/.
package main

import (
	"context"

	"github.com/loomxr/loom/pkg/service"
)

func main() {
	service.Main("watcher", func(ctx context.Context, rt *service.Runtime) error {
		rt.Log.Info("ready")
		<-ctx.Done()
		return nil
	}, nil)
}
