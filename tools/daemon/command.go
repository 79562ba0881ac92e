// Package daemon is gompid's command: its flags and signals, and the call
// into rte/daemon, which serves the node.
package daemon

import (
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"gompi/boot"
	"gompi/cli"
	"gompi/mca"
	"gompi/rte/control"
	"gompi/rte/daemon"
)

// NewCommand returns the gompid command. gompid is started by gompirun's
// PLM, one per node; it is not meant to be run by hand.
func NewCommand() *cobra.Command {
	var o daemon.Options
	var hnp string
	var verbose int
	cmd := &cobra.Command{
		Use:   "gompid --job ID --node NAME --hnp CONTACT[,CONTACT...]",
		Short: "The per-node daemon of a gompi job (started by gompirun)",
		Long: `gompid is started by gompirun, one per node, through the PLM framework. It
reads the job secret from its standard input, dials back to gompirun at one of
the --hnp contacts (unix:/path or tcp:host:port), starts the node's ranks,
forwards their output and exit statuses, and removes its node directory
(<session dir>/<job>/<node>) when the job ends. When gompirun goes away it
kills the node's ranks and exits.`,
		Args:    cobra.NoArgs,
		Version: cli.Version(),
	}
	f := cmd.Flags()
	f.StringVar(&o.Job, "job", "", "job id")
	f.StringVar(&o.Node, "node", "", "name of the node this daemon serves")
	f.StringVar(&hnp, "hnp", "", "contacts of gompirun, tried in order: unix:/path or tcp:host:port, comma-separated")
	f.StringVar(&o.SessionDir, "session-dir", "", "folder of node-local directories (default $TMPDIR/gompi-<uid>)")
	f.IntVar(&verbose, "verbose", 0, "log verbosity (plm_base_verbose)")
	for _, n := range []string{"job", "node", "hnp"} {
		_ = cmd.MarkFlagRequired(n)
	}
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		var err error
		if o.HNP, err = control.ParseContacts(hnp); err != nil {
			return cli.Usagef("--hnp: %v", err)
		}
		ctx, stop := signal.NotifyContext(c.Context(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		defer stop()
		// When gompirun dies, the pipe gompid logs into breaks; a log line
		// must then fail, not kill gompid before it has cleaned up. (Caught,
		// not ignored: an ignored SIGPIPE would be inherited by the ranks.)
		signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
		o.Stdin = os.Stdin
		// The job's one log format (boot.NewLogHandler); rte/daemon adds
		// the node to every record.
		o.LogOutput = c.ErrOrStderr()
		o.Log = slog.New(mca.MinLevel(boot.NewLogHandler(o.LogOutput, slog.String("role", mca.RoleDaemon.String())), mca.VerboseLevel(verbose)))
		if err := daemon.Run(ctx, o); err != nil {
			if errors.Is(err, daemon.ErrHNPLost) {
				return &cli.ExitError{Code: 3, Err: err}
			}
			return err
		}
		return nil
	}
	return cmd
}
