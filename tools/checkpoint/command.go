// Package checkpoint is gompi-checkpoint (also `gompi checkpoint`): it asks
// the gompirun of a running job, found by its PID, for a checkpoint of the
// whole job and prints the snapshot reference it was committed under, as
// Open MPI's ompi-checkpoint does; --status shows each phase with its
// time, --list the job's committed sequences.
package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"gompi/boot"
	"gompi/cli"
	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
	"gompi/rte/jobs"
)

// options are gompi-checkpoint's flags.
type options struct {
	term, stop      bool
	status, verbose bool
	list, asJSON    bool
	job             jobs.Selector

	// remove is the sequence --remove names (-1: none); prune is --prune,
	// keep --keep (-1: sstore_base_keep), dryRun --dry-run.
	remove, keep           int
	prune, dryRun          bool
	removeGiven, keepGiven bool
	// ref is the reference a removal acts on directly ("": the job's,
	// through its gompirun).
	ref string

	pid int
}

// NewCommand returns the gompi-checkpoint command.
func NewCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "gompi-checkpoint [options] PID_OF_GOMPIRUN | --remove SEQ|--prune REFERENCE",
		Short: "Checkpoint a running gompi job",
		Long: `gompi-checkpoint asks the gompirun with the given PID (gompi-ps lists them) for
a checkpoint of its whole job and prints the snapshot reference and sequence
number it was committed under:

  Snapshot Ref.:   0 gompi_global_snapshot_<job>.ckpt

gompi-restart restarts the job from that reference. The job must run with
checkpoint/restart on (gompirun -am ft-enable-cr). A checkpoint goes on when
gompi-checkpoint is interrupted: gompirun finishes it, or fails it, by itself.

--remove SEQ removes one sequence, --prune the restart points beyond the
newest --keep N (default: sstore_base_keep; 0 keeps them all) and the
leftovers of checkpoints that failed; neither removes the only restart point.
Given a running job's PID, its gompirun removes them between checkpoints;
given the reference of a job that ended (a folder on this node, yours alone),
gompi-checkpoint removes them itself. --dry-run says what would go.`,
		Example: `  gompi-checkpoint 12345
  gompi-checkpoint --status 12345
  gompi-checkpoint --term 12345
  gompi-checkpoint --list 12345
  gompi-checkpoint --prune --keep 2 --dry-run gompi_global_snapshot_1a2b3c4d.ckpt
  gompi-checkpoint --remove 3 12345`,
		Args:    cobra.MaximumNArgs(1),
		Version: cli.Version(),
	}
	f := cmd.Flags()
	f.BoolVar(&o.term, "term", false, "terminate the job once the checkpoint is committed (checkpoint-and-terminate)")
	f.BoolVar(&o.stop, "stop", false, "stop the ranks (SIGSTOP) once saved; only a system-level CRS can, crs=self refuses")
	f.BoolVarP(&o.status, "status", "s", false, "print each phase of the checkpoint as it ends, with its time")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "print more (implies --status)")
	f.BoolVarP(&o.list, "list", "l", false, "list the job's committed snapshot sequences instead of checkpointing")
	f.BoolVar(&o.asJSON, "json", false, "print the outcome as JSON")
	f.IntVar(&o.remove, "remove", 0, "remove sequence `SEQ` of the job's reference instead of checkpointing")
	f.BoolVar(&o.prune, "prune", false, "remove the restart points beyond the newest --keep and failed checkpoints' leftovers")
	f.IntVar(&o.keep, "keep", 0, "with --prune: keep the newest `N` restart points (default sstore_base_keep)")
	f.BoolVar(&o.dryRun, "dry-run", false, "with --remove or --prune: print what would be removed, remove nothing")
	o.job.AddFlags(f)
	cmd.RunE = func(c *cobra.Command, args []string) error {
		o.removeGiven, o.keepGiven = f.Changed("remove"), f.Changed("keep")
		if err := o.complete(args); err != nil {
			return err
		}
		return o.run(c.Context(), c.OutOrStdout())
	}
	return cmd
}

// complete checks the flags and finds the job's gompirun.
func (o *options) complete(args []string) error {
	switch {
	case o.term && o.stop:
		return cli.Usagef("--term and --stop both given: a job cannot both end and stop")
	case o.list && (o.term || o.stop):
		return cli.Usagef("--list takes no checkpoint: drop --term and --stop")
	}
	if o.verbose {
		o.status = true
	}
	if err := o.completeRemoval(args); err != nil || o.ref != "" {
		return err
	}
	pid, err := o.job.PID(args)
	o.pid = pid
	return err
}

func (o *options) run(ctx context.Context, w io.Writer) error {
	if o.ref != "" {
		return o.runRemoveRef(ctx, w)
	}
	if err := jobs.FindHNP(o.pid); err != nil {
		return err
	}
	conn, err := jobs.Dial(o.pid)
	if err != nil {
		return err
	}
	defer conn.Close()
	client := pb.NewToolClient(conn)
	if o.removing() {
		return o.runRemoveJob(ctx, client, w)
	}
	if o.list {
		return o.runList(ctx, client, w)
	}
	stream, err := client.Checkpoint(ctx, &pb.CheckpointRequest{Options: control.OptionsToProto(crs.Options{Term: o.term, Stop: o.stop})}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("ask gompirun (pid %d) for a checkpoint: %w", o.pid, err)
	}
	out := Outcome{PID: o.pid}
	var st statusPrinter
	for {
		m, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("lost contact with gompirun (pid %d) during the checkpoint: %s; the sequence is committed only if gompi-restart -i lists it",
				o.pid, status.Convert(err).Message())
		}
		if m.GetDone() {
			res, err := control.ResultFromProto(m)
			if err != nil {
				out.Error = err.Error()
				if o.asJSON {
					writeJSON(w, out)
				}
				return errors.New(out.Error)
			}
			out.Ref, out.Dir, out.Seq, out.Duration = res.Ref, res.Dir, res.Seq, res.Duration
			break
		}
		e := control.EventFromProto(m)
		out.Events = append(out.Events, e)
		if o.status && !o.asJSON {
			st.print(w, e)
		}
	}
	if o.asJSON {
		return writeJSON(w, out)
	}
	fmt.Fprintf(w, "Snapshot Ref.: %3d %s\n", out.Seq, out.Ref)
	if o.verbose {
		fmt.Fprintf(w, "Snapshot Location: %s\n", snapshot.Ref{Dir: out.Dir, Name: out.Ref})
		fmt.Fprintf(w, "Checkpoint Time: %.2f s\n", out.Duration.Seconds())
	}
	return nil
}

