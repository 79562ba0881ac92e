// Command gompi is the umbrella binary: `gompi info` is gompi-info, and
// each gompi tool joins as a subcommand built by the same constructor as
// its own binary.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"gompi/cli"
	"gompi/tools/info"
)

// newCommand returns the umbrella command with every tool as a subcommand.
func newCommand(version string) *cobra.Command {
	root := &cobra.Command{
		Use:     "gompi",
		Short:   "gompi: a Go message-passing runtime with checkpoint/restart",
		Version: version,
	}
	in := info.NewCommand(version)
	in.Use = "info" + in.Use[len("gompi-info"):]
	root.AddCommand(in)
	return root
}

func main() {
	os.Exit(cli.Main(newCommand(cli.Version()), false))
}
