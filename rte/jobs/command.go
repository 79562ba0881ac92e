package jobs

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
	"google.golang.org/grpc"

	"gompi/cli"
	pb "gompi/rte/control/proto"
)

// Job is one running job as gompi-ps reports it: its record and, when its
// gompirun answered, its live state.
type Job struct {
	Record
	State   string        `json:"state"`
	Error   string        `json:"error,omitempty"` // why the live state is missing
	Daemons []DaemonState `json:"daemons,omitempty"`
	Ranks   []RankState   `json:"ranks,omitempty"`
}

// DaemonState is one node's daemon.
type DaemonState struct {
	Node     string `json:"node"`
	PID      int    `json:"pid"`
	Hostname string `json:"hostname,omitempty"`
	State    string `json:"state"`
}

// RankState is one rank.
type RankState struct {
	Rank     int    `json:"rank"`
	Node     string `json:"node"`
	PID      int    `json:"pid"`
	State    string `json:"state"`
	ExitCode int    `json:"exit_code,omitempty"`
	Signal   int    `json:"signal,omitempty"`
}

// Query asks the HNP of r for its live state, within ctx.
func Query(ctx context.Context, r Record) Job {
	j := Job{Record: r, State: "unreachable"}
	conn, err := Dial(r.PID)
	if err != nil {
		j.Error = err.Error()
		return j
	}
	defer conn.Close()
	st, err := pb.NewToolClient(conn).Status(ctx, &pb.StatusRequest{}, grpc.WaitForReady(true))
	if err != nil {
		j.Error = fmt.Sprintf("jobs: status of pid %d: %v", r.PID, err)
		return j
	}
	j.State = st.State
	for _, d := range st.Daemons {
		j.Daemons = append(j.Daemons, DaemonState{Node: d.Node, PID: int(d.Pid), Hostname: d.Hostname, State: d.State})
	}
	for _, rk := range st.Ranks {
		j.Ranks = append(j.Ranks, RankState{Rank: int(rk.Rank), Node: rk.Node, PID: int(rk.Pid), State: rk.State,
			ExitCode: int(rk.ExitCode), Signal: int(rk.Signal)})
	}
	return j
}

// NewPSCommand returns the gompi-ps command (also `gompi ps`).
func NewPSCommand() *cobra.Command {
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
		recs, err := List()
		if err != nil {
			return err
		}
		var out []Job
		for _, want := range pids {
			found := false
			for _, r := range recs {
				found = found || r.PID == want
			}
			if !found {
				return fmt.Errorf("pid %d: %w (run gompi-ps without arguments to list them)", want, ErrNoJob)
			}
		}
		for _, r := range recs {
			if len(pids) > 0 && !containsInt(pids, r.PID) {
				continue
			}
			ctx, cancel := context.WithTimeout(c.Context(), timeout)
			out = append(out, Query(ctx, r))
			cancel()
		}
		w := c.OutOrStdout()
		if asJSON {
			if out == nil {
				out = []Job{}
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

func printJobs(w io.Writer, js []Job, ranks bool) error {
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
