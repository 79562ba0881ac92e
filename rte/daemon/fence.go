package daemon

import (
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"

	"gompi/mca/queue"
	pb "gompi/rte/control/proto"
)

// The node's part in fences (the modex and barriers): it gathers its
// ranks' contributions and those of its children in the daemon tree
// (each child's covering its subtree), sends one for its subtree once
// every rank there not declared failed joined, and hands every rank
// gompirun's answer. gompirun so gets one contribution per link of its
// own, whatever the job's size.

func (d *daemon) fenceComplete(fc *pb.FenceComplete) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if fc.Seq <= d.fenceDone {
		return // sent again after a parent was lost
	}
	d.fenceDone = fc.Seq
	f := d.fenceLocked(fc.Seq)
	f.result, f.failed = fc.Entries, fc.Failed
	f.sent = true // complete without this node's contribution: its ranks all failed
	close(f.done)
	if d.launch == nil || d.liveLocalLocked() == 0 {
		delete(d.fences, fc.Seq) // no rank of this node reads it
	}
}

// childFence merges a child's contribution (its subtree's) into the
// node's, and sends the node's once complete; one that comes after the
// node's was sent (its subtree attached here after its parent was lost)
// goes up as it is.
func (d *daemon) childFence(c *pb.FenceContribution) {
	d.mu.Lock()
	if c.Seq <= d.fenceDone {
		d.mu.Unlock()
		return
	}
	f := d.fenceLocked(c.Seq)
	if f.sent {
		d.mu.Unlock()
		d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Fence{Fence: c}})
		return
	}
	for _, e := range c.Entries {
		data := e.Data
		if data == nil {
			data = map[string]string{}
		}
		f.contrib[e.Rank] = data
	}
	send := d.contributionLocked(c.Seq, f)
	d.mu.Unlock()
	if send != nil {
		d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Fence{Fence: send}})
	}
}

// readyContributionsLocked are the contributions of the fences that no
// longer wait for anything (after ranks failed or moved, or the launch
// that says which ranks are below), in order.
func (d *daemon) readyContributionsLocked() []*pb.FenceContribution {
	var sends []*pb.FenceContribution
	for seq, f := range d.fences {
		if c := d.contributionLocked(seq, f); c != nil {
			sends = append(sends, c)
		}
	}
	sort.Slice(sends, func(i, j int) bool { return sends[i].Seq < sends[j].Seq })
	return sends
}

// belowRanksLocked are the ranks that run below the node in the tree.
func (d *daemon) belowRanksLocked() []int32 {
	if d.tree == nil || d.launch == nil {
		return nil
	}
	below := d.tree.table.Below("")
	if len(below) == 0 {
		return nil
	}
	var out []int32
	for r, n := range d.launch.RankNodes {
		if _, ok := slices.BinarySearch(below, n); ok {
			out = append(out, int32(r))
		}
	}
	return out
}

// ownLaunch is the node's part of a launch sent to every daemon: the
// ranks rank_nodes places here.
func (d *daemon) ownLaunch(l *pb.Launch) *pb.Launch {
	if len(l.Ranks) > 0 {
		return l
	}
	own := proto.Clone(l).(*pb.Launch)
	for r, n := range l.RankNodes {
		if n == d.node {
			own.Ranks = append(own.Ranks, int32(r))
		}
	}
	return own
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
	for _, r := range d.belowRanksLocked() {
		if _, in := f.contrib[r]; !in && d.failed[r] == "" {
			return nil
		}
	}
	f.sent = true
	return contributionOf(seq, f)
}

// contributionOf is the contribution f holds, by rank.
func contributionOf(seq uint64, f *fence) *pb.FenceContribution {
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
	sends := d.readyContributionsLocked()
	d.mu.Unlock()
	d.log.Info("ranks declared failed; the job runs on", "ranks", fresh, "why", why)
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
