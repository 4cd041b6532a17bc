// Command renderer is Loom's renderer service: it renders composite resources through their Compositions into composed resources.
// main only wires the shared runtime (pkg/service); behaviour lives in
// internal/.
package main

import (
	"context"

	"github.com/loomxr/loom/pkg/service"
)

func main() {
	service.Main("renderer", func(ctx context.Context, rt *service.Runtime) error {
		rt.Log.Info("ready")
		<-ctx.Done()
		return nil
	}, nil)
}
