// Command gompid is the per-node daemon of a gompi job, started by
// gompirun: see `gompid --help`. Run with rankinit.Arg first, it is a
// rank's init instead (package rankinit): gompid starts the ranks of a
// job whose CRS is criu by re-executing itself that way.
package main

import (
	"os"

	"gompi/cli"
	"gompi/rte/rankinit"
	"gompi/tools/daemon"
)

func main() {
	rankinit.Main()
	os.Exit(cli.Main(daemon.NewCommand(), false))
}
