// Command binder is Loom's binder service: it binds claims to composite resources and resolves references between composed resources.
// main only wires the shared runtime (pkg/service); behaviour lives in
// internal/.
package main

import (
	"context"

	"github.com/loomxr/loom/pkg/service"
)

func main() {
	service.Main("binder", func(ctx context.Context, rt *service.Runtime) error {
		rt.Log.Info("ready")
		<-ctx.Done()
		return nil
	}, nil)
}
