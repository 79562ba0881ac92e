package mpi

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
)

// AnySource receives in a replicated job (replica.go): which message an
// AnySource receive matches depends on arrival order, which differs
// between the copies of a rank. The primary decides and its replica
// follows (the notes' §5.2, leader/follower):
//
//   - Both copies number the AnySource receives they post, per context
//     (the program posts the same receives in the same order in both).
//   - When the primary's receive n matches a message of rank s, it sends
//     the decision (context, n, s) to its replica and completes the
//     receive only once the replica acknowledged it: a primary that dies
//     right after cannot take to its grave a decision its messages may
//     already reflect.
//   - The replica's receive n waits for the decision and then receives
//     from s, the first message of s that fits (per-source order makes
//     it the primary's message). Until then the receive holds its place
//     in the posted queue: a message it might take is not given to a
//     receive posted after it (takePostedGated), and once decided, the
//     receives behind it are matched again in order.
//   - A replica promoted to primary follows the decisions its dead
//     primary made (it had them all: the primary waited for the
//     acknowledgements) and decides for itself after them; the other
//     primaries, ahead of it, may have sent messages of later rounds
//     that the dead primary's decisions kept out of earlier receives. A
//     primary whose replica was lost completes what waited for the
//     acknowledgement.
//
// Probes with AnySource (Probe, Iprobe, Mprobe), Waitany, Testany and
// control flow that depends on Test are not followed: a program whose
// copies can diverge through them is caught by the state hashes compared
// at checkpoints.

// srcGated is the source of a replica's AnySource receive still waiting
// for its primary's decision.
const srcGated = -3

// anyState is a process's side of the decisions.
type anyState struct {
	mu      sync.Mutex
	decided map[anyKey]int          // replica: decisions not yet used, by receive
	pending map[anyKey]pendingMatch // primary: matches waiting for the replica's acknowledgement
}

type anyKey struct {
	ctx uint64
	n   uint64
}

type pendingMatch struct {
	r   *Request
	st  Status
	err error
}

func (a *anyState) init() {
	a.decided = map[anyKey]int{}
	a.pending = map[anyKey]pendingMatch{}
}

// anyPost numbers an AnySource receive about to be posted on cs and, at a
// replica whose primary lives, gives it the primary's decision or gates
// it; the caller holds p.mu. It reports whether the receive is gated (it
// must then be posted without looking at the unexpected queue).
func (r *replication) anyPost(cs *ctxState, q *Request) bool {
	if cs.ctx>>1 == ctxControl>>1 {
		return false
	}
	cs.anyPosted++
	q.anyN = cs.anyPosted
	a := &r.anyst
	a.mu.Lock()
	defer a.mu.Unlock()
	k := anyKey{cs.ctx, q.anyN}
	if src, ok := a.decided[k]; ok {
		// Decided by the primary, even if this process leads now: it
		// was promoted, and the dead primary's decisions stand.
		delete(a.decided, k)
		q.src = src
		return false
	}
	if r.leads() {
		return false
	}
	q.src = srcGated
	cs.gated++
	return true
}

// leads reports whether this process decides its AnySource matches: it
// is its rank's primary, or the rank's only copy.
func (r *replication) leads() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.prim[r.p.rank] == r.me
}

// partner returns the index of the rank's other live copy, -1 for none.
func (r *replication) partner() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.p.rank
	switch r.me {
	case r.prim[k]:
		return r.sec[k]
	case r.sec[k]:
		return r.prim[k]
	}
	return -1
}

// anyMatched completes a numbered AnySource receive that matched a
// message of world rank src: at a primary with a live replica once the
// replica acknowledged the decision, else at once.
func (r *replication) anyMatched(q *Request, src int, st Status, err error) {
	if !r.leads() {
		q.complete(st, err)
		return
	}
	part := r.partner()
	if part < 0 {
		q.complete(st, err)
		return
	}
	a := &r.anyst
	k := anyKey{q.cs.ctx, q.anyN}
	a.mu.Lock()
	a.pending[k] = pendingMatch{r: q, st: st, err: err}
	a.mu.Unlock()
	r.ctl(part, repAny, src, q.anyN, binary.LittleEndian.AppendUint64(nil, k.ctx))
	if r.partner() < 0 {
		// Lost meanwhile: its loss may have released the pending ones
		// before this one was added.
		r.anyst.release()
	}
}

