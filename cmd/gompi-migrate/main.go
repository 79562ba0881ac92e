// Command gompi-migrate moves ranks of a running gompi job to other nodes:
// see `gompi-migrate --help` and tools/migrate.
package main

import (
	"os"

	"gompi/tools/migrate"
)

func main() { os.Exit(migrate.Main()) }
