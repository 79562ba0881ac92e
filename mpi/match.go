package mpi

import (
	"fmt"
	"runtime"
	"sync/atomic"
)

// ctxState is the matching state of one context id: the posted-receive
// queue and the unexpected-message queue, both in order, plus the
// per-peer sequence numbers of the messages that travel on it. A message
// matches the first posted receive (in posting order) whose source and tag
// fit; a receive matches the first unexpected message (in arrival order)
// that fits. Messages of one sender arrive in the order sent, which makes
// matching non-overtaking per sender and context.
type ctxState struct {
	ctx     uint64
	posted  []*Request
	unexp   []*message
	probes  []*probeWait
	sendSeq []uint64 // per world destination; guarded by that peer's mu
	recvSeq []uint64 // per world source; guarded by Proc.mu
	// coll marks a communicator's collective context: a failed member
	// fails every receive on it, since the collective cannot finish.
	coll bool
	// revoked: the communicator of this context was revoked (revoke.go).
	// Set under Proc.mu, never cleared; read without it.
	revoked atomic.Bool
	// revokeFrom is the world rank whose notice revoked it, -1 when this
	// process did; written before revoked is set.
	revokeFrom int
	// dedup: a message whose sequence number was received already is a
	// duplicate to drop, not an error (a replicated job, replica.go).
	dedup bool
	// anyPosted numbers the AnySource receives posted here and gated
	// counts those waiting for the primary's decision (a replicated job's
	// replica, replica_any.go); guarded by Proc.mu.
	anyPosted uint64
	gated     int
}

type probeWait struct {
	src, tag int
	ch       chan struct{}
}

func matches(wantSrc, wantTag, src, tag int) bool {
	return (wantSrc == AnySource || wantSrc == src) && (wantTag == AnyTag || wantTag == tag)
}

// plainTag is the tag a message on cs matches with: a synchronous send's
// mark (syncBit) is no part of it. The library's control context uses
// that bit for tags of its own (shrink.go), and never sends synchronously.
func (cs *ctxState) plainTag(tag int) int {
	if cs.ctx>>1 == ctxControl>>1 {
		return tag
	}
	return plainTag(tag)
}

// ctxStateLocked returns the state of ctx, creating it (a message may
// arrive before the local process created the communicator).
func (p *Proc) ctxStateLocked(ctx uint64) *ctxState {
	cs := p.ctxs[ctx]
	if cs == nil {
		cs = &ctxState{ctx: ctx, sendSeq: make([]uint64, p.size), recvSeq: make([]uint64, p.size), coll: ctx&1 == 1, dedup: p.rep != nil}
		p.ctxs[ctx] = cs
	}
	return cs
}

func (p *Proc) ctxState(ctx uint64) *ctxState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ctxStateLocked(ctx)
}

func (cs *ctxState) takePosted(src, tag int) *Request {
	if cs.gated != 0 {
		return cs.takePostedGated(src, tag)
	}
	for i, r := range cs.posted {
		if matches(r.src, r.tag, src, cs.plainTag(tag)) {
			copy(cs.posted[i:], cs.posted[i+1:])
			cs.posted[len(cs.posted)-1] = nil
			cs.posted = cs.posted[:len(cs.posted)-1]
			return r
		}
	}
	return nil
}

func (cs *ctxState) findUnexpected(src, tag int) int {
	for i, m := range cs.unexp {
		if matches(src, tag, m.src, cs.plainTag(m.tag)) {
			return i
		}
	}
	return -1
}

func (cs *ctxState) removeUnexpected(i int) *message {
	m := cs.unexp[i]
	copy(cs.unexp[i:], cs.unexp[i+1:])
	cs.unexp[len(cs.unexp)-1] = nil
	cs.unexp = cs.unexp[:len(cs.unexp)-1]
	return m
}

