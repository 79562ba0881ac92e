// Command gompirun runs a parallel job: see `gompirun --help`.
package main

import (
	"os"

	"gompi/tools/run"
)

func main() { os.Exit(run.Main()) }
