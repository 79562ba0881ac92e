package mpi

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Repairing a replicated job (replica.go) after processes were lost, on
// the library's own goroutine (repairState.loop), whatever the
// application does meanwhile, computing or blocked in a call:
//
//  1. A process learns of a loss (a connection that broke, a write that
//     failed, the runtime's report: replication.lost) and starts the next
//     repair, numbered by epoch; a process that gets a message of a repair
//     it has not started joins it.
//  2. The processes still running agree on the set of processes lost
//     (agreemachine.go, over all the job's processes, each contributing
//     what it knows), so every survivor applies the same set to the same
//     roles: a lost primary's replica becomes the primary, a lost replica
//     is dropped, and a rank with no copy left has failed.
//  3. Each survivor computes the routes again. Sends to a copy no longer
//     routed to stop; a copy newly routed to gets messages once it
//     subscribed; a process whose source for a rank changed subscribes to
//     the new one with the numbers it holds (replica.go, subscribed), and
//     the new source resends from its log what came after.
//  4. A rank with no copy left is failed as in a job without replication
//     (failPeer: ErrProcFailed, the failure events): the job's ErrMgr
//     decides what happens to the job.
//
// A loss learnt during a repair joins it (the agreement takes failures
// during it) or starts the next one. A process the others agreed was lost
// although it runs stops, as a process found failed by ULFM's agreement
// would.

// repairState is a process's side of the repairs.
type repairState struct {
	r *replication

	mu      sync.Mutex // guards what follows
	suspect bitset     // processes found lost, applied or not
	inbox   map[uint64][]agreeIn
	decided map[uint64][]byte // per repair decided here, the answer to late queries
	noticed uint64            // the latest repair another process said it started
	leaving bitset            // processes that finalized their rank (leave)
	changed wakeup            // woken when a loss is found, a repair applied or a process leaves
	kick    chan struct{}     // one token: something for the loop

	// applied is the last repair applied; guarded by replication.mu.
	applied uint64
	// took is how long the last repair took from its start to the
	// routes applied, for the figures.
	took time.Duration
}

func (rs *repairState) init(r *replication) {
	rs.r = r
	rs.suspect = newBitset(r.p.physN)
	rs.leaving = newBitset(r.p.physN)
	rs.inbox = map[uint64][]agreeIn{}
	rs.decided = map[uint64][]byte{}
	rs.kick = make(chan struct{}, 1)
	// Owned by the Proc: it ends when the Proc stops.
	go rs.loop()
}

func (rs *repairState) poke() {
	select {
	case rs.kick <- struct{}{}:
	default:
	}
}

// lost records that process i is gone: its connections close, what was
// queued to it is dropped, and a repair starts. A process that said
// goodbye is not lost.
func (r *replication) lost(i int, cause error) {
	if i == r.me || i < 0 || i >= len(r.links) {
		return
	}
	pe := r.links[i]
	if pe.gone.Load() != nil {
		return
	}
	e := &ProcFailedError{Rank: pe.rank, Cause: cause}
	if !pe.failErr.CompareAndSwap(nil, e) {
		return
	}
	p := r.p
	pe.mu.Lock()
	q := pe.queue
	pe.queue = nil
	out := pe.out
	pe.mu.Unlock()
	if out != nil {
		out.Close()
	}
	for _, op := range q {
		op.finish(e)
	}
	p.inMu.Lock()
	in := p.inFrom[i]
	p.inMu.Unlock()
	if in != nil {
		in.Close()
	}
	if !p.finalizing.Load() && !p.isStopped() {
		p.log.Debug("replication: a process was lost", "process", i, "rank", pe.rank, "err", cause)
	}
	rs := &r.repair
	rs.mu.Lock()
	rs.suspect.set(i)
	rs.mu.Unlock()
	rs.changed.wake()
	rs.poke()
}

// left takes process i's word that it finalized its rank.
func (rs *repairState) left(i int) {
	rs.mu.Lock()
	rs.leaving.set(i)
	rs.mu.Unlock()
	rs.changed.wake()
}

// leave is Finalize's wait in a replicated job, after the world's
// barrier: the barrier's messages come from one copy of each rank, so a
// copy may pass it while another lags, and the lagging copy may still
// need a repair, the others' logs and their agreement. So every process
// says it is leaving and waits until every other one said so or is lost;
// the repairs go on meanwhile. A process that never says it (hung, not
// yet lost) is waited for up to finalizeTimeout.
func (r *replication) leave() {
	p := r.p
	rs := &r.repair
	for i := range p.physN {
		r.ctl(i, repLeave, 0, 0, nil)
	}
	deadline := time.NewTimer(finalizeTimeout)
	defer deadline.Stop()
	for {
		w := rs.changed.watch()
		known := rs.known()
		rs.mu.Lock()
		done := true
		for i := range p.physN {
			if i != r.me && !known.has(i) && !rs.leaving.has(i) {
				done = false
				break
			}
		}
		rs.mu.Unlock()
		if done {
			return
		}
		select {
		case <-w:
		case <-deadline.C:
			p.log.Warn("finalize: processes of the job did not finalize in time; leaving without them", "timeout", finalizeTimeout)
			return
		case <-p.done:
			return
		}
	}
}

