// Command gompi is the umbrella binary: `gompi info` is gompi-info, `gompi
// run` is gompirun, `gompi ps` is gompi-ps, `gompi checkpoint` and `gompi
// restart` are gompi-checkpoint and gompi-restart; each joins as a
// subcommand built by the same constructor as its own binary.
package main

import (
	"context"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"gompi/cli"
	"gompi/tools/checkpoint"
	"gompi/tools/info"
	"gompi/tools/migrate"
	"gompi/tools/ps"
	"gompi/tools/restart"
	"gompi/tools/run"
)

// newCommand returns the umbrella command with every tool as a subcommand.
func newCommand(version string) *cobra.Command {
	root := &cobra.Command{
		Use:     "gompi",
		Short:   "gompi: a Go message-passing runtime with checkpoint/restart",
		Version: version,
	}
	root.AddCommand(
		sub(info.NewCommand(version), "info"),
		sub(run.NewCommand(), "run"),
		sub(ps.NewCommand(), "ps"),
		sub(checkpoint.NewCommand(), "checkpoint"),
		sub(restart.NewCommand(), "restart"),
		sub(migrate.NewCommand(), "migrate"),
	)
	cli.StopAtArg(root.Commands()[1]) // run: flags end at the program
	return root
}

// sub renames a tool's command ("gompi-info [flags]" → "info [flags]").
func sub(c *cobra.Command, name string) *cobra.Command {
	_, rest, _ := strings.Cut(c.Use, " ")
	c.Use = strings.TrimSpace(name + " " + rest)
	return c
}

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "run" {
		args = append([]string{"run"}, run.NormalizeArgs(args[1:])...)
	}
	if len(args) > 0 && args[0] == "restart" {
		args = append([]string{"restart"}, restart.NormalizeArgs(args[1:])...)
	}
	// No signal context: `gompi run` forwards SIGINT/SIGTERM to the job itself.
	os.Exit(cli.Execute(context.Background(), newCommand(cli.Version()), args, false))
}
