// Command gompid is the per-node daemon of a gompi job, started by
// gompirun: see `gompid --help`.
package main

import (
	"os"

	"gompi/cli"
	"gompi/tools/daemon"
)

func main() { os.Exit(cli.Main(daemon.NewCommand(), false)) }
