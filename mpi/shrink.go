package mpi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// OpShrink is the creation log entry of a Shrink: its result (members and
// handle) is recorded like a Dup's, so a replay needs no agreement.
const OpShrink LogOp = 4

// Shrink returns a communicator of the members of c that have not failed,
// in c's order: what an application uses to go on after a failure (the
// job runs on with errmgr sustain). It is collective over the members of
// c still running; each may know of a different set of failed ranks when
// it calls Shrink, so they first agree on one set, and every survivor gets
// the same communicator, with the same handle. A rank that fails during
// the agreement may or may not be left out (operations with it then fail
// with ErrProcFailed, and a later Shrink removes it), but the members
// always agree. Afterwards every rank the agreement found failed is
// marked failed in this process too.
//
// As in ULFM's MPI_Comm_shrink, every surviving member must call it, in
// the same order relative to c's other collectives; it blocks until they
// have. Failures are assumed to be fail-stop: a rank reported failed (by
// a broken connection or by the runtime) does not come back.
func (c *Comm) Shrink() (*Comm, error) { return c.ShrinkCtx(context.Background()) }

// ShrinkCtx is Shrink bounded by ctx. When ctx has ended already it
// returns an error at once, before taking part; when it ends during the
// agreement, the call returns an error and creates nothing, and the other
// members may wait for this rank forever (as with any collective one
// member abandons): end them too.
func (c *Comm) ShrinkCtx(ctx context.Context) (*Comm, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mpi: shrink: %w", err)
	}
	p := c.p
	if nc, ok, err := p.replayCreate(LogEntry{Op: OpShrink, Parent: c.handle}); ok || err != nil {
		return nc, err
	}
	next, err := p.beginCreate("shrink")
	if err != nil {
		return nil, err
	}
	defer p.creating.Store(false)
	a := &agreement{c: c, tag: shrinkTag(c.handle, c.nextTag())}
	defer a.purge()
	failed, handle, err := a.run(ctx, next)
	if err != nil {
		return nil, fmt.Errorf("mpi: shrink: %w", err)
	}
	var members []int
	for r, w := range c.members {
		switch {
		case !failed.has(r):
			members = append(members, w)
		case w == p.rank:
			return nil, fmt.Errorf("mpi: shrink: %w: the other survivors agreed that this rank (%d) failed", ErrProcFailed, c.rank)
		default:
			p.failPeer(w, errors.New("found failed by the survivors' agreement (Shrink)"))
		}
	}
	e := LogEntry{Op: OpShrink, Parent: c.handle, Handle: handle, Members: members}
	return p.applyCreate(e), nil
}

// The agreement (a flooding exchange, then a rotating-coordinator
// consensus, correct for crash failures with a failure detector that
// never suspects a live rank):
//
//  1. Every survivor sends the set of members it knows failed, and its
//     next free context id, to every other member, and receives theirs.
//     A receive that fails adds its sender; every set received is added.
//     The result is the survivor's estimate: a failed set, and the
//     largest context id seen. It holds every failure known to any
//     survivor when it called Shrink.
//  2. Rounds 0..n-1: in round r, member r (if it runs) sends its estimate
//     to every other member; the others wait for it, adopt it when it
//     comes, and skip the round when r has failed. After the first round
//     whose coordinator survives it, every survivor holds the same
//     estimate, and later coordinators only repeat it; after the last
//     round the estimate is the decision.
//
// The decided context id is at least the next free one of every member
// left in: the estimate was built by a survivor that either heard from a
// member (and its context id) or counted it failed.
//
// Messages travel on the library's control context (not counted by the
// coordination protocol, not saved in checkpoints), each from one sender
// in the order sent, with a tag owned by this call of Shrink on c.
type agreement struct {
	c   *Comm
	tag int
}

// Message kinds.
const (
	agreeExchange byte = 1 // phase 1: what the sender knows
	agreeEstimate byte = 2 // phase 2: the coordinator's estimate
)

// shrinkTag is the control-context tag of one Shrink: the communicator's
// handle and the call's collective number, with bit 62 set so it is
// above every tag of the checkpoint exchanges on that context (which
// drop leftovers with lower tags).
func shrinkTag(handle uint64, seq int) int {
	const bits = 31
	return 1<<62 | int((handle>>1)&(1<<bits-1))<<bits | seq&(1<<bits-1)
}

// run agrees on the failed members (a set of c's ranks) and the new
// communicator's handle.
func (a *agreement) run(ctx context.Context, next uint64) (bitset, uint64, error) {
	c, p := a.c, a.c.p
	n := c.size
	known := newBitset(n)
	for r, w := range c.members {
		if p.peers[w].failure() != nil {
			known.set(r)
		}
	}
	maxCtx := next

	// Phase 1: every survivor to every other.
	bufs := make([][]byte, n)
	recvs := make([]*Request, n)
	for r, w := range c.members {
		if r != c.rank {
			bufs[r] = make([]byte, agreeLen(n))
			recvs[r] = p.control.irecvOn(p.control.pt, bufs[r], w, a.tag)
		}
	}
	withdraw := func() {
		for _, rq := range recvs {
			if rq != nil {
				p.cancelRecv(rq)
			}
		}
	}
	mine := encodeAgree(agreeExchange, next, known)
	for r := range c.members {
		if r == c.rank || known.has(r) {
			continue
		}
		if err := a.send(r, mine); err != nil {
			withdraw()
			return nil, 0, err
		}
	}
	for r, rq := range recvs {
		if rq == nil {
			continue
		}
		st, err := rq.WaitCtx(ctx)
		if err == nil {
			var m agreeMsg
			if m, err = decodeAgree(bufs[r][:st.Count], n); err == nil && m.kind != agreeExchange {
				err = fmt.Errorf("rank %d sent a %s message where its failure report was due", r, kindName(m.kind))
			}
			if err == nil {
				a.learn(known, m.failed)
				maxCtx = max(maxCtx, m.next)
				continue
			}
		}
		if !errors.Is(err, ErrProcFailed) {
			withdraw()
			return nil, 0, err
		}
		known.set(r)
		a.markFailed(r)
	}

	// Phase 2: rotating coordinator.
	est, estCtx := known.clone(), maxCtx
	buf := make([]byte, agreeLen(n))
	for r := range c.members {
		if r == c.rank {
			msg := encodeAgree(agreeEstimate, estCtx, est)
			for j := range c.members {
				if j == c.rank || known.has(j) {
					continue
				}
				if err := a.send(j, msg); err != nil {
					return nil, 0, err
				}
			}
			continue
		}
		m, err := a.estimate(ctx, r, buf, known)
		if err == nil {
			est, estCtx = m.failed, m.next
			a.learn(known, m.failed)
			continue
		}
		if !errors.Is(err, ErrProcFailed) {
			return nil, 0, err
		}
		known.set(r)
		a.markFailed(r)
	}
	return est, estCtx, nil
}

