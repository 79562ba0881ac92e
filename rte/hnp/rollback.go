package hnp

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gompi/frameworks/errmgr"
	pb "gompi/rte/control/proto"
	"gompi/rte/mapping"
)

// In-job rollback (errmgr rollback), gompirun's part. The ranks that
// survived a failure keep their processes: every daemon hands its
// survivors their local snapshot of the sequence to return to (a snapc
// Rollback request: the library interrupts every call at once, and package
// cr restores the rank when the program is back at cr.Run) and starts the
// lost ranks placed on its node from that sequence. The survivors and the
// ranks started anew meet in the job's next fence, whose completion ends
// the rollback: every rank computes again from there. No rank is declared
// failed (fences wait for the lost ranks' new processes) and the daemons
// stay. A failure during a rollback goes to the ErrMgr stack, where
// errmgr rollback passes it on (it does not join a rollback under way)
// and autor restarts the whole job, which abandons the rollback.

// rollbackEp is the rollback under way.
type rollbackEp struct {
	plan  errmgr.Rollback
	epoch uint64
	fence uint64 // the fence that ends it
	start time.Time
}

type (
	evRollback struct {
		plan  errmgr.Rollback
		reply chan error
	}
	evRollbackView struct{ reply chan errmgr.RollbackView }
)

// RollbackView implements errmgr.RollBacker. Node caches are not reported
// to gompirun: the view offers the committed sequences of global storage,
// and each daemon takes a survivor's copy from its node cache when it
// holds it (sstore Fetch).
func (rt jobRuntime) RollbackView(ctx context.Context) (errmgr.RollbackView, error) {
	j := rt.j
	reply := make(chan errmgr.RollbackView, 1)
	if !j.send(evRollbackView{reply: reply}) {
		return errmgr.RollbackView{}, fmt.Errorf("hnp: rollback: %w", errmgr.ErrJobOver)
	}
	v := <-reply
	if j.p.global == nil {
		return v, nil
	}
	meta, err := j.readMeta(ctx)
	if err != nil {
		return v, nil // nothing committed yet: the policy falls back
	}
	v.Global = meta.Committed()
	return v, nil
}

func (j *job) rollbackView() errmgr.RollbackView {
	return errmgr.RollbackView{CRS: j.mods.CRS, Nodes: j.nodes(), Rolling: j.rollback != nil || j.recovery != nil}
}

// RollBack implements errmgr.RollBacker.
func (rt jobRuntime) RollBack(ctx context.Context, r errmgr.Rollback) error {
	reply := make(chan error, 1)
	select {
	case rt.j.events <- evRollback{plan: r, reply: reply}:
	case <-rt.j.done:
		return fmt.Errorf("hnp: rollback: %w", errmgr.ErrJobOver)
	case <-ctx.Done():
		return fmt.Errorf("hnp: rollback: %w", ctx.Err())
	}
	return <-reply
}

// startRollback checks a rollback and sends it to the daemons.
func (j *job) startRollback(e evRollback) error {
	p := e.plan
	cannot := func(format string, a ...any) error {
		return fmt.Errorf("hnp: %w: "+format, append([]any{errmgr.ErrCannotRollBack}, a...)...)
	}
	switch {
	case j.state != jobRunning:
		return fmt.Errorf("hnp: rollback: %w", errmgr.ErrJobOver)
	case j.p.global == nil:
		return cannot("the job does not coordinate checkpoints")
	case j.recovery != nil || j.rollback != nil:
		return cannot("a recovery or rollback is under way")
	case j.migration != nil:
		return cannot("a migration is under way")
	case j.term != nil:
		return cannot("a checkpoint-and-terminate is under way")
	}
	rankNodes := slices.Clone(j.m.RankNode)
	for _, r := range p.Lost {
		n := p.Place[r]
		d := j.daemons[n]
		if r < 0 || r >= len(j.ranks) || d == nil || d.state != daemonRunning || d.box == nil {
			return cannot("rank %d cannot start on node %q", r, n)
		}
		rankNodes[r] = n
	}
	j.rollbacks++
	ep := &rollbackEp{plan: p, epoch: uint64(j.rollbacks), fence: j.fenceDone + 1, start: j.p.now()}
	for _, r := range p.Lost {
		rs := j.ranks[r]
		rs.node, rs.state, rs.pid, rs.done, rs.failed = rankNodes[r], rankRunning, 0, false, false
	}
	j.m = mapping.Map{Nodes: j.m.Nodes, RankNode: rankNodes}
	for _, d := range j.daemons {
		d.ranks = j.m.Ranks(d.node)
	}
	j.p.global.Place(rankNodes)
	j.rollback = ep
	lost := make([]int32, len(p.Lost))
	for i, r := range p.Lost {
		lost[i] = int32(r)
	}
	ref := j.p.global.Ref()
	j.elog.Info("rollback: survivors return in place", "epoch", ep.epoch, "seq", p.Seq, "lost", p.Lost, "fence", ep.fence)
	j.sendAll(&pb.HNPMessage{Body: &pb.HNPMessage_Rollback{Rollback: &pb.Rollback{
		Epoch: ep.epoch, Seq: int32(p.Seq), RefDir: ref.Dir, RefName: ref.Name, Lost: lost,
		RankNodes: rankNodes, FenceSeq: j.fenceDone, DataSecret: j.dataSecret.Bytes(),
	}}})
	return nil
}

// rolledBack ends the rollback once its fence completed: every rank,
// restored in place or started anew, computes again.
func (j *job) rolledBack(seq uint64) {
	ep := j.rollback
	if ep == nil || seq != ep.fence {
		return
	}
	j.rollback = nil
	fmt.Fprintf(j.p.stderr, "gompirun: rollback %d: every rank computes again from sequence %d, %.3f s after the failure was handled (%s started anew)\n",
		ep.epoch, ep.plan.Seq, j.p.now().Sub(ep.start).Seconds(), rankWords(ep.plan.Lost))
}

func rankWords(ranks []int) string {
	if len(ranks) == 1 {
		return fmt.Sprintf("rank %d", ranks[0])
	}
	return fmt.Sprintf("ranks %v", ranks)
}

// A fault during a rollback goes to the ErrMgr stack (rollback passes it
// on, autor restarts the job); an abort ends it with the job.
func (ep *rollbackEp) onFault(*job, errmgr.Fault) verdict                     { return goOn }
func (ep *rollbackEp) onExit(*job, *rankProc, string, *pb.RankExited) verdict { return goOn }
func (ep *rollbackEp) onNodeLost(*job, *dconn) verdict                        { return goOn }
func (ep *rollbackEp) onAbort(j *job)                                         { j.rollback = nil }
func (ep *rollbackEp) holds() bool                                            { return false }

var (
	_ episode           = (*rollbackEp)(nil)
	_ errmgr.RollBacker = jobRuntime{}
)