// checkSeq verifies that a message is the next one from src on this
// context: anything else means a lost or duplicated message, which the
// library cannot repair.
func (cs *ctxState) checkSeq(src int, seq uint64) error {
	if want := cs.recvSeq[src] + 1; seq != want {
		if cs.dedup && seq < want {
			return errDuplicate
		}
		return fmt.Errorf("message %d on context %d from rank %d arrived when %d was due (lost or duplicated message)", seq, cs.ctx, src, want)
	}
	cs.recvSeq[src] = seq
	return nil
}

// fill copies a message into a receive and completes it.
func fillRecv(r *Request, src, tag int, data []byte) {
	if tag != r.cs.plainTag(tag) {
		r.comm.matchedSync(src, tag)
		tag = plainTag(tag)
	}
	st := Status{Source: r.comm.commRank(src), Tag: tag, Count: len(data)}
	n := copy(r.buf, data)
	var err error
	if n < len(data) {
		err = fmt.Errorf("mpi: receive from rank %d tag %d: %w: %d-byte message into a %d-byte buffer", st.Source, tag, ErrTruncate, len(data), len(r.buf))
	}
	if r.anyN != 0 {
		// An AnySource receive of a replicated job (replica_any.go).
		r.p.rep.anyMatched(r, src, st, err)
		return
	}
	r.complete(st, err)
}

// deliver hands a message that is fully off the transport to the matching
// engine: the first fitting posted receive gets it, or it joins the
// unexpected queue. m is the library's copy when owned (it is recycled or
// queued), else data is only borrowed (a send to self) and copied. from is
// the connection's peer (the sender's process).
func (p *Proc) deliver(from *peer, h *header, data []byte, owned *message, seqChecked bool) error {
	src, tag := from.rank, int(h.tag)
	p.mu.Lock()
	cs := p.ctxStateLocked(h.ctx)
	if !seqChecked {
		if err := cs.checkSeq(src, h.seq); err != nil {
			p.mu.Unlock()
			if owned != nil {
				putMsg(owned)
			}
			return p.dropDuplicate(nil, from, h, len(data), err)
		}
	}
	p.received(from, h, len(data))
	if h.ctx>>1 == ctxControl>>1 && isAgreeTag(tag) {
		// Agreements take their messages from any member, and answer
		// after their call returned: their own queue (agree.go).
		p.mu.Unlock()
		p.agreeDeliver(src, tag, data)
		if owned != nil {
			putMsg(owned)
		}
		return nil
	}
	if cs.revoked.Load() {
		// ULFM drops what arrives on a revoked communicator; it was
		// counted above, as its sender counted it.
		p.mu.Unlock()
		if owned != nil {
			putMsg(owned)
		}
		return nil
	}
	if r := cs.takePosted(src, tag); r != nil {
		p.mu.Unlock()
		fillRecv(r, src, tag, data)
		if owned != nil {
			putMsg(owned)
			// On a reader goroutine: let the receiver run now, on this
			// processor, rather than wait for the reader to block.
			runtime.Gosched()
		}
		return nil
	}
	m := owned
	if m == nil {
		m = getMsg(len(data))
		copy(m.data, data)
	}
	m.src, m.tag, m.seq = src, tag, h.seq
	cs.unexp = append(cs.unexp, m)
	if len(cs.probes) > 0 {
		kept := cs.probes[:0]
		for _, w := range cs.probes {
			if matches(w.src, w.tag, src, cs.plainTag(tag)) {
				close(w.ch)
			} else {
				kept = append(kept, w)
			}
		}
		clear(cs.probes[len(kept):])
		cs.probes = kept
	}
	p.mu.Unlock()
	return nil
}