// estimate receives coordinator r's estimate. Its failure report may come
// first: when r was reported failed (by the runtime) before its report
// was read, phase 1 stopped waiting for it, though r may have sent its
// estimate too before it died. Such a report still tells what r knew.
func (a *agreement) estimate(ctx context.Context, r int, buf []byte, known bitset) (agreeMsg, error) {
	c, p := a.c, a.c.p
	for {
		st, err := p.control.recvOn(ctx, p.control.pt, buf, c.members[r], a.tag)
		if err != nil {
			return agreeMsg{}, err
		}
		m, err := decodeAgree(buf[:st.Count], c.size)
		switch {
		case err != nil:
			return agreeMsg{}, err
		case m.kind == agreeExchange:
			a.learn(known, m.failed)
		default:
			return m, nil
		}
	}
}

// send sends msg to member r; a failed r is no error (the agreement
// counts it failed).
func (a *agreement) send(r int, msg []byte) error {
	c, p := a.c, a.c.p
	err := p.send(p.control.pt, c.members[r], a.tag, msg, nil)
	if err == nil || errors.Is(err, ErrProcFailed) {
		return nil
	}
	return err
}

// learn adds failures reported by others to what this process knows,
// marking them failed here, so receives still waiting for them end.
func (a *agreement) learn(known, reported bitset) {
	for r := range a.c.size {
		if reported.has(r) && !known.has(r) && r != a.c.rank {
			known.set(r)
			a.markFailed(r)
		}
	}
}

func (a *agreement) markFailed(r int) {
	if w := a.c.members[r]; w != a.c.p.rank && a.c.p.peers[w].failure() == nil {
		a.c.p.failPeer(w, errors.New("reported failed by a survivor during Shrink"))
	}
}

// purge drops what failed members sent for this agreement and nobody
// will receive.
func (a *agreement) purge() {
	p := a.c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := p.control.pt
	cs.unexp = slices.DeleteFunc(cs.unexp, func(m *message) bool {
		if m.tag == a.tag {
			putMsg(m)
			return true
		}
		return false
	})
}

func kindName(k byte) string {
	switch k {
	case agreeExchange:
		return "failure report"
	case agreeEstimate:
		return "estimate"
	}
	return fmt.Sprintf("kind-%d", k)
}

// --- wire format ---------------------------------------------------------------

// An agreement message: kind (1 byte), a context id (8 bytes, little
// endian), then a bitmap of the communicator's ranks (bit r%8 of byte
// r/8 set: rank r failed). Its length follows from the communicator's
// size.

type agreeMsg struct {
	kind   byte
	next   uint64
	failed bitset
}

func agreeLen(n int) int { return 1 + 8 + (n+7)/8 }

func encodeAgree(kind byte, next uint64, failed bitset) []byte {
	b := make([]byte, 0, 9+len(failed))
	b = append(b, kind)
	b = binary.LittleEndian.AppendUint64(b, next)
	return append(b, failed...)
}

// decodeAgree parses a message of a communicator of n ranks.
func decodeAgree(b []byte, n int) (agreeMsg, error) {
	if len(b) != agreeLen(n) {
		return agreeMsg{}, fmt.Errorf("agreement message of %d bytes, want %d for %d ranks", len(b), agreeLen(n), n)
	}
	m := agreeMsg{kind: b[0], next: binary.LittleEndian.Uint64(b[1:9]), failed: bitset(slices.Clone(b[9:]))}
	if m.kind != agreeExchange && m.kind != agreeEstimate {
		return agreeMsg{}, fmt.Errorf("agreement message of unknown kind %d", m.kind)
	}
	if n%8 != 0 && m.failed[len(m.failed)-1]>>(n%8) != 0 {
		return agreeMsg{}, fmt.Errorf("agreement message names ranks beyond %d", n-1)
	}
	if m.next < firstUserCtx || m.next%2 != 0 {
		return agreeMsg{}, fmt.Errorf("agreement message proposes context %d (want an even id from %d)", m.next, firstUserCtx)
	}
	return m, nil
}

// bitset is a set of communicator ranks.
type bitset []byte

func newBitset(n int) bitset    { return make(bitset, (n+7)/8) }
func (b bitset) has(r int) bool { return b[r/8]&(1<<(r%8)) != 0 }
func (b bitset) set(r int)      { b[r/8] |= 1 << (r % 8) }
func (b bitset) clone() bitset  { return slices.Clone(b) }
