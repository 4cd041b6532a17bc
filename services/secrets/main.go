// Command secrets is Loom's secrets service: it builds connection Secrets of composite resources and copies them to their claims.
// main only wires the shared runtime (pkg/service); behaviour lives in
// internal/.
package main

import (
	"context"

	"github.com/loomxr/loom/pkg/service"
)

func main() {
	service.Main("secrets", func(ctx context.Context, rt *service.Runtime) error {
		rt.Log.Info("ready")
		<-ctx.Done()
		return nil
	}, nil)
}
