package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"gompi/mca"
)

// got is what a test command saw when it ran.
type got struct {
	MCA, AMCA, Args []string
	Level           int
	Host            string
	Ran             string
}

// newTree returns an umbrella command "gompi" with a tool subcommand
// "info" and a launcher subcommand "run", plus the record of what ran.
func newTree(t *testing.T) (*cobra.Command, *got) {
	t.Helper()
	g := &got{}
	tool := newTool("info", g)
	run := newLauncher("run", g)
	root := &cobra.Command{Use: "gompi", Short: "umbrella"}
	root.AddCommand(tool, run)
	return root, g
}

func newTool(use string, g *got) *cobra.Command {
	var level int
	var fail string
	var code int
	cmd := &cobra.Command{
		Use:  use + " [ARG...]",
		Args: cobra.MaximumNArgs(2),
	}
	pf := AddParamFlags(cmd)
	cmd.Flags().IntVar(&level, "level", 9, "level 1-9")
	cmd.Flags().StringVar(&fail, "fail", "", "fail at run time with this message")
	cmd.Flags().IntVar(&code, "code", 0, "exit with this code")
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if level < 1 || level > 9 {
			return Usagef("--level %d: want 1 to 9", level)
		}
		opts := pf.SourceOptions()
		g.MCA, g.AMCA, g.Args, g.Level, g.Ran = opts.MCA, opts.AMCA, args, level, c.CommandPath()
		if c.Context() == nil {
			return errors.New("no context")
		}
		if code != 0 {
			return &ExitError{Code: code, Err: errOrNil(fail)}
		}
		if fail != "" {
			return fmt.Errorf("tool: %s", fail)
		}
		return nil
	}
	return cmd
}

func errOrNil(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}

func newLauncher(use string, g *got) *cobra.Command {
	var host string
	cmd := &cobra.Command{Use: use + " [flags] PROGRAM [ARG...]", Args: cobra.MinimumNArgs(1)}
	pf := AddParamFlags(cmd)
	cmd.Flags().StringVarP(&host, "host", "H", "", "hosts")
	StopAtArg(cmd)
	cmd.RunE = func(c *cobra.Command, args []string) error {
		opts := pf.SourceOptions()
		g.MCA, g.AMCA, g.Args, g.Host, g.Ran = opts.MCA, opts.AMCA, args, host, c.CommandPath()
		return nil
	}
	return cmd
}

