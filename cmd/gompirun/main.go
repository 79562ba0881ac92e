// Command gompirun runs a parallel job: see `gompirun --help`.
package main

import (
	"os"

	"gompi/rte/hnp"
)

func main() { os.Exit(hnp.Main()) }
