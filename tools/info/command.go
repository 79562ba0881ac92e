package info

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"gompi/boot"
	"gompi/capi/api"
	"gompi/cli"
	"gompi/mca"
)

// Options are gompi-info's flags and what they resolve to.
type Options struct {
	Version   string
	Param     string // --param FRAMEWORK
	Component string // its COMPONENT argument, "all" when absent
	All       bool
	Level     int
	JSON      bool
	Parsable  bool
	RoleName  string
	CAPI      bool // --c-api

	role   mca.Role
	params *cli.ParamFlags
	// load starts the component system and returns it with the function
	// that stops it; tests give one over fake components.
	load func(context.Context, boot.Options) (Input, func() error, error)
}

const long = `gompi-info shows gompi's frameworks, their components, and the MCA
parameters a process would run with: each value, where it came from
(default, system file, user file, user yaml, amca set, environment,
command line) and which components selection would use.

With no flags it lists every framework and its components; a component is
[selected] (selection would use it), [available] (it would work, another
won), [skipped: why] (it does not apply here), [failed: how] or
[excluded] (the framework's selector leaves it out); a component that
answers may add what it found ([selected: CRIU 4.2.1 at /usr/sbin/criu]).
Selection is probed as a rank of a job would see it (--role changes
that), and each framework
says how that process wires it: whether it selects it, how many modules
it keeps and what it provisions them with (the table boot/assemble.go
follows; a tool has none). Give --mca and -am
as you would to gompirun to see what that command line resolves to; an
invalid selection (GOMPI_MCA_crs=bogus) is an error naming the known
components.

--param FRAMEWORK [COMPONENT|all] shows that framework's parameters
(<framework>, <framework>_base_*) and those of the component or of all
components. FRAMEWORK may also be "all" (everything) or "mca" (the
parameters of the component system itself, such as mca_base_component_path
and ft_cr_enabled).

--json prints one object with these fields (stable; new ones may be added):
  version             this build of gompi
  amca_sets           the AMCA sets in force, leftmost (strongest) first
  role                the process kind selection was probed for
  level               the --level in force
  frameworks[]        name, description,
                      selection {value, origin}, the framework's selector,
                      components[] {name, description, version, origin
                        ("built-in" or the plugin binary's path), priority,
                        status (selected|available|skipped|failed|excluded),
                        reason, note (what an answering component found,
                        such as crs criu's CRIU version), params[]},
                      params[] (framework-level parameters),
                      wiring {selected, select, host} (with --role
                        app, hnp or daemon: how that process selects
                        and provisions the framework)
  params[]            parameters of the component system itself
  a parameter:        name, value, default, origin {source, where}, type,
                      level (1-9), help, choices
origin.source is one of: default, system file, user yaml, user file,
amca set, environment, command line; origin.where names the file and line,
the environment variable or --mca. params appear only with --param or --all.

--parsable prints the same facts in Open MPI's colon form, one per line
(mca:crs:self:param:crs_self_priority:value:20).

--c-api lists the functions of the MPI C interface (libmpi_abi.so.1,
scripts/build-c.sh) that gompi implements, one a line; the standard's
others link and return MPI_ERR_UNSUPPORTED_OPERATION.`

const examples = `  gompi-info
  gompi-info --param crs all
  gompi-info --param crs self --level 4
  gompi-info -am ft-enable-cr --mca crs self --param crs all
  gompi-info --all --json
  gompi-info --param mca all -p
  gompi-info --c-api`

// NewCommand returns the gompi-info command; version is shown in its first
// line (cli.Version()).
func NewCommand(version string) *cobra.Command {
	return newCommand(&Options{Version: version, load: func(ctx context.Context, opts boot.Options) (Input, func() error, error) {
		p, err := boot.Load(ctx, opts)
		if err != nil {
			return Input{}, nil, err
		}
		return FromProcess(p, version), p.Close, nil
	}})
}

func newCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "gompi-info [--param FRAMEWORK [COMPONENT|all]] [--all] [flags]",
		Short:   "Show gompi's frameworks, components and MCA parameters",
		Long:    long,
		Example: examples,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Param, "param", "", "show the parameters of `FRAMEWORK` (or all, or mca), and of the COMPONENT given as argument (default all)")
	f.BoolVarP(&o.All, "all", "a", false, "show every framework, component and parameter")
	f.IntVarP(&o.Level, "level", "l", 9, "show parameters up to this `level`: 1-3 users, 4-6 tuners, 7-9 developers")
	f.BoolVar(&o.JSON, "json", false, "print JSON (fields are described above)")
	f.BoolVarP(&o.Parsable, "parsable", "p", false, "print one fact a line, colon separated, for scripts")
	f.BoolVar(&o.CAPI, "c-api", false, "list the MPI C functions gompi implements")
	f.StringVar(&o.RoleName, "role", mca.RoleApp.String(), "probe selection as this `kind` of process: app, hnp, daemon or tool")
	o.params = cli.AddParamFlags(cmd)
	return cmd
}

// Complete fills in what the arguments imply.
func (o *Options) Complete(args []string) error {
	if len(args) == 1 {
		if o.Param == "" {
			return cli.Usagef("%q: a component name goes after --param FRAMEWORK (gompi-info --param crs %s)", args[0], args[0])
		}
		o.Component = args[0]
	}
	if o.Param != "" && o.Component == "" {
		o.Component = "all"
	}
	for _, r := range []mca.Role{mca.RoleTool, mca.RoleHNP, mca.RoleDaemon, mca.RoleApp} {
		if r.String() == o.RoleName {
			o.role = r
			return nil
		}
	}
	return cli.Usagef("--role %q: want app, hnp, daemon or tool", o.RoleName)
}

// Validate checks the flags against each other.
func (o *Options) Validate() error {
	switch {
	case o.Level < 1 || o.Level > 9:
		return cli.Usagef("--level %d: want 1 to 9", o.Level)
	case o.All && o.Param != "":
		return cli.Usagef("give --all or --param, not both")
	case o.JSON && o.Parsable:
		return cli.Usagef("give --json or --parsable, not both")
	case o.CAPI && (o.All || o.Param != "" || o.JSON || o.Parsable):
		return cli.Usagef("--c-api goes alone")
	}
	return nil
}

// Run loads the component system as a tool would, probes selection and
// prints the report.
func (o *Options) Run(cmd *cobra.Command) error {
	if o.CAPI {
		return writeCAPI(cmd.OutOrStdout())
	}
	ctx := cmd.Context()
	in, closer, err := o.load(ctx, boot.Options{Role: mca.RoleTool, Sources: o.params.SourceOptions(), LogOutput: cmd.ErrOrStderr()})
	if err != nil {
		return err
	}
	defer closer()
	rep, err := Collect(ctx, in, Query{
		Framework: o.Param, Component: o.Component, All: o.All, Level: mca.Level(o.Level), Role: o.role,
	})
	if ue := (*UnknownError)(nil); errors.As(err, &ue) {
		return &cli.UsageError{Err: fmt.Errorf("--param: %w", err)}
	}
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	switch {
	case o.JSON:
		err = rep.WriteJSON(out)
	case o.Parsable:
		err = rep.WriteParsable(out)
	default:
		err = rep.WriteText(out)
	}
	if err != nil {
		return fmt.Errorf("info: write: %w", err)
	}
	return nil
}

// writeCAPI lists the implemented C functions: capi/api's list, generated
// from the library's own source.
func writeCAPI(out io.Writer) error {
	for _, f := range api.Implemented() {
		if _, err := fmt.Fprintln(out, f); err != nil {
			return fmt.Errorf("info: write: %w", err)
		}
	}
	return nil
}
