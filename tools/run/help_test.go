package run

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"gompi/cli"
)

var update = flag.Bool("update", false, "rewrite the help golden files in testdata/help")

// The command's help is what its binary printed before the command moved
// here from rte (testdata/help/gompirun.golden).
func TestHelp(t *testing.T) {
	checkHelp(t, "gompirun.golden", []string{"--help"}, 0)
}

func checkHelp(t *testing.T, golden string, args []string, wantCode int) {
	t.Helper()
	var out bytes.Buffer
	cmd := NewCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	if code := cli.Execute(context.Background(), cmd, args, true); code != wantCode {
		t.Errorf("%v: exit status %d, want %d", args, code, wantCode)
	}
	path := filepath.Join("..", "..", "testdata", "help", golden)
	if *update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("%v printed:\n%s\nwant (%s):\n%s", args, out.String(), path, want)
	}
}

func TestUsageError(t *testing.T) {
	checkHelp(t, "gompirun-np-without-value.golden", NormalizeArgs([]string{"-np"}), cli.ExitUsage)
}
