// Command gompi-ps lists this user's running gompi jobs: see `gompi-ps --help`.
package main

import (
	"os"

	"gompi/cli"
	"gompi/rte/jobs"
)

func main() { os.Exit(cli.Main(jobs.NewPSCommand(), false)) }
