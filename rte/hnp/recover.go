package hnp

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"gompi/frameworks/errmgr"
	"gompi/frameworks/sstore/snapshot"
	pb "gompi/rte/control/proto"
	"gompi/rte/mapping"
)

// Recovery (errmgr autor): the job ends every rank, its daemons leave, and
// Run starts the job again in the same gompirun from the last committed
// sequence of its reference, on the nodes still up, lost ranks moved
// (replan). Output keeps going to the same streams, and each recovery is
// reported there.

// recovery is a recovery the job accepted and is ending its ranks for.
type recovery struct {
	plan   errmgr.Recovery
	seq    int
	ref    snapshot.Ref
	start  time.Time
	n      int         // 1 for the job's first recovery
	before mapping.Map // where the ranks ran
}

type evRecover struct {
	plan  errmgr.Recovery
	seq   int
	ref   snapshot.Ref
	reply chan error
}

// Recover implements errmgr.Recoverer: it finds the newest committed
// sequence of the job's reference and has the job end its ranks for the
// restart.
func (rt jobRuntime) Recover(ctx context.Context, r errmgr.Recovery) (int, error) {
	j := rt.j
	if j.p.global == nil {
		return 0, fmt.Errorf("hnp: recover: the job does not coordinate checkpoints (run it with -am ft-enable-cr): %w", errmgr.ErrNoCheckpoint)
	}
	ref := j.p.global.Ref()
	meta, err := j.readMeta(ctx)
	if err != nil {
		return 0, fmt.Errorf("hnp: recover: %w: %w", errmgr.ErrNoCheckpoint, err)
	}
	point, err := snapshot.ChooseSeq(ref, meta, -1)
	if err != nil {
		return 0, fmt.Errorf("hnp: recover: %w: %w", errmgr.ErrNoCheckpoint, err)
	}
	reply := make(chan error, 1)
	select {
	case j.events <- evRecover{plan: r, seq: point.Seq.Seq, ref: ref, reply: reply}:
	case <-j.done:
		return 0, fmt.Errorf("hnp: recover: %w", errmgr.ErrJobOver)
	case <-ctx.Done():
		return 0, fmt.Errorf("hnp: recover: %w", ctx.Err())
	}
	if err := <-reply; err != nil {
		return 0, err
	}
	return point.Seq.Seq, nil
}

// readMeta reads the global metadata of the job's reference (C/R on).
func (j *job) readMeta(ctx context.Context) (*snapshot.GlobalMeta, error) {
	ms := j.o.Meta
	if ms == nil {
		ms = snapshot.ThisNode
	}
	return ms.ReadGlobal(ctx, j.p.global.Ref())
}

// startRecovery ends every rank for a recovery. A second fault while the
// job is recovering (a node lost as its ranks end) joins the recovery
// under way.
func (j *job) startRecovery(e evRecover) error {
	if j.recovery != nil {
		j.recovery.plan.Lost = union(j.recovery.plan.Lost, e.plan.Lost)
		j.recovery.plan.LostNodes = union(j.recovery.plan.LostNodes, e.plan.LostNodes)
		return nil
	}
	if j.state != jobRunning {
		return fmt.Errorf("hnp: recover: %w", errmgr.ErrJobOver)
	}
	if rb := j.rollback; rb != nil {
		j.elog.Info("rollback abandoned: the job restarts whole", "epoch", rb.epoch)
		j.rollback = nil
	}
	j.recovery = &recovery{plan: e.plan, seq: e.seq, ref: e.ref, start: j.p.now(), n: j.recoveries + 1, before: j.m}
	j.closeSnapC("the job is recovering from a failure")
	j.sendAll(&pb.HNPMessage{Body: &pb.HNPMessage_Kill{Kill: &pb.KillRanks{Now: true}}})
	return nil
}