// anyDecided takes the primary's decision (h.tag: the source's world
// rank, h.seq: the receive's number, payload: its context) at the
// replica, on the reader goroutine, and acknowledges it.
func (r *replication) anyDecided(pe *peer, h *header, data []byte) error {
	if len(data) != 8 {
		return fmt.Errorf("replication: AnySource decision of %d bytes", len(data))
	}
	p := r.p
	ctx, n, src := binary.LittleEndian.Uint64(data), h.seq, int(h.tag)
	if src < 0 || src >= p.size {
		return fmt.Errorf("replication: AnySource decision names rank %d of %d", src, p.size)
	}
	p.mu.Lock()
	cs := p.ctxStateLocked(ctx)
	var done []matched
	i := slices.IndexFunc(cs.posted, func(q *Request) bool { return q.src == srcGated && q.anyN == n })
	if i >= 0 {
		cs.posted[i].src = src
		cs.gated--
		done = p.rematchLocked(cs, i)
	} else {
		r.anyst.mu.Lock()
		r.anyst.decided[anyKey{ctx, n}] = src
		r.anyst.mu.Unlock()
	}
	p.mu.Unlock()
	finishMatched(done)
	r.ctl(pe.phys, repAnyAck, 0, n, data)
	return nil
}

// anyAcked completes the primary's receive n on the context in data whose
// decision the replica acknowledged.
func (r *replication) anyAcked(n uint64, data []byte) error {
	if len(data) != 8 {
		return fmt.Errorf("replication: AnySource acknowledgement of %d bytes", len(data))
	}
	a := &r.anyst
	k := anyKey{binary.LittleEndian.Uint64(data), n}
	a.mu.Lock()
	m, ok := a.pending[k]
	delete(a.pending, k)
	a.mu.Unlock()
	if ok {
		m.r.complete(m.st, m.err)
	}
	return nil
}

// matched is a receive that a message from the unexpected queue matched,
// to complete outside p.mu.
type matched struct {
	r *Request
	m *message
}

func finishMatched(done []matched) {
	for _, d := range done {
		fillRecv(d.r, d.m.src, d.m.tag, d.m.data)
		putMsg(d.m)
	}
}

// rematchLocked matches the posted receives of cs from index i on, in
// order, against its unexpected queue, up to the next gated one; the
// caller holds p.mu and completes what it returns once it let go.
func (p *Proc) rematchLocked(cs *ctxState, i int) []matched {
	var done []matched
	for i < len(cs.posted) {
		q := cs.posted[i]
		if q.src == srcGated {
			break
		}
		j := cs.findUnexpected(q.src, q.tag)
		if j < 0 {
			i++
			continue
		}
		m := cs.removeUnexpected(j)
		cs.posted = slices.Delete(cs.posted, i, i+1)
		done = append(done, matched{q, m})
	}
	return done
}

// takePostedGated is takePosted while a gated receive is posted on cs: a
// message the gated receive may be decided to take is no later receive's.
func (cs *ctxState) takePostedGated(src, tag int) *Request {
	plain := cs.plainTag(tag)
	for i, r := range cs.posted {
		if r.src == srcGated {
			if r.tag == AnyTag || r.tag == plain {
				return nil
			}
			continue
		}
		if matches(r.src, r.tag, src, plain) {
			cs.posted = slices.Delete(cs.posted, i, i+1)
			return r
		}
	}
	return nil
}

// promoted makes a replica that became its rank's primary decide for
// itself: its gated receives are AnySource receives again, matched in
// order against what arrived.
func (a *anyState) promoted(r *replication) {
	p := r.p
	p.mu.Lock()
	var done []matched
	for _, cs := range p.ctxs {
		if cs.gated == 0 {
			continue
		}
		first := -1
		a.mu.Lock()
		for i, q := range cs.posted {
			if q.src == srcGated {
				q.src = AnySource
				if src, ok := a.decided[anyKey{cs.ctx, q.anyN}]; ok {
					delete(a.decided, anyKey{cs.ctx, q.anyN})
					q.src = src
				}
				if first < 0 {
					first = i
				}
			}
		}
		a.mu.Unlock()
		cs.gated = 0
		done = append(done, p.rematchLocked(cs, first)...)
	}
	p.mu.Unlock()
	finishMatched(done)
}

// release completes every match waiting for an acknowledgement: the
// replica is gone.
func (a *anyState) release() {
	a.mu.Lock()
	pend := a.pending
	a.pending = map[anyKey]pendingMatch{}
	a.mu.Unlock()
	for _, m := range pend {
		m.r.complete(m.st, m.err)
	}
}
