// Command gompi-restart restarts a gompi job from a checkpoint: see
// `gompi-restart --help` and tools/restart.
package main

import (
	"os"

	"gompi/tools/restart"
)

func main() { os.Exit(restart.Main()) }
