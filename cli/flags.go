package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"gompi/mca"
)

// ParamFlags are the MCA parameter flags of a command.
type ParamFlags struct {
	// MCA holds the --mca pairs as "name=value", in order.
	MCA []string
	// AMCA holds the -am values in order, each possibly "a,b".
	AMCA []string
}

// AddParamFlags adds --mca and --am to cmd. Users may also write them as
// Open MPI does (--mca name value, -mca name value, -am set); Execute
// rewrites those spellings before cobra parses.
func AddParamFlags(cmd *cobra.Command) *ParamFlags {
	f := &ParamFlags{}
	fs := cmd.Flags()
	fs.Var((*mcaValue)(&f.MCA), "mca", "set an MCA parameter: --mca name value (or name=value; also -mca); repeatable")
	fs.Var((*amcaValue)(&f.AMCA), "am", "apply AMCA parameter sets, leftmost strongest: -am set[,set...] (a name or a file path); repeatable")
	return f
}

// SourceOptions returns where the command's parameters come from: its
// flags, and the usual places for everything else.
func (f *ParamFlags) SourceOptions() mca.SourceOptions {
	return mca.SourceOptions{
		MCA:  append([]string(nil), f.MCA...),
		AMCA: append([]string(nil), f.AMCA...),
	}
}

// mcaValue is the --mca flag: it refuses a value without '=' when parsed,
// so `--mca name` without a value is a usage error naming the fix.
type mcaValue []string

func (v *mcaValue) Set(s string) error {
	name, _, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("want a parameter name and a value: write --mca name value (or --mca name=value)")
	}
	*v = append(*v, s)
	return nil
}
func (v *mcaValue) String() string { return listString(*v) }
func (v *mcaValue) Type() string   { return "name=value" }

// amcaValue is the --am flag.
type amcaValue []string

func (v *amcaValue) Set(s string) error {
	if strings.Trim(s, " ,:") == "" {
		return fmt.Errorf("want an AMCA set name or file: write -am ft-enable-cr")
	}
	*v = append(*v, s)
	return nil
}
func (v *amcaValue) String() string { return listString(*v) }
func (v *amcaValue) Type() string   { return "set" }

// listString shows a repeated flag's values; empty when unset, so help
// shows no default.
func listString(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return "[" + strings.Join(v, " ") + "]"
}