func TestExecute(t *testing.T) {
	tests := []struct {
		name     string
		args     string // split on spaces
		stop     bool   // run the launcher as the root command
		want     got
		code     int
		stderr   []string // substrings of the error output
		noStderr bool
	}{
		{name: "no arguments", args: "", want: got{Level: 9, Ran: "tool"}},
		{name: "mca two words", args: "--mca crs self",
			want: got{MCA: []string{"crs=self"}, Level: 9, Ran: "tool"}},
		{name: "open mpi single dash", args: "-mca crs self -mca snapc full",
			want: got{MCA: []string{"crs=self", "snapc=full"}, Level: 9, Ran: "tool"}},
		{name: "mca name=value", args: "--mca crs=self -mca=sstore=stage --mca=filem=raw",
			want: got{MCA: []string{"crs=self", "sstore=stage", "filem=raw"}, Level: 9, Ran: "tool"}},
		{name: "gmca", args: "-gmca crs self --gmca filem raw",
			want: got{MCA: []string{"crs=self", "filem=raw"}, Level: 9, Ran: "tool"}},
		{name: "empty value", args: "--mca crs=",
			want: got{MCA: []string{"crs="}, Level: 9, Ran: "tool"}},
		{name: "am", args: "-am ft-enable-cr --am a,b -am=c",
			want: got{AMCA: []string{"ft-enable-cr", "a,b", "c"}, Level: 9, Ran: "tool"}},
		{name: "mixed with value flags and args", args: "x --level 3 -mca crs self y",
			want: got{MCA: []string{"crs=self"}, Args: []string{"x", "y"}, Level: 3, Ran: "tool"}},
		{name: "value flag value looking like a flag spelling", args: "--fail -am --code 4", code: 4,
			stderr: []string{"tool: -am\n"}},
		{name: "double dash ends flags", args: "-mca crs self -- -mca",
			want: got{MCA: []string{"crs=self"}, Args: []string{"-mca"}, Level: 9, Ran: "tool"}},
		{name: "mca without value", args: "--mca crs", code: ExitUsage,
			stderr: []string{"tool: invalid argument \"crs\" for \"--mca\" flag: want a parameter name and a value", "Usage:"}},
		{name: "single dash mca at the end", args: "--level 2 -mca", code: ExitUsage,
			stderr: []string{"tool: -mca needs a name and a value: write -mca name value\n", "Usage:"}},
		{name: "am at the end", args: "-am", code: ExitUsage,
			stderr: []string{"tool: -am needs a value"}},
		{name: "empty am", args: "--am=,", code: ExitUsage,
			stderr: []string{"want an AMCA set name"}},
		{name: "unknown flag", args: "--bogus", code: ExitUsage,
			stderr: []string{"tool: unknown flag: --bogus\n", "Usage:\n  tool [ARG...]"}},
		{name: "too many args", args: "a b c", code: ExitUsage,
			stderr: []string{"tool: accepts at most 2 arg(s), received 3\n", "Usage:"}},
		{name: "usage error from validation", args: "--level 0", code: ExitUsage,
			stderr: []string{"tool: --level 0: want 1 to 9\n", "Usage:"}},
		{name: "runtime error printed once without usage", args: "--fail boom", code: ExitFailure,
			stderr: []string{"tool: tool: boom\n"}},
		{name: "exit error", args: "--code 3 --fail job", code: 3, stderr: []string{"tool: job\n"}},
		{name: "silent exit error", args: "--code 5", code: 5, noStderr: true},
		{name: "exit error out of range", args: "--code -1", code: ExitFailure, stderr: []string{"tool: exit status -1\n"}},
		{name: "help", args: "--help", noStderr: true},
		{name: "launcher stops at the program", stop: true, args: "-mca crs self -H a,b ./app -mca x y --help",
			want: got{MCA: []string{"crs=self"}, Host: "a,b", Args: []string{"./app", "-mca", "x", "y", "--help"}, Ran: "launcher"}},
		{name: "launcher long value flag", stop: true, args: "--host n1 -am ft-enable-cr ./app",
			want: got{AMCA: []string{"ft-enable-cr"}, Host: "n1", Args: []string{"./app"}, Ran: "launcher"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &got{}
			var cmd *cobra.Command
			if tt.stop {
				cmd = newLauncher("launcher", g)
			} else {
				cmd = newTool("tool", g)
			}
			var stdout, stderr bytes.Buffer
			cmd.SetOut(&stdout)
			cmd.SetErr(&stderr)
			code := Execute(context.Background(), cmd, strings.Fields(tt.args), tt.stop)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			for _, s := range tt.stderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
				}
			}
			if tt.noStderr && stderr.Len() > 0 {
				t.Errorf("stderr: %q, want nothing", stderr.String())
			}
			if n := strings.Count(stderr.String(), "Usage:"); n > 1 {
				t.Errorf("usage printed %d times", n)
			}
			if tt.code == ExitOK && tt.name != "help" && fmt.Sprintf("%+v", *g) != fmt.Sprintf("%+v", tt.want) {
				t.Errorf("ran with %+v, want %+v", *g, tt.want)
			}
			if tt.name == "help" && !strings.Contains(stdout.String(), "--mca name=value") {
				t.Errorf("help lacks the --mca flag:\n%s", stdout.String())
			}
		})
	}
}