// deliver takes a repair's agreement message from process src (on its
// reader goroutine): queued for the repair, or answered at once when this
// process decided that repair already.
func (rs *repairState) deliver(src int, epoch uint64, data []byte) {
	rs.mu.Lock()
	if ans, ok := rs.decided[epoch]; ok {
		rs.mu.Unlock()
		if len(data) > 0 && data[0] == agreeQuery {
			rs.r.ctl(src, repAgree, 0, epoch, ans)
		}
		return
	}
	rs.inbox[epoch] = append(rs.inbox[epoch], agreeIn{src: src, data: data})
	rs.mu.Unlock()
	rs.poke()
}

// notice takes another process's notice that it started repair epoch.
func (rs *repairState) notice(epoch uint64) {
	rs.mu.Lock()
	rs.noticed = max(rs.noticed, epoch)
	rs.mu.Unlock()
	rs.poke()
}

// loop runs the repairs one after the other until the Proc stops.
func (rs *repairState) loop() {
	r := rs.r
	p := r.p
	for {
		select {
		case <-rs.kick:
		case <-p.done:
			return
		}
		for {
			epoch, ok := rs.due()
			if !ok {
				break
			}
			start := time.Now()
			failed, err := rs.agree(epoch)
			if err != nil {
				if !p.isStopped() {
					p.log.Warn("replication: repair given up", "epoch", epoch, "err", err)
				}
				return
			}
			r.apply(epoch, failed)
			rs.mu.Lock()
			rs.took = time.Since(start)
			rs.mu.Unlock()
		}
	}
}

// due returns the next repair to run: one is due when a process was found
// lost that no repair applied, or another process started it.
func (rs *repairState) due() (uint64, bool) {
	r := rs.r
	r.mu.Lock()
	next := rs.applied + 1
	dead := r.dead.clone()
	r.mu.Unlock()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.inbox[next]) > 0 || rs.noticed >= next {
		return next, true
	}
	for i := range r.p.physN {
		if rs.suspect.has(i) && !dead.has(i) {
			return next, true
		}
	}
	return 0, false
}

// known returns the processes this one knows are lost: applied or found.
func (rs *repairState) known() bitset {
	r := rs.r
	r.mu.Lock()
	set := r.dead.clone()
	r.mu.Unlock()
	rs.mu.Lock()
	for i := range set {
		set[i] |= rs.suspect[i]
	}
	rs.mu.Unlock()
	// A process that said goodbye takes no part any more: it is no
	// process the repairs wait for.
	for i, pe := range r.links {
		if i != r.me && pe.gone.Load() != nil {
			set.set(i)
		}
	}
	return set
}

// agree runs this process's part of repair epoch's agreement over every
// process of the job and returns the processes it decided were lost.
func (rs *repairState) agree(epoch uint64) (bitset, error) {
	r := rs.r
	p := r.p
	n := p.physN
	known := rs.known()
	m := newAgreeMachine(n, r.me, agreeVal{next: firstUserCtx, failed: known.clone()}, known.clone())
	// Every process takes part, including those that saw no loss: a
	// notice (a ping numbered by the repair) makes them start it. It also
	// opens a connection to a process this one never talked to, which
	// could otherwise die unseen: the failure of that connection is a loss
	// found.
	for q := range n {
		if q != r.me && !known.has(q) {
			r.ctl(q, repPing, 0, epoch, nil)
		}
	}
	m.start()
	probe := agreeProbeFirst
	timer := time.NewTimer(probe)
	defer timer.Stop()
	for {
		now := rs.known()
		for q := range n {
			if now.has(q) && !known.has(q) {
				known.set(q)
				m.onFailure(q)
			}
		}
		rs.mu.Lock()
		ins := rs.inbox[epoch]
		delete(rs.inbox, epoch)
		rs.mu.Unlock()
		for _, in := range ins {
			msg, err := decodeAgree(in.data, n, false)
			if err != nil {
				return nil, fmt.Errorf("repair %d: from process %d: %w", epoch, in.src, err)
			}
			m.onMsg(in.src, msg)
		}
		for _, o := range m.takeOut() {
			r.ctl(o.dst, repAgree, 0, epoch, encodeAgree(o.msg))
		}
		if m.decision != nil {
			break
		}
		if len(ins) > 0 {
			continue
		}
		select {
		case <-rs.kick:
			rs.poke() // the loop looks again once this repair is done
			select {
			case <-rs.kick:
			default:
			}
		case <-timer.C:
			for _, q := range m.waitingOn() {
				r.ctl(q, repPing, 0, epoch, nil)
			}
			probe = min(2*probe, agreeProbeMax)
			timer.Reset(probe)
		case <-p.done:
			return nil, p.stopErr()
		}
	}
	answer := encodeAgree(agreeMsg{kind: agreeDecided, hops: m.hops + 1, val: *m.decision})
	rs.mu.Lock()
	rs.decided[epoch] = answer
	delete(rs.decided, epoch-8) // a process 8 repairs behind is long gone
	late := rs.inbox[epoch]
	delete(rs.inbox, epoch)
	rs.mu.Unlock()
	for _, in := range late {
		if len(in.data) > 0 && in.data[0] == agreeQuery {
			r.ctl(in.src, repAgree, 0, epoch, answer)
		}
	}
	return m.decision.failed, nil
}

