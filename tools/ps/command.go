// Package ps is gompi-ps's command (also `gompi ps`): it lists the user's
// running jobs from their records (rte/jobs) and their gompirun's answers.
package ps

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gompi/cli"
	"gompi/rte/jobs"
)

// NewCommand returns the gompi-ps command (also `gompi ps`).
func NewCommand() *cobra.Command {
	var asJSON, ranks bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "gompi-ps [PID...]",
		Short: "List this user's running gompi jobs",
		Long: `gompi-ps lists the running jobs of this user: each gompirun leaves a record
in ${XDG_RUNTIME_DIR:-/tmp}/gompi-<uid>/hnp-<pid>/, and gompi-ps asks each one
for its live state over its owner-only control socket. Records of gompirun
processes that are gone are removed. With PIDs, only those jobs are shown.`,
		Example: `  gompi-ps
  gompi-ps --ranks 12345
  gompi-ps --json`,
		Version: cli.Version(),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the jobs as JSON")
	cmd.Flags().BoolVarP(&ranks, "ranks", "r", false, "list every rank and daemon of each job")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for each gompirun to answer")
	cmd.RunE = func(c *cobra.Command, args []string) error {
		var pids []int
		for _, a := range args {
			pid, err := strconv.Atoi(a)
			if err != nil || pid <= 0 {
				return cli.Usagef("%q is not a process id", a)
			}
			pids = append(pids, pid)
		}
		recs, err := jobs.List()
		if err != nil {
			return err
		}
		var out []jobs.Job
		for _, want := range pids {
			found := false
			for _, r := range recs {
				found = found || r.PID == want
			}
			if !found {
				return fmt.Errorf("pid %d: %w (run gompi-ps without arguments to list them)", want, jobs.ErrNoJob)
			}
		}
		for _, r := range recs {
			if len(pids) > 0 && !containsInt(pids, r.PID) {
				continue
			}
			ctx, cancel := context.WithTimeout(c.Context(), timeout)
			out = append(out, jobs.Query(ctx, r))
			cancel()
		}
		w := c.OutOrStdout()
		if asJSON {
			if out == nil {
				out = []jobs.Job{}
			}
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		}
		return printJobs(w, out, ranks)
	}
	return cmd
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func printJobs(w io.Writer, js []jobs.Job, ranks bool) error {
	if len(js) == 0 {
		_, err := fmt.Fprintln(w, "no running gompi jobs")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tJOB\tNP\tNODES\tPLM\tSTATE\tSTARTED\tCOMMAND")
	for _, j := range js {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", j.PID, j.Job, j.NP, strings.Join(j.Nodes, ","), j.PLM, j.State,
			j.Start.Local().Format("2006-01-02 15:04:05"), strings.Join(j.Command, " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, j := range js {
		if j.Error != "" {
			fmt.Fprintf(w, "pid %d: %s\n", j.PID, j.Error)
		}
		if !ranks || j.Error != "" {
			continue
		}
		fmt.Fprintf(w, "\njob %s (pid %d):\n", j.Job, j.PID)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  DAEMON\tPID\tHOST\tSTATE")
		for _, d := range j.Daemons {
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\n", d.Node, d.PID, d.Hostname, d.State)
		}
		fmt.Fprintln(tw, "  RANK\tNODE\tPID\tSTATE")
		for _, r := range j.Ranks {
			state := r.State
			if r.Signal != 0 {
				state += fmt.Sprintf(" (signal %d)", r.Signal)
			} else if r.ExitCode != 0 {
				state += fmt.Sprintf(" (status %d)", r.ExitCode)
			}
			fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\n", r.Rank, r.Node, r.PID, state)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
