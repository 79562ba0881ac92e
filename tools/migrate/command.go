// Package migrate is gompi-migrate: it asks the gompirun of a running job,
// found by its PID, to move ranks to other nodes while the job runs (every
// rank of the nodes given with --off, and the ranks given with --ranks),
// as Open MPI's ompi-migrate does. gompirun hands the request to its
// ErrMgr stack as a predicted fault; the crmig component saves only the
// moving ranks and restarts them elsewhere. The command waits until the
// moved ranks run again and prints where each went.
package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"gompi/cli"
	pb "gompi/rte/control/proto"
	"gompi/rte/jobs"
)

// options are gompi-migrate's flags.
type options struct {
	off, onto       []string
	ranks           []int
	within          time.Duration
	asJSON, verbose bool
	job             jobs.Selector

	pid int
}

// NewCommand returns the gompi-migrate command.
func NewCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "gompi-migrate [options] PID_OF_GOMPIRUN (--off NODES | --ranks RANKS)",
		Short: "Move ranks of a running gompi job to other nodes",
		Long: `gompi-migrate asks the gompirun with the given PID (gompi-ps lists them) to
move ranks of its job to other nodes while the job runs: every rank of the
nodes given with --off, and the ranks given with --ranks. Only the moving
ranks are checkpointed; the others wait at their safe point until the moved
ranks run again on their new nodes, and the job goes on. Each moving rank
goes to the least loaded of the nodes given with --onto, or else of the
job's nodes that are up and not being left. It prints where each rank went:

  Rank 2: n2 -> n3
  Migrated 1 rank in 0.84 s (checkpoint 0.31 s, restart 0.53 s); migration sequence 4

--within says when the nodes are expected to fail: when a migration would
take longer (about twice the job's last checkpoint), the job is left to its
recovery policy (errmgr autor restarts it from its last checkpoint once the
failure comes). The job must run with checkpoint/restart on (gompirun -am
ft-enable-cr). gompi-migrate waits as long as the migration takes;
interrupted, it stops waiting but the migration goes on: gompi-ps --ranks
shows where the ranks run.`,
		Example: `  gompi-migrate 12345 --off n1,n2
  gompi-migrate 12345 --ranks 2,5 --onto n3
  gompi-migrate 12345 --off n2 --within 5m --json`,
		Args:    cobra.MaximumNArgs(1),
		Version: cli.Version(),
	}
	f := cmd.Flags()
	f.VarP((*nodesValue)(&o.off), "off", "x", "nodes to move every rank off, comma-separated (repeatable)")
	f.VarP((*ranksValue)(&o.ranks), "ranks", "r", "ranks to move, comma-separated (repeatable)")
	f.VarP((*nodesValue)(&o.onto), "onto", "t", "nodes to move the ranks onto, comma-separated (default: any node of the job that is up and not left)")
	f.DurationVar(&o.within, "within", 0, "when the fault is expected, from now (e.g. 5m); 0 = unknown")
	f.BoolVar(&o.asJSON, "json", false, "print the outcome as JSON")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "print the request and what the job's fault policies did")
	o.job.AddFlags(f)
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if err := o.complete(args); err != nil {
			return err
		}
		return o.run(c.Context(), c.OutOrStdout())
	}
	return cmd
}

// complete checks the command line and finds the job's gompirun.
func (o *options) complete(args []string) error {
	pid, err := o.job.PID(args)
	if err != nil {
		return err
	}
	o.pid = pid
	switch {
	case len(o.off) == 0 && len(o.ranks) == 0:
		return cli.Usagef("what to migrate? give --off NODES (every rank of those nodes) or --ranks RANKS")
	case o.within < 0:
		return cli.Usagef("--within %v: want how long from now the fault is expected, such as 5m (0: unknown)", o.within)
	}
	for _, n := range o.onto {
		if slices.Contains(o.off, n) {
			return cli.Usagef("node %s is in both --off and --onto: ranks cannot move onto a node they leave", n)
		}
	}
	return nil
}

func (o *options) run(ctx context.Context, w io.Writer) error {
	if err := jobs.FindHNP(o.pid); err != nil {
		return err
	}
	conn, err := jobs.Dial(o.pid)
	if err != nil {
		return err
	}
	defer conn.Close()
	req := &pb.MigrateRequest{Off: o.off, Onto: o.onto, WithinNano: int64(o.within)}
	for _, r := range o.ranks {
		req.Ranks = append(req.Ranks, int32(r))
	}
	if o.verbose && !o.asJSON {
		fmt.Fprintf(w, "Asking gompirun (pid %d) to migrate %s\n", o.pid, o.describe())
	}
	// No deadline of our own: saving and restarting big ranks takes what
	// it takes, and the user's interrupt ends the wait.
	resp, err := pb.NewToolClient(conn).Migrate(ctx, req, grpc.WaitForReady(true))
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted while waiting for gompirun (pid %d) to migrate; the migration goes on: gompi-ps --ranks %d shows where the ranks run", o.pid, o.pid)
		}
		return fmt.Errorf("ask gompirun (pid %d) to migrate: %s", o.pid, status.Convert(err).Message())
	}
	out := outcomeOf(o.pid, resp)
	failed := !out.Migrated || out.Error != ""
	if failed && out.Error == "" {
		out.Error = "no rank was migrated; the job runs on as it was"
	}
	if o.asJSON {
		if err := writeJSON(w, out); err != nil {
			return err
		}
	} else if !failed {
		out.print(w, o.verbose)
	}
	if failed {
		msg := out.Error
		for _, a := range out.Actions {
			msg += "\n  " + a
		}
		return errors.New(msg)
	}
	return nil
}