// replan places the ranks of a recovered job: every rank stays on its
// node unless it was lost; a lost rank goes to the node still up with the
// fewest ranks, never its own unless plan.SameNode allows it (or no other
// node is left). Nodes whose daemon was lost are dropped.
func replan(m mapping.Map, plan errmgr.Recovery) (mapping.Map, error) {
	gone := map[string]bool{}
	for _, n := range plan.LostNodes {
		gone[n] = true
	}
	var nodes []string
	for _, n := range m.Nodes {
		if !gone[n] {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return mapping.Map{}, fmt.Errorf("hnp: recover: every node of the job was lost (%v)", plan.LostNodes)
	}
	out := mapping.Map{Nodes: nodes, RankNode: slices.Clone(m.RankNode)}
	load := map[string]int{}
	lost := map[int]bool{}
	for _, r := range plan.Lost {
		lost[r] = true
	}
	for r, n := range m.RankNode {
		if gone[n] {
			lost[r] = true
		}
		if !lost[r] {
			load[n]++
		}
	}
	for r := range m.RankNode {
		if !lost[r] {
			continue
		}
		old := m.RankNode[r]
		best := ""
		for _, n := range nodes {
			if n == old && !plan.SameNode && len(nodes) > 1 {
				continue
			}
			if best == "" || load[n] < load[best] {
				best = n
			}
		}
		out.RankNode[r] = best
		load[best]++
	}
	return out, nil
}

// moves describes where replan put the ranks that changed node.
func moves(before, after mapping.Map) []string {
	var out []string
	for r := range before.RankNode {
		if before.RankNode[r] != after.RankNode[r] {
			out = append(out, fmt.Sprintf("rank %d %s -> %s", r, before.RankNode[r], after.RankNode[r]))
		}
	}
	return out
}

// union is the sorted set of the elements of a and b.
func union[T cmp.Ordered](a, b []T) []T {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

var _ errmgr.Recoverer = jobRuntime{}

// resumed reports a recovery done once every rank of the new run has
// connected: each was started from its local snapshot (fetched from its
// node's cache or global storage) and is initializing from it.
func (j *job) resumed() {
	rec := j.recoveredFrom
	if rec == nil {
		return
	}
	for _, r := range j.ranks {
		if r.state != rankConnected {
			return
		}
	}
	j.recoveredFrom = nil
	fmt.Fprintf(j.p.stderr, "gompirun: recovery %d: every rank runs again, %.2f s after the failure was handled\n", rec.n, j.p.now().Sub(rec.start).Seconds())
}

// onFault joins a fault that happened while the job ends its ranks for a
// recovery to that recovery: its ranks (a lost node's too) are placed
// anew, and no policy runs again for it (autor would count it as another
// recovery, and a recovery already under way would restart the job
// whatever a policy decided).
func (rec *recovery) onFault(j *job, f errmgr.Fault) verdict {
	var lost []int
	if f.Rank >= 0 {
		lost = append(lost, f.Rank)
	}
	if f.Kind == errmgr.NodeLost {
		rec.plan.LostNodes = union(rec.plan.LostNodes, []string{f.Node})
		if d := j.daemons[f.Node]; d != nil {
			lost = append(lost, d.ranks...)
		}
	}
	rec.plan.Lost = union(rec.plan.Lost, lost)
	j.elog.Info("fault joins the recovery under way", "fault", f.Describe(), "recovery", rec.n)
	fmt.Fprintf(j.p.stderr, "gompirun: %s; it joins recovery %d under way\n", f.Describe(), rec.n)
	return absorbed
}

// onNodeLost: a node lost during a recovery is a fault (which joins it),
// even one that ran no ranks or once the ranks have ended: the restart
// must not go there.
func (rec *recovery) onNodeLost(*job, *dconn) verdict { return isFault }

// onAbort: an abort ends the job, recovery or not.
func (rec *recovery) onAbort(j *job) { j.recovery = nil }

func (rec *recovery) onExit(*job, *rankProc, string, *pb.RankExited) verdict { return goOn }
func (rec *recovery) holds() bool                                            { return false }

var _ episode = (*recovery)(nil)
