// Package clitest holds what the commands' tests share: running a command
// as its binary would, and holding what it printed against a golden file
// (rewritten with the tests' -update flag).
package clitest

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/spf13/cobra"

	"gompi/cli"
)

// Golden runs cmd with args through cli.Execute (stopAtArg as the binary
// passes it), checks its exit status, and compares everything it printed
// with the golden file at path; update rewrites the file first.
func Golden(t testing.TB, cmd *cobra.Command, args []string, stopAtArg bool, wantCode int, path string, update bool) {
	t.Helper()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	if code := cli.Execute(context.Background(), cmd, args, stopAtArg); code != wantCode {
		t.Errorf("%v: exit status %d, want %d", args, code, wantCode)
	}
	if update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update rewrites it)", err)
	}
	if out.String() != string(want) {
		t.Errorf("%v printed:\n%s\nwant (%s; go test -update rewrites it):\n%s", args, out.String(), path, want)
	}
}
