package mpi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Agree returns the bitwise AND of flag over the members of c that take
// part, the same at every survivor (ULFM's MPIX_Comm_agree). It is
// collective over the members still running and works on a revoked
// communicator. It returns an error wrapping ErrProcFailed at every
// survivor or at none: at every one when the members agreed that some
// member failed whose failure is not acknowledged (AckFailed) at every
// survivor — failures a member acknowledged before the call are left out
// of its contribution. The value is valid with the error too. A rank the
// others agreed failed gets ErrProcFailed.
//
// The agreement takes 4·⌊log2 n⌋ message rounds and 4(n-1) messages when
// nobody fails; see agreemachine.go for the recovery path and why every
// survivor decides the same.
//
//	ok := 1
//	if err := step(); err != nil {
//		ok = 0
//	}
//	all, err := c.Agree(ok) // all == 1: every member's step worked
func (c *Comm) Agree(flag int) (int, error) { return c.AgreeCtx(context.Background(), flag) }

// AgreeCtx is Agree bounded by ctx. When ctx ends during the call it
// returns an error, and the others may wait for this rank (as with any
// collective one member abandons).
func (c *Comm) AgreeCtx(ctx context.Context, flag int) (int, error) {
	if err := c.checkFT("agree"); err != nil {
		return 0, err
	}
	return c.agree(ctx, c.nextFTSeq(), flag)
}

// Iagree starts an Agree of *flag; when the request completes *flag holds
// the agreed value and the request's error is Agree's.
//
//	req, _ := c.Iagree(&flag)
//	// ... compute ...
//	_, err := req.Wait() // flag is now the AND over the survivors
func (c *Comm) Iagree(flag *int) (*Request, error) {
	if err := c.checkFT("iagree"); err != nil {
		return nil, err
	}
	tag, in := c.nextFTSeq(), *flag
	return c.async(func() error {
		v, err := c.agree(context.Background(), tag, in)
		*flag = v
		return err
	}), nil
}

func (c *Comm) agree(ctx context.Context, seq, flag int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("mpi: agree: %w", err)
	}
	mine := func() agreeVal { return agreeVal{flag: uint64(int64(flag)), failed: c.unackedFailed()} }
	d, err := c.runAgreement(ctx, agreeTag(c.handle, seq), mine, false)
	if err != nil {
		return 0, fmt.Errorf("mpi: agree: %w", err)
	}
	v := int(int64(d.flag))
	if d.failed.has(c.rank) {
		return v, fmt.Errorf("mpi: agree: %w: the other survivors agreed that this rank (%d) failed", ErrProcFailed, c.rank)
	}
	c.markAgreedFailed(d.failed, "Agree")
	if !d.failed.empty() {
		var ranks []int
		for r := range c.size {
			if d.failed.has(r) {
				ranks = append(ranks, r)
			}
		}
		return v, fmt.Errorf("mpi: agree: %w: the survivors agreed that ranks %v failed", ErrProcFailed, ranks)
	}
	return v, nil
}

// knownFailed returns the members this process knows failed.
func (c *Comm) knownFailed() bitset {
	set := newBitset(c.size)
	for r, w := range c.members {
		if w != c.p.rank && c.p.peers[w].failure() != nil {
			set.set(r)
		}
	}
	return set
}

// markAgreedFailed marks failed here the ranks an agreement decided
// failed, so operations waiting for them end.
func (c *Comm) markAgreedFailed(failed bitset, op string) {
	for r, w := range c.members {
		if failed.has(r) && w != c.p.rank && c.p.peers[w].failure() == nil {
			c.p.failPeer(w, fmt.Errorf("found failed by the survivors' agreement (%s)", op))
		}
	}
}

// agreeTag is the control-context tag of one agreement: the
// communicator's handle and the call's collective number, with bit 62
// set so it is above every tag of the checkpoint exchanges on that
// context (which drop leftovers with lower tags), and bit 30 clear (set
// in createGroupTag's).
func agreeTag(handle uint64, seq int) int {
	const bits = 31
	return 1<<62 | int((handle>>1)&(1<<bits-1))<<bits | seq&(1<<30-1)
}

func isAgreeTag(tag int) bool { return tag&(1<<62) != 0 && tag&(1<<30) == 0 }

