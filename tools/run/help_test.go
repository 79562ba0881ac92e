package run

import (
	"flag"
	"path/filepath"
	"testing"

	"gompi/cli"
	"gompi/cli/clitest"
)

var update = flag.Bool("update", false, "rewrite the help golden files in testdata/help")

// The command's help is what its binary printed before the command moved
// here from rte (testdata/help/gompirun.golden).
func TestHelp(t *testing.T) {
	checkHelp(t, "gompirun.golden", []string{"--help"}, 0)
}

func checkHelp(t *testing.T, golden string, args []string, wantCode int) {
	t.Helper()
	clitest.Golden(t, NewCommand(), args, true, wantCode, filepath.Join("..", "..", "testdata", "help", golden), *update)
}

func TestUsageError(t *testing.T) {
	checkHelp(t, "gompirun-np-without-value.golden", NormalizeArgs([]string{"-np"}), cli.ExitUsage)
}