// Outcome is a checkpoint as --json prints it.
type Outcome struct {
	PID      int           `json:"pid"`
	Ref      string        `json:"ref,omitempty"`
	Dir      string        `json:"dir,omitempty"`
	Seq      int           `json:"seq"`
	Duration time.Duration `json:"duration_ns,omitempty"`
	Events   []snapc.Event `json:"events"`
	Error    string        `json:"error,omitempty"`
}

// statusPrinter prints Open MPI's status lines: the seconds since the
// previous phase ended and since the request began, the phase right-aligned
// in 25 columns, and what it did.
type statusPrinter struct {
	start, prev time.Time
}

func (s *statusPrinter) print(w io.Writer, e snapc.Event) {
	if s.start.IsZero() {
		s.start, s.prev = e.Time, e.Time
	}
	title := e.Phase.Title()
	if e.Node != "" {
		title += " (" + e.Node + ")"
	}
	detail := e.Detail
	if detail == "" {
		detail = "..."
	}
	fmt.Fprintf(w, "[%6.2f / %6.2f] %25s - %s\n", e.Time.Sub(s.prev).Seconds(), e.Time.Sub(s.start).Seconds(), title, detail)
	s.prev = e.Time
}

// Listing is the job's reference as --list --json prints it.
type Listing struct {
	PID       int    `json:"pid"`
	Ref       string `json:"ref"`
	Dir       string `json:"dir"`
	Committed []int  `json:"committed"`
	// Uncommitted are sequences that were begun and never committed.
	Uncommitted []int `json:"uncommitted,omitempty"`
}

func (o *options) runList(ctx context.Context, client pb.ToolClient, w io.Writer) error {
	resp, err := client.Snapshots(ctx, &pb.SnapshotsRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("gompirun (pid %d): %s", o.pid, status.Convert(err).Message())
	}
	ref := snapshot.Ref{Dir: resp.Dir, Name: resp.Ref}
	l := Listing{PID: o.pid, Ref: ref.Name, Dir: ref.Dir, Committed: []int{}}
	ms := snapshot.ThisNode
	if ref.IsRemote() {
		// A remote reference is read through FileM, chosen by the same
		// parameters (files, environment) as the job's.
		p, err := boot.Load(ctx, boot.Options{Role: mca.RoleTool, LogOutput: io.Discard, NoPlugins: true})
		if err != nil {
			return err
		}
		defer p.Close()
		remote, closeMeta, err := p.MetaStore(ctx, ref)
		if err != nil {
			return err
		}
		defer closeMeta()
		ms = remote
	}
	meta, err := ms.ReadGlobal(ctx, ref)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		l.Committed = append(l.Committed, meta.Committed()...)
		for _, s := range meta.Seqs {
			if !s.Committed {
				l.Uncommitted = append(l.Uncommitted, s.Seq)
			}
		}
	}
	if o.asJSON {
		return writeJSON(w, l)
	}
	renderListing(w, l, ref, meta, o.verbose)
	return nil
}

// renderListing prints --list for people; meta is nil when the job has no
// sequence yet.
func renderListing(w io.Writer, l Listing, ref snapshot.Ref, meta *snapshot.GlobalMeta, verbose bool) {
	if len(l.Committed) == 0 {
		fmt.Fprintf(w, "Snapshot Ref.: %s\t[No Valid Checkpoints]\n", l.Ref)
	} else {
		seqs := make([]string, len(l.Committed))
		for i, s := range l.Committed {
			seqs[i] = strconv.Itoa(s)
		}
		fmt.Fprintf(w, "Snapshot Ref.: %s\t[%s]\n", l.Ref, strings.Join(seqs, ","))
	}
	if verbose {
		fmt.Fprintf(w, "Snapshot Location: %s\n", ref)
		if meta != nil {
			for _, s := range meta.Seqs {
				state := "committed " + s.Finished.UTC().Format("2006-01-02 15:04:05.000 UTC")
				if !s.Committed {
					state = "not committed (its checkpoint did not finish)"
				}
				if s.Migrate {
					// Only the moved ranks were saved: not a restart point.
					var moved []string
					for _, p := range s.Procs {
						moved = append(moved, strconv.Itoa(p.Rank))
					}
					if s.Committed {
						state = fmt.Sprintf("migration of ranks %s (not a restart point), %s", strings.Join(moved, ","), state)
					} else {
						state = "migration, not committed (it did not finish)"
					}
				}
				fmt.Fprintf(w, "\tSeq %d: begun %s, %s\n", s.Seq, s.Started.UTC().Format("2006-01-02 15:04:05.000 UTC"), state)
			}
		}
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Main runs gompi-checkpoint with the process's arguments.
func Main() int { return cli.Main(NewCommand(), false) }
