// Package cli is the command-line plumbing every gompi command shares: the
// MCA parameter flags (--mca, -am) with Open MPI's spellings, and one entry
// point that normalizes the arguments, runs a cobra command, prints an error
// once as "<command>: <error>" and turns it into an exit code.
//
// A command is built kubectl-style: a constructor returns a *cobra.Command
// over an options struct whose Complete, Validate and Run are called in
// order from RunE. Validate returns usage errors (Usagef) for bad
// arguments, so the user is shown the usage and exit status 2; anything
// else that fails is a runtime error with exit status 1.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"gompi/mca"
)

// Exit statuses of every gompi command.
const (
	ExitOK      = 0 // success
	ExitFailure = 1 // the command ran and failed
	ExitUsage   = 2 // the command line was wrong; nothing was done
)

// UsageError is an error in the command line: a bad flag, a missing or
// extra argument, a value out of range. Execute prints the command's usage
// after it and exits with ExitUsage.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError; commands' Validate methods use it.
func Usagef(format string, a ...any) error {
	return &UsageError{fmt.Errorf(format, a...)}
}

// ExitError makes Execute exit with Code (1 to 255; anything else exits
// with ExitFailure); a launcher returns it to pass on the status of the job
// it ran. A nil Err prints nothing.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}
func (e *ExitError) Unwrap() error { return e.Err }

// stopAtArgKey marks a command whose flags end at its first argument.
const stopAtArgKey = "gompi.cli/stop-at-arg"

// StopAtArg marks cmd as a launcher: its flags end at the first argument
// that is not a flag, and everything from there on (the program and its
// arguments) passes untouched, even under an umbrella binary
// (`gompi run -np 2 ./app -mca x y`).
func StopAtArg(cmd *cobra.Command) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[stopAtArgKey] = "true"
	cmd.Flags().SetInterspersed(false)
}

// Main runs cmd with the process's arguments and signals (SIGINT and
// SIGTERM cancel the command's context) and returns the exit status:
//
//	os.Exit(cli.Main(info.NewCommand(cli.Version()), false))
//
// See Execute for what stopAtArg and valueFlags mean.
func Main(cmd *cobra.Command, stopAtArg bool, valueFlags ...string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Execute(ctx, cmd, os.Args[1:], stopAtArg, valueFlags...)
}