// apply makes repair epoch's decision, the processes lost, this process's
// roles and routes (see the file's comment).
func (r *replication) apply(epoch uint64, failed bitset) {
	p := r.p
	if failed.has(r.me) {
		p.log.Warn("replication: the other processes agreed this one was lost; stopping", "epoch", epoch)
		p.stop(&ProcFailedError{Rank: p.rank, Cause: errors.New("the other processes agreed this copy was lost")})
		p.shutdown()
		return
	}
	for i := range p.physN {
		if failed.has(i) {
			r.lost(i, errors.New("agreed lost by the repair of the job's copies"))
		}
	}
	r.mu.Lock()
	var gone []int // ranks with no copy left
	promoted := false
	for i := range p.physN {
		if failed.has(i) {
			r.dead.set(i)
		}
	}
	for k := range r.prim {
		if r.sec[k] >= 0 && r.dead.has(r.sec[k]) {
			r.sec[k] = -1
		}
		if r.dead.has(r.prim[k]) {
			if r.sec[k] < 0 {
				if r.from[k] != -1 || k == p.rank {
					gone = append(gone, k)
				}
				continue
			}
			r.prim[k], r.sec[k] = r.sec[k], -1
			promoted = promoted || r.prim[k] == r.me
		}
	}
	old := r.from
	from, targets := r.routesLocked()
	copies := make([][]int, len(r.prim))
	for k := range copies {
		copies[k] = r.copiesLocked(k)
	}
	r.from = from
	rs := &r.repair
	rs.applied = epoch
	r.mu.Unlock()
	rs.changed.wake()
	r.reroute(targets, copies)
	for k := range from {
		if k != p.rank && from[k] != old[k] && !r.dead.has(from[k]) {
			r.ctl(from[k], repSub, 0, epoch, r.held(k))
		}
	}
	if r.partner() < 0 {
		// Decisions waiting for a lost replica's acknowledgement.
		r.anyst.release()
	}
	if promoted {
		r.stats.promoted.Add(1)
		r.anyst.promoted(r)
		r.hand.promoted()
		p.log.Debug("replication: this process is its rank's primary now", "epoch", epoch)
	}
	r.stats.repairs.Add(1)
	p.log.Debug("replication: repaired", "epoch", epoch, "prim", r.prim, "sec", r.sec, "from", from, "targets", targets)
	for _, k := range gone {
		if k != p.rank {
			p.failPeer(k, fmt.Errorf("both copies of rank %d were lost", k))
		}
	}
}

// reroute makes the targets of every destination rank the routes', and
// trims the logs by the ranks' live copies.
func (r *replication) reroute(targets [][]int, copies [][]int) {
	p := r.p
	var freed int64
	for d := range r.out {
		if d == p.rank {
			continue
		}
		lp := p.peers[d]
		lp.mu.Lock()
		o := &r.out[d]
		want := slices.DeleteFunc(slices.Clone(targets[d]), r.dead.has)
		kept := o.targets[:0]
		for _, pe := range o.targets {
			if slices.Contains(want, pe.phys) {
				kept = append(kept, pe)
			}
		}
		clear(o.targets[len(kept):])
		o.targets = kept
		o.waiting = o.waiting[:0]
		for _, i := range want {
			if !slices.Contains(o.targets, r.links[i]) {
				o.waiting = append(o.waiting, i)
			}
		}
		o.copies = copies[d]
		freed += o.trim()
		lp.mu.Unlock()
	}
	r.freed(freed)
}

// RepairTime is how long this process's last repair took, from its start
// to the routes applied (zero without replication or before any).
func (p *Proc) RepairTime() time.Duration {
	if p.rep == nil {
		return 0
	}
	rs := &p.rep.repair
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.took
}
