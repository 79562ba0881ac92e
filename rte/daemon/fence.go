package daemon

import (
	"sort"

	"gompi/mca/queue"
	pb "gompi/rte/control/proto"
)

// The node's part in fences (the modex and barriers): it gathers its
// ranks' contributions, sends one for the node once every local rank not
// declared failed joined, and hands every rank gompirun's answer.

func (d *daemon) fenceComplete(fc *pb.FenceComplete) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.fenceLocked(fc.Seq)
	f.result, f.failed = fc.Entries, fc.Failed
	f.sent = true // complete without this node's contribution: its ranks all failed
	close(f.done)
}

// contributionLocked returns the node's contribution to f once every
// local rank not declared failed has joined it, and nil before (or once
// it was sent).
func (d *daemon) contributionLocked(seq uint64, f *fence) *pb.FenceContribution {
	if f.sent || d.launch == nil {
		return nil
	}
	for _, r := range d.launch.Ranks {
		if _, in := f.contrib[r]; !in && d.failed[r] == "" {
			return nil
		}
	}
	f.sent = true
	send := &pb.FenceContribution{Seq: seq}
	for r, m := range f.contrib {
		send.Entries = append(send.Entries, &pb.RankData{Rank: r, Data: m})
	}
	sort.Slice(send.Entries, func(i, j int) bool { return send.Entries[i].Rank < send.Entries[j].Rank })
	return send
}

// liveLocalLocked counts the node's ranks not declared failed.
func (d *daemon) liveLocalLocked() int {
	n := 0
	for _, r := range d.launch.Ranks {
		if d.failed[r] == "" {
			n++
		}
	}
	return n
}

// procFailed records ranks gompirun declared failed, tells the node's
// ranks, and sends the contributions of fences that waited only for
// failed ranks of this node.
func (d *daemon) procFailed(m *pb.ProcFailed) {
	why := m.Why
	if why == "" {
		why = "reported failed by gompirun"
	}
	d.mu.Lock()
	if d.failed == nil {
		d.failed = map[int32]string{}
	}
	var fresh []int32
	for _, r := range m.Ranks {
		if d.failed[r] == "" {
			d.failed[r] = why
			fresh = append(fresh, r)
		}
	}
	if len(fresh) > 0 {
		ev := &pb.RankEvent{Failed: fresh, Why: why}
		for s := range d.subs {
			s.Put(ev)
		}
	}
	var sends []*pb.FenceContribution
	for seq, f := range d.fences {
		if c := d.contributionLocked(seq, f); c != nil {
			sends = append(sends, c)
		}
	}
	d.mu.Unlock()
	d.log.Info("ranks declared failed; the job runs on", "ranks", fresh, "why", why)
	sort.Slice(sends, func(i, j int) bool { return sends[i].Seq < sends[j].Seq })
	for _, c := range sends {
		d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Fence{Fence: c}})
	}
}

// eventSub is one rank's Events stream: notices queue here (never
// blocking the daemon) until the stream's goroutine, its owner, sends them.
type eventSub = queue.Queue[*pb.RankEvent]

func (d *daemon) fenceLocked(seq uint64) *fence {
	f, ok := d.fences[seq]
	if !ok {
		f = &fence{contrib: map[int32]map[string]string{}, done: make(chan struct{})}
		d.fences[seq] = f
	}
	return f
}
