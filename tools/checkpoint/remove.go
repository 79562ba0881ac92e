package checkpoint

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"gompi/boot"
	"gompi/cli"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
	pb "gompi/rte/control/proto"
)

// Removed is what --remove or --prune removed (or, with --dry-run, would
// remove), as --json prints it.
type Removed struct {
	PID     int    `json:"pid,omitempty"` // 0 when acting on a reference
	Ref     string `json:"ref"`
	Dir     string `json:"dir"`
	Removed []int  `json:"removed"`
	DryRun  bool   `json:"dry_run,omitempty"`
	// Kept are removed sequences whose folders stay because sequences
	// that stay store blocks in them (differential checkpoints).
	Kept []snapshot.Kept `json:"kept,omitempty"`
}

func (o *options) removing() bool { return o.remove >= 0 || o.prune }

// completeRemoval checks the removal flags and, when the argument is not a
// number, takes it as the reference to act on.
func (o *options) completeRemoval(args []string) error {
	switch {
	case o.removeGiven && o.remove < 0:
		return cli.Usagef("--remove %d is not a sequence number", o.remove)
	case o.keepGiven && o.keep < 0:
		return cli.Usagef("--keep %d: give 0 or more restart points to keep", o.keep)
	}
	if !o.removeGiven {
		o.remove = -1
	}
	if !o.keepGiven {
		o.keep = -1
	}
	switch {
	case o.keep >= 0 && !o.prune:
		return cli.Usagef("--keep goes with --prune")
	case o.dryRun && !o.removing():
		return cli.Usagef("--dry-run goes with --remove or --prune")
	case !o.removing():
		return nil
	case o.remove >= 0 && o.prune:
		return cli.Usagef("--remove and --prune both given: remove one sequence, or prune")
	case o.list || o.term || o.stop:
		return cli.Usagef("--remove and --prune take no checkpoint and list nothing: drop --list, --term and --stop")
	}
	if len(args) == 1 {
		if _, err := strconv.Atoi(args[0]); err != nil {
			o.ref = args[0]
		}
	}
	return nil
}

// runRemoveRef acts on the reference of a job that ended: only one on
// this node, its folder no link, it and its metadata this user's alone
// (snapshot.CheckSafe, as gompi-restart checks what it runs), its
// sequence folders removed without following any link.
func (o *options) runRemoveRef(ctx context.Context, w io.Writer) error {
	p, err := boot.Load(ctx, boot.Options{Role: mca.RoleTool, LogOutput: io.Discard, NoPlugins: true})
	if err != nil {
		return err
	}
	defer p.Close()
	def, _ := snapc.GlobalDir(p.Values)
	ref, err := snapshot.FindRef(o.ref, def)
	if err != nil {
		return err
	}
	if ref.IsRemote() {
		return fmt.Errorf("%s is on another host: removing from a remote reference is not supported; run gompi-checkpoint there", ref)
	}
	// The folder and the metadata rewritten must be this user's alone;
	// what goes is removed, never read, whoever could write it.
	if err := snapshot.RefIsFolder(ref); err != nil {
		return err
	}
	if _, err := snapshot.CheckSafe(ref, ref.MetaPath()); err != nil {
		return err
	}
	keep := o.keep
	if keep < 0 {
		keep = sstore.Keep(p.Values)
	}
	meta, err := snapshot.ReadGlobal(ref)
	if err != nil {
		return err
	}
	gone, err := snapshot.Removal{Seq: o.remove, Keep: keep}.Plan(ref, meta)
	if err != nil {
		return err
	}
	kept := snapshot.KeptBlocks(ref, meta, gone)
	if !o.dryRun && len(gone) > 0 {
		if kept, err = snapshot.RemoveSeqsKept(ref, meta, gone); err != nil {
			return err
		}
	}
	abs, _ := filepath.Abs(ref.Dir)
	return o.printRemoved(w, Removed{Ref: ref.Name, Dir: abs, Removed: gone, DryRun: o.dryRun, Kept: kept})
}

// runRemoveJob asks the job's gompirun, which removes between two
// checkpoints, so the removal never races the coordinator's own rewrites
// of the metadata.
func (o *options) runRemoveJob(ctx context.Context, client pb.ToolClient, w io.Writer) error {
	resp, err := client.Remove(ctx, &pb.RemoveRequest{Seq: int32(o.remove), Keep: int32(o.keep), DryRun: o.dryRun}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("gompirun (pid %d): %s", o.pid, status.Convert(err).Message())
	}
	r := Removed{PID: o.pid, Ref: resp.Ref, Dir: resp.Dir, DryRun: o.dryRun}
	for _, s := range resp.Removed {
		r.Removed = append(r.Removed, int(s))
	}
	for _, k := range resp.Kept {
		kept := snapshot.Kept{Seq: int(k.GetSeq())}
		for _, b := range k.GetBy() {
			kept.By = append(kept.By, int(b))
		}
		r.Kept = append(r.Kept, kept)
	}
	return o.printRemoved(w, r)
}

func (o *options) printRemoved(w io.Writer, r Removed) error {
	if r.Removed == nil {
		r.Removed = []int{}
	}
	if o.asJSON {
		return writeJSON(w, r)
	}
	ref := snapshot.Ref{Dir: r.Dir, Name: r.Ref}
	seqs := make([]string, len(r.Removed))
	for i, s := range r.Removed {
		seqs[i] = strconv.Itoa(s)
	}
	switch {
	case len(seqs) == 0:
		fmt.Fprintf(w, "Nothing to remove from %s\n", ref)
	case r.DryRun:
		fmt.Fprintf(w, "Would remove from %s: sequences %s\n", ref, strings.Join(seqs, ", "))
	default:
		fmt.Fprintf(w, "Removed from %s: sequences %s\n", ref, strings.Join(seqs, ", "))
	}
	for _, k := range r.Kept {
		fmt.Fprintf(w, "Kept %s\n", k)
	}
	return nil
}
