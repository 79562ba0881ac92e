// Command gompi-ps lists this user's running gompi jobs: see `gompi-ps --help`.
package main

import (
	"os"

	"gompi/cli"
	"gompi/tools/ps"
)

func main() { os.Exit(cli.Main(ps.NewCommand(), false)) }
