package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"gompi/cli"
	"gompi/tools/info"
)

// TestInfoSubcommand checks that `gompi info ARGS` is `gompi-info ARGS`.
func TestInfoSubcommand(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "GOMPI_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GOMPI_SYSCONFDIR", t.TempDir())
	exec := func(root bool, args ...string) (string, int) {
		cmd := info.NewCommand("test")
		if root {
			cmd = newCommand("test")
			args = append([]string{"info"}, args...)
		}
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		code := cli.Execute(context.Background(), cmd, args, false)
		return out.String(), code
	}
	for _, args := range [][]string{
		{"-am", "ft-enable-cr", "-mca", "crs_base_verbose", "3", "--param", "crs", "all"},
		{"--all", "--json"},
		{"--param", "nosuch"},
	} {
		want, wantCode := exec(false, args...)
		got, code := exec(true, args...)
		got = strings.ReplaceAll(got, "gompi info", "gompi-info")
		// the usage after an error names the command as it was called
		got, _, _ = strings.Cut(got, "\nUsage:")
		want, _, _ = strings.Cut(want, "\nUsage:")
		if code != wantCode || got != want {
			t.Errorf("gompi info %s: exit %d, output:\n%s\nwant exit %d, output:\n%s", strings.Join(args, " "), code, got, wantCode, want)
		}
	}
	root := newCommand("test")
	var buf bytes.Buffer
	root.SetOut(&buf)
	code := cli.Execute(context.Background(), root, []string{"--help"}, false)
	if out := buf.String(); code != 0 || !strings.Contains(out, "info        Show gompi's frameworks") {
		t.Errorf("gompi --help: exit %d:\n%s", code, out)
	}
}
