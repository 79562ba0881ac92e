package daemon

import (
	"context"
	"fmt"
	"slices"
	"syscall"

	"google.golang.org/protobuf/proto"

	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/rte"
	pb "gompi/rte/control/proto"
)

// The daemon's part in an in-job rollback (errmgr rollback): it hands
// each surviving rank of its node that rank's local snapshot of the
// sequence (from the node's cache, else global storage: sstore Fetch) in
// a snapc Rollback request, and starts the lost ranks placed on its node
// from the same sequence, their fence count set to the job's, so that
// their modex is the fence the survivors join as they restore. A survivor
// that cannot be told (no snapshot, no checkpoint coordinator) is killed:
// its end is a fault during the rollback, which the ErrMgr stack hands
// to a full restart.

// rollback carries out gompirun's Rollback on this node.
func (d *daemon) rollback(ctx context.Context, m *pb.Rollback) {
	d.mu.Lock()
	if d.launch == nil {
		d.mu.Unlock()
		d.log.Error("rollback before the job's launch; ignored")
		return
	}
	lost := map[int32]bool{}
	for _, r := range m.Lost {
		lost[r] = true
	}
	here := func(r int32) bool { return int(r) < len(m.RankNodes) && m.RankNodes[r] == d.node }
	nl := proto.Clone(d.launch).(*pb.Launch)
	var survivors, start []int32
	for _, r := range nl.Ranks {
		if !lost[r] {
			survivors = append(survivors, r)
		}
	}
	// Lost ranks placed elsewhere leave the node's launch record; those
	// placed here join it.
	nl.Ranks = slices.DeleteFunc(nl.Ranks, func(r int32) bool { return lost[r] && !here(r) })
	for _, r := range m.Lost {
		if here(r) {
			start = append(start, r)
			if !slices.Contains(nl.Ranks, r) {
				nl.Ranks = append(nl.Ranks, r)
			}
		}
	}
	slices.Sort(nl.Ranks)
	nl.RankNodes = m.RankNodes
	d.launch = nl
	ranks := toInts(nl.Ranks)
	d.mu.Unlock()
	if loc := d.localCoord(); loc != nil {
		loc.SetRanks(ranks)
	}
	d.log.Info("rollback", "epoch", m.Epoch, "seq", m.Seq, "survivors", survivors, "starting", start)
	ref := snapshot.Ref{Dir: m.RefDir, Name: m.RefName}
	// Each survivor's snapshot is fetched on a goroutine of its own, which
	// ends once the survivor was told (or killed): the survivors restore
	// in parallel. The ranks started anew fetch theirs as they start.
	for _, r := range survivors {
		go d.tellSurvivor(ctx, ref, m, int(r))
	}
	if len(start) == 0 {
		return
	}
	sl := proto.Clone(nl).(*pb.Launch)
	sl.Restart = &pb.RestartSpec{RefDir: m.RefDir, RefName: m.RefName, Seq: m.Seq}
	sl.DataSecret = m.DataSecret
	env := append(d.rankEnv(nl), fmt.Sprintf("%s=%d", rte.EnvRestartFence, m.FenceSeq), fmt.Sprintf("%s=%d", rte.EnvRestartEpoch, m.Epoch))
	for _, r := range start {
		d.startRank(ctx, sl, int(r), env)
	}
}

// tellSurvivor sends survivor r its Rollback request; a survivor that
// cannot be told is killed.
func (d *daemon) tellSurvivor(ctx context.Context, ref snapshot.Ref, m *pb.Rollback, r int) {
	err := d.askRollback(ctx, ref, m, r)
	if err == nil {
		return
	}
	d.log.Error("a surviving rank cannot roll back; killing it", "rank", r, "err", err)
	// No reason goes with its exit: the rank may have died already (a
	// second failure), which is what its exit then reports.
	d.mu.Lock()
	rk := d.ranks[r]
	pid := 0
	if rk != nil && rk.phase != rankExited {
		pid = rk.pid
	}
	d.mu.Unlock()
	if pid > 0 {
		if err := d.ports.signal(pid, syscall.SIGKILL); err != nil {
			d.log.Error("could not kill a rank that cannot roll back", "rank", r, "err", err)
		}
	}
}

func (d *daemon) askRollback(ctx context.Context, ref snapshot.Ref, m *pb.Rollback, r int) error {
	if d.cr.store == nil {
		return fmt.Errorf("the node has no snapshot storage")
	}
	dir, err := d.cr.store.Fetch(ctx, ref, int(m.Seq), r)
	if err != nil {
		return fmt.Errorf("fetch sequence %d: %w", m.Seq, err)
	}
	return (*appPort)(d).Send(r, snapc.AppRequest{ID: m.Epoch, Kind: snapc.Rollback, Target: m.Epoch, Seq: int(m.Seq), Dir: dir})
}
