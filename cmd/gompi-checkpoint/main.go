// Command gompi-checkpoint checkpoints a running gompi job: see
// `gompi-checkpoint --help` and tools/checkpoint.
package main

import (
	"os"

	"gompi/tools/checkpoint"
)

func main() { os.Exit(checkpoint.Main()) }