// Execute runs cmd with args and returns the exit status. It first
// rewrites the Open MPI spellings of the parameter flags (--mca name
// value, -mca name value, -am set) with mca.NormalizeArgs, so cobra sees
// --mca=name=value and --am=set. Leading arguments naming subcommands are
// kept as they are and the rest is normalized for the subcommand found.
// When stopAtArg is set, or the command found was marked with StopAtArg,
// normalizing and flag parsing stop at the first argument that is not a
// flag. valueFlags names further flags that take a separate value, beyond
// the command's own cobra flags, which are known already.
//
// An error is printed once to cmd's error stream as "<command path>:
// <error>"; a usage error is followed by the usage.
func Execute(ctx context.Context, cmd *cobra.Command, args []string, stopAtArg bool, valueFlags ...string) int {
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	cmd.SetFlagErrorFunc(flagError)
	markArgErrors(cmd)

	cmd.InitDefaultHelpCmd()
	cmd.InitDefaultCompletionCmd()
	target, n := findSubcommand(cmd, args)
	if !target.Runnable() && target.HasSubCommands() && n < len(args) && !strings.HasPrefix(args[n], "-") {
		msg := fmt.Sprintf("unknown command %q for %q", args[n], target.CommandPath())
		if s := target.SuggestionsFor(args[n]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		fmt.Fprintf(target.ErrOrStderr(), "%s: %s\n\n%s", target.CommandPath(), msg, target.UsageString())
		return ExitUsage
	}
	stop := (stopAtArg && target == cmd) || target.Annotations[stopAtArgKey] == "true"
	if stop {
		target.Flags().SetInterspersed(false)
	}
	// never nil: cobra would take os.Args for a nil list
	norm := append(append(make([]string, 0, len(args)), args[:n]...),
		mca.NormalizeArgs(args[n:], stop, append(valueFlagsOf(target), valueFlags...)...)...)
	cmd.SetArgs(norm)

	ran, err := cmd.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	if ran == nil {
		ran = cmd
	}
	w := ran.ErrOrStderr()
	var exit *ExitError
	if errors.As(err, &exit) {
		bad := exit.Code <= 0 || exit.Code > 255
		if exit.Err != nil || bad {
			fmt.Fprintf(w, "%s: %v\n", ran.CommandPath(), exit)
		}
		if bad {
			return ExitFailure // a status the shell cannot see as a failure is a bug; still fail
		}
		return exit.Code
	}
	fmt.Fprintf(w, "%s: %v\n", ran.CommandPath(), err)
	var usage *UsageError
	if errors.As(err, &usage) {
		fmt.Fprintf(w, "\n%s", ran.UsageString())
		return ExitUsage
	}
	return ExitFailure
}

// flagError turns pflag's errors into usage errors, with a clearer message
// for an Open MPI flag given without its value (which pflag would read as
// a group of one-letter flags).
func flagError(_ *cobra.Command, err error) error {
	msg := err.Error()
	for _, f := range []string{"-mca", "-gmca"} {
		if strings.HasSuffix(msg, " in "+f) {
			return Usagef("%s needs a name and a value: write %s name value", f, f)
		}
	}
	if strings.HasSuffix(msg, " in -am") {
		return Usagef("-am needs a value: write -am set[,set...]")
	}
	return &UsageError{err}
}

// markArgErrors makes every command's argument check return usage errors.
// A command without one gets cobra's default made explicit (no arguments
// when it has subcommands, any otherwise), which also turns an unknown
// subcommand into a usage error.
func markArgErrors(cmd *cobra.Command) {
	check := cmd.Args
	if check == nil {
		check = cobra.ArbitraryArgs
		if cmd.HasSubCommands() {
			check = cobra.NoArgs
		}
	}
	if cmd.Annotations[argsWrappedKey] != "true" {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				return &UsageError{err}
			}
			return nil
		}
		if cmd.Annotations == nil {
			cmd.Annotations = map[string]string{}
		}
		cmd.Annotations[argsWrappedKey] = "true"
	}
	for _, c := range cmd.Commands() {
		markArgErrors(c)
	}
}

const argsWrappedKey = "gompi.cli/args-wrapped"

// findSubcommand follows leading arguments that name subcommands and
// returns the command they lead to and how many arguments that took.
func findSubcommand(cmd *cobra.Command, args []string) (*cobra.Command, int) {
	n := 0
	for n < len(args) {
		var next *cobra.Command
		for _, c := range cmd.Commands() {
			if c.Name() == args[n] || c.HasAlias(args[n]) {
				next = c
				break
			}
		}
		if next == nil {
			break
		}
		cmd, n = next, n+1
	}
	return cmd, n
}

// valueFlagsOf lists the spellings of cmd's flags that take a separate
// value, so normalizing does not mistake a value for an argument.
func valueFlagsOf(cmd *cobra.Command) []string {
	var out []string
	add := func(f *pflag.Flag) {
		if f.NoOptDefVal != "" || f.Name == "mca" || f.Name == "am" {
			return
		}
		out = append(out, "--"+f.Name)
		if f.Shorthand != "" {
			out = append(out, "-"+f.Shorthand)
		}
	}
	cmd.LocalFlags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	return out
}

// Version names this build of gompi: the module version when built from a
// release, else the VCS revision (marked -dirty when modified), else
// "devel"; followed by the Go version that built it.
func Version() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		} else {
			var rev, dirty string
			for _, s := range bi.Settings {
				switch {
				case s.Key == "vcs.revision":
					rev = s.Value
				case s.Key == "vcs.modified" && s.Value == "true":
					dirty = "-dirty"
				}
			}
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if rev != "" {
				v = "devel-" + rev + dirty
			}
		}
	}
	return v + " (" + runtime.Version() + ")"
}