// runAgreement runs this process's part of the agreement with tag over c,
// contributing contrib's value (taken after the members known failed, so
// a failure in between is in both), and returns the decision.
func (c *Comm) runAgreement(ctx context.Context, tag int, contrib func() agreeVal, checkNext bool) (agreeVal, error) {
	p := c.p
	t := &p.agrees
	box := t.open(tag)
	m := newAgreeMachine(c.size, c.rank, contrib(), c.knownFailed())
	if err := c.agreePing(tag, m); err != nil {
		return agreeVal{}, err
	}
	m.start()
	seen := int32(-1)
	probe := agreeProbeFirst
	timer := time.NewTimer(probe)
	defer timer.Stop()
	for {
		busy := false
		wake := p.failWake.watch()
		if p.rb.active.Load() {
			return agreeVal{}, p.rolledBackErr()
		}
		if n := p.nFailed.Load(); n != seen {
			seen, busy = n, true
			for r, w := range c.members {
				if w != p.rank && p.peers[w].failure() != nil {
					m.onFailure(r)
				}
			}
		}
		ins := t.take(box)
		if err := c.agreeFeed(m, ins, checkNext); err != nil {
			return agreeVal{}, err
		}
		if err := c.agreeSend(tag, m); err != nil {
			return agreeVal{}, err
		}
		if m.decision != nil {
			break
		}
		if busy || len(ins) > 0 {
			continue
		}
		select {
		case <-box.notify:
		case <-wake:
		case <-timer.C:
			// Stalled: probe whom it waits for (see agreeProbeFirst).
			for _, r := range m.waitingOn() {
				m.out = append(m.out, pingTo(r, c.size))
			}
			probe = min(2*probe, agreeProbeMax)
			timer.Reset(probe)
		case <-p.done:
			return agreeVal{}, p.stopErr()
		case <-ctx.Done():
			return agreeVal{}, ctx.Err()
		}
	}
	t.hops.Store(int64(m.hops))
	answer := encodeAgree(agreeMsg{kind: agreeDecided, hops: m.hops + 1, val: *m.decision})
	// Queries that came after the decision get it as their answer.
	if err := c.agreeFeed(m, t.decide(box, tag, answer), checkNext); err != nil {
		return agreeVal{}, err
	}
	if err := c.agreeSend(tag, m); err != nil {
		return agreeVal{}, err
	}
	return *m.decision, nil
}

// agreePing makes sure this process learns when a tree neighbor fails
// while it waits for it. A failure shows as a broken connection on the
// reader of a connection the peer opened, or as a send that fails: the
// tree sends nothing to a child before its up, so a child that never
// had a message from this process would wait for a dead parent's down,
// and a parent for a dead child's up, forever. A ping to each neighbor
// this process has no connection to yet opens one (the first agreement
// over fresh connections only: a connection stays). A ping that fails is
// a failure found.
func (c *Comm) agreePing(tag int, m *agreeMachine) error {
	p := c.p
	for _, r := range append([]int{m.parent}, m.children...) {
		if r < 0 || m.dead.has(r) {
			continue
		}
		pe := p.peers[c.members[r]]
		pe.mu.Lock()
		open := pe.out != nil
		pe.mu.Unlock()
		if !open {
			m.out = append(m.out, pingTo(r, c.size))
		}
	}
	return c.agreeSend(tag, m)
}

func pingTo(r, n int) agreeOut {
	return agreeOut{dst: r, msg: agreeMsg{kind: agreePing, val: agreeVal{next: firstUserCtx, failed: newBitset(n)}}}
}

// A wait that makes no progress for agreeProbeFirst sends a ping to the
// members it waits for, then again after twice as long, up to every
// agreeProbeMax: a member that died after this process opened a
// connection to it, but before it opened one back, shows no broken
// connection to any reader here; a write to it fails. Without a runtime
// that reports failures this is the only way to find such a death.
const (
	agreeProbeFirst = 20 * time.Millisecond
	agreeProbeMax   = time.Second
)

// agreeFeed hands messages to the machine. A message that does not parse
// is an error: a peer of this job sent it, so it is a bug or an attack,
// and guessing could break uniformity.
func (c *Comm) agreeFeed(m *agreeMachine, ins []agreeIn, checkNext bool) error {
	for _, in := range ins {
		r := c.commRank(in.src)
		if r < 0 {
			return fmt.Errorf("agreement message from world rank %d, not a member", in.src)
		}
		msg, err := decodeAgree(in.data, c.size, checkNext)
		if err != nil {
			return fmt.Errorf("from rank %d: %w", r, err)
		}
		m.onMsg(r, msg)
	}
	return nil
}

