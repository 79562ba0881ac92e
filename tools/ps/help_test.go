package ps

import (
	"flag"
	"path/filepath"
	"testing"

	"gompi/cli/clitest"
)

var update = flag.Bool("update", false, "rewrite the help golden files in testdata/help")

// The command's help is what its binary printed before the command moved
// here from rte (testdata/help/gompi-ps.golden).
func TestHelp(t *testing.T) {
	checkHelp(t, "gompi-ps.golden", []string{"--help"}, 0)
}

func checkHelp(t *testing.T, golden string, args []string, wantCode int) {
	t.Helper()
	clitest.Golden(t, NewCommand(), args, false, wantCode, filepath.Join("..", "..", "testdata", "help", golden), *update)
}
