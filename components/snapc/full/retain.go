package full

import (
	"context"
	"fmt"
	"log/slog"

	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
)

// retain applies sstore_base_keep once a checkpoint of the whole job has
// committed: the coordinator runs one request at a time, so no other
// sequence is being written, and it alone rewrites the metadata while the
// job runs. A failure is reported and leaves the commit as it is: the
// sequences it meant to remove stay, which costs space, not correctness.
// A migration's commit does not retain: its sequence is in use until the
// moved ranks restart from it.
func (c *ckpt) retain() {
	keep := sstore.Keep(c.g.spec.Values)
	if keep <= 0 {
		return
	}
	if c.ref.IsRemote() {
		c.g.log.Warn("sstore_base_keep applies to a reference on gompirun's node; this one is remote and keeps every sequence", "ref", c.ref.String())
		return
	}
	gone, err := snapshot.Removal{Seq: -1, Keep: keep}.Plan(c.ref, c.meta, c.seq)
	var kept []snapshot.Kept
	if err == nil && len(gone) > 0 {
		kept, err = snapshot.RemoveSeqsKept(c.ref, c.meta, gone)
	}
	if err != nil {
		c.g.log.Warn("sequences beyond sstore_base_keep not removed", "ref", c.ref.String(), "keep", keep, "err", err)
		return
	}
	if len(gone) > 0 {
		c.meta = c.meta.Without(gone)
		c.g.log.Info("sequences beyond sstore_base_keep removed", "ref", c.ref.String(), "keep", keep, "removed", gone)
	}
	logKept(c.g.log, c.ref, kept)
}

// Remove removes sequences of the job's reference (gompi-checkpoint
// --remove, --prune) between two checkpoints: it waits for the one in
// progress to end, and holds the next until it is done. A prune's Keep
// below 0 is sstore_base_keep. The sequence of a migration whose ranks
// are held is in use and stays. It returns what went (with dryRun, what
// would go) and which of those keep their folders because sequences that
// stay store blocks in them.
func (g *global) Remove(ctx context.Context, r snapshot.Removal, dryRun bool) ([]int, []snapshot.Kept, error) {
	ref := g.spec.Ref
	if ref.IsRemote() {
		return nil, nil, fmt.Errorf("snapc/full: %s is on another host: removing from a remote reference is not supported", ref)
	}
	if r.Seq < 0 && r.Keep < 0 {
		r.Keep = sstore.Keep(g.spec.Values)
	}
	select {
	case g.storage <- struct{}{}:
		defer func() { <-g.storage }()
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	var busy []int
	g.mu.Lock()
	if g.held != nil {
		busy = append(busy, g.held.seq)
	}
	g.mu.Unlock()
	meta, err := g.metaStore().ReadGlobal(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	gone, err := r.Plan(ref, meta, busy...)
	if err != nil || len(gone) == 0 {
		return gone, nil, err
	}
	if dryRun {
		return gone, snapshot.KeptBlocks(ref, meta, gone), nil
	}
	kept, err := snapshot.RemoveSeqsKept(ref, meta, gone)
	if err != nil {
		return nil, nil, err
	}
	g.log.Info("sequences removed on request", "ref", ref.String(), "removed", gone)
	logKept(g.log, ref, kept)
	return gone, kept, nil
}

// logKept says which removed sequences' folders stay, and why.
func logKept(log *slog.Logger, ref snapshot.Ref, kept []snapshot.Kept) {
	for _, k := range kept {
		log.Info("removed sequence's folder kept: sequences that stay store blocks in it (differential checkpoints)", "ref", ref.String(), "seq", k.Seq, "by", k.By)
	}
}
