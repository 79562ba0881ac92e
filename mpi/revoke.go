package mpi

import (
	"fmt"
)

// Revoking a communicator (ULFM's MPIX_Comm_revoke).
//
// Locally, a revocation marks both of the communicator's contexts
// (point-to-point and collective) revoked, fails every receive posted on
// them and wakes their probes (an error wrapping ErrRevoked), and drops
// their unexpected messages. From then on every receive, probe and send
// on them fails at once, and what arrives on them is dropped (counted as
// received, as its sender counted it, then discarded). Synchronous sends
// fail through their ack receive; collectives, blocking and not, through
// their next receive or send. Shrink and Agree travel on the control
// context, which is never revoked.
//
// Propagation: the revoking process sends a notice (a kindRevoke frame
// naming the communicator's handle, which is the same at every member)
// to every other member. A member forwards the notice it got to every
// other member, once, when the member it got it from has failed: at once
// if it has already (before failing its own pending operations), else
// when this process learns of that failure (failPeer). Without failures
// that is n-1 frames and one frame's latency, against n² frames for a
// flood in which every member forwards at once (BenchmarkRevoke, 64
// in-process ranks on 2 cores: the last rank interrupted after 2.9 ms,
// median; the flood's 4,000 frames took 59 ms). It stays reliable when senders fail midway:
// a live member M misses the notice only if its sender S died before
// writing to M; then every member that got it from S learns of S's
// failure (the notice came over S's connection to it, whose break is
// that failure, if the runtime does not report it first) and forwards
// it to M, and so on down any chain of failing forwarders. Only when
// every process that got the notice fails does it die with them, as
// with the flood. Connections are FIFO and a goodbye is queued behind
// the notices, so a sender that finalizes right after revoking still
// delivers them. Failures are fail-stop, as Shrink assumes.
//
// The reader goroutine handles the notice as it comes off the
// connection, without any receive posted; the notices are queued to the
// peers' writers, so the reader never waits for a connection. The frames
// are no messages: they have no sequence number, and the C/R protocols
// (p.sent, p.received) do not see them.
//
// A notice may arrive for a communicator this process has not created
// yet (the others finished creating it first): its contexts are marked
// revoked all the same (a context's state exists before its communicator,
// as for early messages), the communicator is born revoked, and the
// forwarding rule applies to it when it is created.

// revokedErr is the error of an operation on a revoked context (either
// of a communicator's two).
func revokedErr(ctx uint64) error {
	return fmt.Errorf("mpi: communicator %d: %w", ctx&^1, ErrRevoked)
}

// Revoke revokes c at every member (ULFM's MPIX_Comm_revoke): every
// pending and later operation on c, at this process and, once the notice
// reaches them, at every other member, fails with an error wrapping
// ErrRevoked, except Shrink, Agree, GetFailed, AckFailed, IsRevoked,
// Free and the queries (Rank, Size, Group …). Creating a communicator
// from c fails too. It is not collective: one member calls it, the
// others learn of it. Revoking a revoked communicator does nothing.
// Messages that arrive on c afterwards are dropped. gompi does not revoke
// intercommunicators (ErrInter).
//
//	if _, err := c.Recv(buf, peer, tag); errors.Is(err, mpi.ErrProcFailed) {
//		c.Revoke() // every member leaves its pending operations on c
//	}
func (c *Comm) Revoke() error {
	if err := c.checkFT("revoke"); err != nil {
		return err
	}
	c.p.revoke(c.handle, -1)
	return nil
}

// IsRevoked reports whether c was revoked, by this process or a notice
// from another member (ULFM's MPIX_Comm_is_revoked).
//
//	if c.IsRevoked() {
//		nc, err := c.Shrink()
//	}
func (c *Comm) IsRevoked() bool {
	return c != nil && c.pt.revoked.Load()
}

// notRevoked is nil unless c was revoked.
func (c *Comm) notRevoked() error {
	if c.pt.revoked.Load() {
		return revokedErr(c.handle)
	}
	return nil
}

// usable checks that c can carry a new operation: live and not revoked.
func (c *Comm) usable() error {
	if err := c.live(); err != nil {
		return err
	}
	return c.notRevoked()
}

// checkOp starts collectives and communicator creations: check, and c not
// revoked.
func (c *Comm) checkOp() error {
	if err := c.check(); err != nil {
		return err
	}
	return c.notRevoked()
}

// revokeNotice handles a notice from src (its reader goroutine calls it).
func (p *Proc) revokeNotice(src int, handle uint64) error {
	if handle&1 != 0 || handle == ctxControl {
		return fmt.Errorf("revoke notice for context %d, which no communicator has", handle)
	}
	p.revoke(handle, src)
	return nil
}

