// Command gompi-info shows gompi's frameworks, components and MCA
// parameters with their values and origins; see tools/info.
package main

import (
	"os"

	"gompi/cli"
	"gompi/tools/info"
)

func main() {
	os.Exit(cli.Main(info.NewCommand(cli.Version()), false))
}
