// Command loomctl is Loom's user CLI: it runs the local stack (dev), renders
// Compositions offline (render), inspects the bus (dlq) and explains why a
// claim is not ready (trace).
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// commands holds the constructors of loomctl's subcommands. Each subcommand
// lives in its own file and registers itself from an init function, so that
// adding one never touches this file.
var commands []func() *cobra.Command //nolint:gochecknoglobals // Written only by init functions.

func register(c func() *cobra.Command) { commands = append(commands, c) }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "loomctl",
		Short:         "Loom's command-line interface",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	for _, c := range commands {
		root.AddCommand(c())
	}
	return root
}

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "loomctl:", err)
		os.Exit(1)
	}
}