func TestExecuteSubcommands(t *testing.T) {
	tests := []struct {
		args   string
		want   got
		code   int
		stderr string
	}{
		{args: "info -mca crs self x", want: got{MCA: []string{"crs=self"}, Args: []string{"x"}, Level: 9, Ran: "gompi info"}},
		{args: "info x -am ft-enable-cr", want: got{AMCA: []string{"ft-enable-cr"}, Args: []string{"x"}, Level: 9, Ran: "gompi info"}},
		{args: "run -H n1 ./app -mca x y", want: got{Host: "n1", Args: []string{"./app", "-mca", "x", "y"}, Ran: "gompi run"}},
		{args: "run --mca crs self -- ./app -am z", want: got{MCA: []string{"crs=self"}, Args: []string{"./app", "-am", "z"}, Ran: "gompi run"}},
		{args: "bogus", code: ExitUsage, stderr: "gompi: unknown command \"bogus\" for \"gompi\"\n"},
		{args: "inf", code: ExitUsage, stderr: "gompi: unknown command \"inf\" for \"gompi\"; did you mean info?\n"},
		{args: "help info", want: got{}},
		{args: "info --mca", code: ExitUsage, stderr: "gompi info: flag needs an argument: --mca\n"},
		{args: "run", code: ExitUsage, stderr: "gompi run: requires at least 1 arg(s), only received 0\n"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			root, g := newTree(t)
			var stdout, stderr bytes.Buffer
			root.SetOut(&stdout)
			root.SetErr(&stderr)
			code := Execute(context.Background(), root, strings.Fields(tt.args), false)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			if tt.code != ExitOK {
				if !strings.HasPrefix(stderr.String(), tt.stderr) {
					t.Errorf("stderr:\n%s\nwant it to start with %q", stderr.String(), tt.stderr)
				}
				return
			}
			if fmt.Sprintf("%+v", *g) != fmt.Sprintf("%+v", tt.want) {
				t.Errorf("ran with %+v, want %+v", *g, tt.want)
			}
		})
	}
}

// TestSourceOptionsLoad checks that what the flags collect is what
// mca.LoadSources understands, origins included.
func TestSourceOptionsLoad(t *testing.T) {
	g := &got{}
	cmd := newTool("tool", g)
	var opts mca.SourceOptions
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if err := run(c, args); err != nil {
			return err
		}
		opts = mca.SourceOptions{MCA: g.MCA, AMCA: g.AMCA}
		return nil
	}
	cmd.SetErr(new(bytes.Buffer))
	if code := Execute(context.Background(), cmd, []string{"-mca", "ft_cr_enabled", "0", "-am", "ft-enable-cr"}, false); code != 0 {
		t.Fatalf("exit %d", code)
	}
	opts.NoUserFiles, opts.SysconfDir, opts.WorkDir, opts.AMCAPath = true, t.TempDir(), t.TempDir(), []string{}
	src, err := mca.LoadSources(opts)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := mca.NewParams().Resolve(src)
	if err != nil {
		t.Fatal(err)
	}
	if s := vals.Get("ft_cr_enabled"); s.Value != "0" || s.Origin.String() != "command line (--mca)" {
		t.Errorf("ft_cr_enabled = %q from %s, want 0 from the command line", s.Value, s.Origin)
	}
	if got := src.AMCASets(); !reflect.DeepEqual(got, []string{"ft-enable-cr"}) {
		t.Errorf("AMCA sets %v", got)
	}
}

func TestContextReachesCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cmd := &cobra.Command{Use: "x", RunE: func(c *cobra.Command, _ []string) error { return c.Context().Err() }}
	var stderr bytes.Buffer
	cmd.SetErr(&stderr)
	if code := Execute(ctx, cmd, nil, false); code != ExitFailure || !strings.Contains(stderr.String(), "x: context canceled") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestVersion(t *testing.T) {
	v := Version()
	if !strings.Contains(v, "(go") || strings.HasPrefix(v, " ") {
		t.Errorf("Version() = %q", v)
	}
}

// FuzzExecute feeds arbitrary command lines (words separated by NUL) to a
// tool and a launcher: nothing may panic, the exit status is one of the
// documented ones, and every --mca value that got through has a name.
func FuzzExecute(f *testing.F) {
	for _, s := range []string{
		"--mca\x00crs\x00self", "-mca\x00crs", "-am", "-am\x00x\x00--level\x003", "--\x00-mca\x00a\x00b",
		"-mca=a=b", "--mca=", "--level\x00-mca", "x\x00-am\x00y\x00--bogus", "-H\x00-mca\x00./a",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, line string, stop bool) {
		args := strings.Split(line, "\x00")
		g := &got{}
		var cmd *cobra.Command
		if stop {
			cmd = newLauncher("launcher", g)
		} else {
			cmd = newTool("tool", g)
		}
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		code := Execute(context.Background(), cmd, args, stop)
		if code < 0 || code > 255 {
			t.Fatalf("exit %d", code)
		}
		if code != ExitOK && out.Len() == 0 && !strings.Contains(line, "--code") {
			t.Fatalf("exit %d with nothing printed", code)
		}
		for _, m := range g.MCA {
			if name, _, ok := strings.Cut(m, "="); !ok || strings.TrimSpace(name) == "" {
				t.Fatalf("--mca %q got through", m)
			}
		}
	})
}