// postRecv matches r against the unexpected queue, or posts it. It
// reports whether r completed at once (its status and error are set, and
// it was not signalled).
func (p *Proc) postRecv(r *Request) bool {
	p.mu.Lock()
	cs := r.cs
	if p.rep != nil && r.src == AnySource && p.rep.anyPost(cs, r) {
		// Gated: it waits for its primary's decision, in its place.
		cs.posted = append(cs.posted, r)
		p.mu.Unlock()
		return false
	}
	if i := cs.findUnexpected(r.src, r.tag); i >= 0 {
		m := cs.removeUnexpected(i)
		p.mu.Unlock()
		tag := cs.plainTag(m.tag)
		if tag != m.tag {
			r.comm.matchedSync(m.src, m.tag)
		}
		st := Status{Source: r.comm.commRank(m.src), Tag: tag, Count: len(m.data)}
		n := copy(r.buf, m.data)
		r.status, r.err = st, nil
		if n < len(m.data) {
			r.err = fmt.Errorf("mpi: receive from rank %d tag %d: %w: %d-byte message into a %d-byte buffer", st.Source, st.Tag, ErrTruncate, len(m.data), len(r.buf))
		}
		src := m.src
		putMsg(m)
		if r.anyN != 0 {
			// Completed by the AnySource decision's path (replica_any.go).
			p.rep.anyMatched(r, src, r.status, r.err)
			return false
		}
		return true
	}
	if err := p.recvFailureLocked(cs, r.comm, r.src, r.pooled); err != nil {
		p.mu.Unlock()
		r.status, r.err = Status{}, err
		return true
	}
	cs.posted = append(cs.posted, r)
	p.mu.Unlock()
	return false
}

// recvFailureLocked returns the error a receive (or probe) gets because
// its communicator was revoked or a process it waits for failed: its
// source; on a collective context any member; for a blocking AnySource
// receive any member whose failure the application has not acknowledged
// (ULFM's rule; a non-blocking one stays posted, Wait reports it pending).
func (p *Proc) recvFailureLocked(cs *ctxState, c *Comm, src int, blocking bool) error {
	// Set before RollBack takes Proc.mu to fail what is posted: a receive
	// posted after that sees it here.
	if p.rb.active.Load() {
		return p.rolledBackErr()
	}
	if cs.revoked.Load() {
		return revokedErr(cs.ctx)
	}
	if src != AnySource {
		if err := p.peers[src].goneOrFailed(); err != nil {
			return err
		}
	}
	if p.nFailed.Load() == 0 || (src != AnySource && !cs.coll) {
		return nil
	}
	if !cs.coll {
		if !blocking {
			return nil
		}
		return c.unackedFailure()
	}
	for _, pe := range p.peers {
		if err := pe.failure(); err != nil && c.hasWorld(pe.rank) {
			return err
		}
	}
	return nil
}

// cancelRecv removes a posted receive; false means a message already
// matched it and it will complete.
func (p *Proc) cancelRecv(r *Request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, q := range r.cs.posted {
		if q == r {
			copy(r.cs.posted[i:], r.cs.posted[i+1:])
			r.cs.posted[len(r.cs.posted)-1] = nil
			r.cs.posted = r.cs.posted[:len(r.cs.posted)-1]
			return true
		}
	}
	return false
}

// failPostedLocked fails every posted receive that waits on the failed
// world rank.
func (p *Proc) failPostedLocked(rank int, err error) []*Request {
	var out []*Request
	for _, cs := range p.ctxs {
		kept := cs.posted[:0]
		for _, r := range cs.posted {
			// A non-blocking AnySource receive stays posted (ULFM): its
			// Wait reports the failure pending until acknowledged.
			anySrc := r.src == AnySource && (cs.coll || r.pooled)
			hit := r.src == rank || ((anySrc || cs.coll) && r.comm.hasWorld(rank))
			if hit {
				out = append(out, r)
			} else {
				kept = append(kept, r)
			}
		}
		clear(cs.posted[len(kept):])
		cs.posted = kept
		if len(cs.probes) > 0 {
			for _, w := range cs.probes {
				close(w.ch) // probers look again and see the failure
			}
			cs.probes = nil
		}
	}
	return out
}