// revoke revokes the communicator of handle here, the first time: the
// notice came from world rank from (-1: this process revokes it). It
// sends or forwards the notice as the rule says and fails what is
// pending.
func (p *Proc) revoke(handle uint64, from int) {
	p.mu.Lock()
	pt, co := p.ctxStateLocked(handle), p.ctxStateLocked(handle+1)
	if pt.revoked.Load() {
		p.mu.Unlock()
		return
	}
	var reqs []*Request
	for _, cs := range []*ctxState{pt, co} {
		cs.revokeFrom = from
		cs.revoked.Store(true)
		reqs = cs.emptyLocked(reqs) // probers look again and see the revocation
	}
	p.mu.Unlock()
	// Registered after its contexts were made: either it is found here,
	// or its creation sees the contexts revoked (applyCreate).
	if c, ok := p.Comm(handle); ok {
		p.maybeForward(c)
	}
	err := revokedErr(handle)
	for _, r := range reqs {
		r.complete(Status{}, err)
	}
}

// maybeForward sends the notice of the revoked c on when this process
// revoked it or the member it got the notice from failed.
func (p *Proc) maybeForward(c *Comm) {
	from := c.pt.revokeFrom
	if from < 0 || p.peers[from].failure() != nil {
		p.forwardRevoke(c, from)
	}
}

// forwardRevokes forwards the notices of the communicators whose notice
// came from rank, which failed (failPeer calls it after marking it).
func (p *Proc) forwardRevokes(rank int) {
	p.commMu.Lock()
	var fwd []*Comm
	for _, c := range p.comms {
		if c.IsRevoked() && c.pt.revokeFrom == rank {
			fwd = append(fwd, c)
		}
	}
	p.commMu.Unlock()
	for _, c := range fwd {
		p.forwardRevoke(c, rank)
	}
}

// forwardRevoke sends c's revoke notice to every live member but this
// process and skip, once per communicator. The frames are queued to the
// peers' writers: it never waits for a connection.
func (p *Proc) forwardRevoke(c *Comm, skip int) {
	if c.inter != nil || !c.revokeSent.CompareAndSwap(false, true) {
		return
	}
	for _, w := range c.members {
		pe := p.peers[w]
		if w == p.rank || w == skip || pe.failure() != nil {
			continue
		}
		if p.rep != nil {
			// To every copy of the member (replica.go).
			p.rep.revokeTo(w, c.handle)
			continue
		}
		pe.mu.Lock()
		p.enqueueLocked(pe, &sendOp{kind: kindRevoke, ctx: c.handle})
	}
}

// revokedLocked refuses a checkpoint (SaveState) while a communicator is revoked: a
// restarted job could not hold the revocation (its contexts start afresh,
// and the members that learnt of it would disagree with the rest), and a
// revoked communicator is one the application is recovering from. The
// caller holds p.commMu and p.mu.
func (p *Proc) revokedLocked() error {
	for _, h := range sortedHandles(p.comms) {
		if p.comms[h].IsRevoked() {
			return fmt.Errorf("communicator %d is %w: shrink it and free it, then checkpoint", h, ErrRevoked)
		}
	}
	for _, ctx := range sortedHandles(p.ctxs) {
		if ctx >= p.nextCtx && p.ctxs[ctx].revoked.Load() {
			return fmt.Errorf("communicator %d, which this process is still creating, is %w: shrink it and free it, then checkpoint", ctx&^1, ErrRevoked)
		}
	}
	return nil
}

// refuseRevoked is revokedLocked for a transparent checkpoint's
// suspension: revoke notices are no messages, so its quiescing could not
// vouch that none is in flight.
func (p *Proc) refuseRevoked() error {
	p.commMu.Lock()
	defer p.commMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.revokedLocked()
}

// emptyLocked appends the receives posted on cs to reqs for the caller to
// fail once p.mu is released, drops cs's unexpected messages and wakes
// its probers, who look again and find what emptied it (a revocation, a
// rollback). The caller holds p.mu.
func (cs *ctxState) emptyLocked(reqs []*Request) []*Request {
	reqs = append(reqs, cs.posted...)
	clear(cs.posted)
	cs.posted = nil
	for _, m := range cs.unexp {
		putMsg(m)
	}
	clear(cs.unexp)
	cs.unexp = nil
	for _, w := range cs.probes {
		close(w.ch)
	}
	cs.probes = nil
	return reqs
}