// agreeSend sends what the machine has to send; a destination found
// failed is news for the machine, which may have more to send then.
func (c *Comm) agreeSend(tag int, m *agreeMachine) error {
	p := c.p
	for out := m.takeOut(); len(out) > 0; out = m.takeOut() {
		var failed []int
		for _, o := range out {
			if p.isStopped() {
				return p.stopErr()
			}
			p.agrees.sent.Add(1)
			if h := p.agrees.onSend.Load(); h != nil {
				(*h)()
			}
			err := p.send(p.control.pt, c.members[o.dst], tag, encodeAgree(o.msg), nil)
			switch {
			case err == nil:
			case p.isStopped():
				return p.stopErr()
			case errors.Is(err, ErrProcFailed):
				failed = append(failed, o.dst)
			default:
				return err
			}
		}
		for _, r := range failed {
			m.onFailure(r)
		}
	}
	return nil
}

// --- the agreements of a process ------------------------------------------------

// agreeTable holds, per agreement (by tag), the messages that came for
// it and, once this process decided, the answer to later queries: a rank
// that decided answers them after its call returned, from the reader
// path (agreeDeliver). An agreement's entry goes when a later agreement
// on the same communicator is decided here: by then every live member has
// finished the earlier one (the later one needed an answer from each).
type agreeTable struct {
	mu    sync.Mutex
	boxes map[int]*agreeBox
	floor map[int]int // per communicator (tag>>31): calls below are over everywhere

	sent   atomic.Int64           // messages sent, for the figures
	hops   atomic.Int64           // rounds on the critical path of the last decision here
	onSend atomic.Pointer[func()] // a test's hook, called before every send
}

type agreeBox struct {
	in      []agreeIn
	notify  chan struct{} // one token: messages came
	decided []byte        // the decided(v) answer, once decided
}

type agreeIn struct {
	src  int // world rank
	data []byte
}

func agreeSplit(tag int) (comm, seq int) { return tag >> 31, tag & (1<<30 - 1) }

// open returns the box of tag, made if no message came for it yet.
func (t *agreeTable) open(tag int) *agreeBox {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.boxLocked(tag)
}

func (t *agreeTable) boxLocked(tag int) *agreeBox {
	if t.boxes == nil {
		t.boxes, t.floor = map[int]*agreeBox{}, map[int]int{}
	}
	b := t.boxes[tag]
	if b == nil {
		b = &agreeBox{notify: make(chan struct{}, 1)}
		t.boxes[tag] = b
	}
	return b
}

func (t *agreeTable) take(b *agreeBox) []agreeIn {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := b.in
	b.in = nil
	return in
}

// decide records the answer of a decided agreement, drops the entries of
// the communicator's earlier ones and returns the messages not yet taken.
func (t *agreeTable) decide(b *agreeBox, tag int, answer []byte) []agreeIn {
	t.mu.Lock()
	defer t.mu.Unlock()
	b.decided = answer
	comm, seq := agreeSplit(tag)
	for k := range t.boxes {
		if c, s := agreeSplit(k); c == comm && s < seq {
			delete(t.boxes, k)
		}
	}
	t.floor[comm] = max(t.floor[comm], seq)
	in := b.in
	b.in = nil
	return in
}

// forget drops the undecided entries of a freed communicator. Decided
// ones stay: a member still recovering in the last agreement (a Shrink,
// typically, after which the application frees the old communicator)
// needs this process's answer.
func (p *Proc) forgetAgreements(handle uint64) {
	t := &p.agrees
	t.mu.Lock()
	defer t.mu.Unlock()
	comm, _ := agreeSplit(agreeTag(handle, 0))
	for k, b := range t.boxes {
		if c, _ := agreeSplit(k); c == comm && b.decided == nil {
			delete(t.boxes, k)
		}
	}
}

// agreeDeliver takes a message of an agreement off the reader path: it
// queues it for the call, or, when this process decided already and it
// is a query, answers it.
func (p *Proc) agreeDeliver(src, tag int, data []byte) {
	t := &p.agrees
	t.mu.Lock()
	comm, seq := agreeSplit(tag)
	if t.floor != nil && seq < t.floor[comm] {
		t.mu.Unlock()
		return
	}
	b := t.boxLocked(tag)
	if b.decided == nil {
		b.in = append(b.in, agreeIn{src: src, data: append([]byte(nil), data...)})
		t.mu.Unlock()
		select {
		case b.notify <- struct{}{}:
		default:
		}
		return
	}
	answer := b.decided
	t.mu.Unlock()
	if len(data) > 0 && data[0] == agreeQuery {
		// Off the reader goroutine: a send may wait for the connection.
		// The goroutine is the Proc's; it ends when the answer is handed
		// to the transport or the peer or this Proc failed.
		go func() { _ = p.send(p.control.pt, src, tag, answer, nil) }()
	}
}