// describe says what the request asks, for --verbose.
func (o *options) describe() string {
	var what []string
	if len(o.ranks) > 0 {
		what = append(what, rankWords(o.ranks))
	}
	if len(o.off) > 0 {
		what = append(what, "every rank of "+strings.Join(o.off, ", "))
	}
	s := strings.Join(what, " and ")
	if len(o.onto) > 0 {
		s += " onto " + strings.Join(o.onto, ", ")
	}
	if o.within > 0 {
		s += fmt.Sprintf(" (fault expected within %v)", o.within)
	}
	return s
}

func rankWords(ranks []int) string {
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = strconv.Itoa(r)
	}
	if len(ranks) == 1 {
		return "rank " + s[0]
	}
	return "ranks " + strings.Join(s, ", ")
}

// Outcome is a migration as --json prints it.
type Outcome struct {
	PID      int    `json:"pid"`
	Migrated bool   `json:"migrated"`
	Moves    []Move `json:"moves"`
	Seq      int    `json:"seq"`
	// Duration is from the request to every moved rank running again;
	// Checkpoint and Restart are its two parts.
	Duration   time.Duration `json:"duration_ns"`
	Checkpoint time.Duration `json:"checkpoint_ns"`
	Restart    time.Duration `json:"restart_ns"`
	// Actions are what the job's ErrMgr stack did, "component: action".
	Actions []string `json:"actions"`
	Error   string   `json:"error,omitempty"`
}

// Move is one rank's move.
type Move struct {
	Rank int    `json:"rank"`
	From string `json:"from"`
	To   string `json:"to"`
}

func outcomeOf(pid int, r *pb.MigrateResponse) Outcome {
	out := Outcome{PID: pid, Migrated: r.GetMigrated(), Moves: []Move{}, Seq: int(r.GetSeq()),
		Duration: time.Duration(r.GetDurationNano()), Checkpoint: time.Duration(r.GetCheckpointNano()),
		Restart: time.Duration(r.GetRestartNano()), Actions: append([]string{}, r.GetActions()...), Error: r.GetError()}
	for _, m := range r.GetMoves() {
		out.Moves = append(out.Moves, Move{Rank: int(m.GetRank()), From: m.GetFrom(), To: m.GetTo()})
	}
	slices.SortFunc(out.Moves, func(a, b Move) int { return a.Rank - b.Rank })
	return out
}

// print writes a migration done: a line per move, then the summary, then
// with verbose the stack's actions.
func (out Outcome) print(w io.Writer, verbose bool) {
	for _, m := range out.Moves {
		fmt.Fprintf(w, "Rank %d: %s -> %s\n", m.Rank, m.From, m.To)
	}
	noun := "ranks"
	if len(out.Moves) == 1 {
		noun = "rank"
	}
	fmt.Fprintf(w, "Migrated %d %s in %.2f s (checkpoint %.2f s, restart %.2f s); migration sequence %d\n",
		len(out.Moves), noun, out.Duration.Seconds(), out.Checkpoint.Seconds(), out.Restart.Seconds(), out.Seq)
	if verbose {
		for _, a := range out.Actions {
			fmt.Fprintf(w, "  %s\n", a)
		}
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ParseRanks reads a comma-separated list of ranks ("2,5"): numbers from
// 0, at most the largest rank the control plane carries. It returns them
// ascending, each once.
func ParseRanks(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("no ranks given: write ranks as 2,5")
	}
	var out []int
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		digits := strings.TrimPrefix(item, "-")
		switch {
		case item == "":
			return nil, fmt.Errorf("empty rank in %q: write ranks as 2,5", s)
		case !allDigits(digits):
			return nil, fmt.Errorf("%q is not a rank: ranks are numbers from 0, written as 2,5", item)
		case digits != item:
			return nil, fmt.Errorf("rank %s is negative: ranks count from 0", item)
		}
		r, err := strconv.ParseInt(item, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("rank %s is too large: no job has that many ranks", item)
		}
		if !slices.Contains(out, int(r)) {
			out = append(out, int(r))
		}
	}
	slices.Sort(out)
	return out, nil
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ParseNodes reads a comma-separated list of node names ("n1,n2"), as
// the job's hostfile names them. It keeps their order (--onto is an order
// of preference), each once.
func ParseNodes(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("no nodes given: write node names as n1,n2")
	}
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("empty node name in %q: write node names as n1,n2", s)
		}
		if i := strings.IndexFunc(item, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
			return nil, fmt.Errorf("node name %q holds a space or control character: write node names as n1,n2", item)
		}
		if !slices.Contains(out, item) {
			out = append(out, item)
		}
	}
	return out, nil
}

// nodesValue is --off and --onto: each use adds its names.
type nodesValue []string

func (v *nodesValue) Set(s string) error {
	names, err := ParseNodes(s)
	if err != nil {
		return err
	}
	for _, n := range names {
		if !slices.Contains(*v, n) {
			*v = append(*v, n)
		}
	}
	return nil
}
func (v *nodesValue) String() string { return strings.Join(*v, ",") }
func (v *nodesValue) Type() string   { return "nodes" }

// ranksValue is --ranks: each use adds its ranks.
type ranksValue []int

func (v *ranksValue) Set(s string) error {
	ranks, err := ParseRanks(s)
	if err != nil {
		return err
	}
	for _, r := range ranks {
		if !slices.Contains(*v, r) {
			*v = append(*v, r)
		}
	}
	slices.Sort(*v)
	return nil
}
func (v *ranksValue) String() string {
	s := make([]string, len(*v))
	for i, r := range *v {
		s[i] = strconv.Itoa(r)
	}
	return strings.Join(s, ",")
}
func (v *ranksValue) Type() string { return "ranks" }

// Main runs gompi-migrate with the process's arguments.
func Main() int { return cli.Main(NewCommand(), false) }
