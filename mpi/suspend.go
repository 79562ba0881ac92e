package mpi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"gompi/frameworks/btl"
	"gompi/frameworks/crcp"
)

// A suspension quiesces a rank transparently, so that its process can be
// dumped from outside (CRIU) while the application goroutines do whatever
// they were doing: computing, blocked in Recv or Wait, inside a blocking or
// non-blocking collective. The runtime's link calls Suspend on every rank
// with the same epoch; each closes its gate (library entries wait there:
// see gate below), lets the sends already under way reach the transport,
// makes its channels quiet the way the job's coordination protocol says
// (crcp.Transparent) and closes every socket and listener it owns. By
// counts (bkmrk, or no protocol installed): it ends every connection it
// opened with a flag, exchanges its non-zero per-peer message counts over
// the control tree (bkmrk's bookmarks, over every context the library
// uses: they are the library's totals; ctltree.go) and waits until it has
// taken off the transport everything its peers sent. By flags (crcp flag,
// flag.go): it tells the ranks it opened a connection to, over the same
// tree, writes a flag behind its last frame down each and reads each
// connection to it up to the peer's flag. Either way a rank writes to the
// ranks it had channels with and to its neighbours in the tree, O(N)
// frames in all for a job whose ranks talk to a few others. Resume listens
// anew, exchanges the new addresses through the runtime (Rejoiner) and
// opens the gate: communicators, requests and sequence numbers go on as
// they were.

// Rejoiner is implemented by a Bootstrap whose runtime can exchange the
// ranks' addresses again after a suspension (Proc.Resume): Remodex is
// Modex for one suspension epoch, collective over the job, once per epoch
// on every rank. The test runtime (package mpitest) implements it;
// without it a Proc of more than one rank refuses to suspend.
type Rejoiner interface {
	Remodex(ctx context.Context, epoch uint64, mine map[string]string) ([]map[string]string, error)
}

// suspendTagBase is where the tags of the suspensions' count exchanges
// start on the control context: above every checkpoint exchange's tag
// (which drops leftovers with lower tags) and below every Shrink's (bit
// 62), so neither drops the other's messages.
const suspendTagBase = 1 << 61

// Quiet describes a completed Suspend.
type Quiet struct {
	Epoch uint64
	// Took is the time from the call to this rank being quiet.
	Took time.Duration
	// SentTo and RecvdFrom are the per-peer message totals at the
	// suspension (the library's control traffic excluded); RecvdFrom[r]
	// equals what rank r says it sent here.
	SentTo, RecvdFrom []uint64
	// Way is how the channels were made quiet (counts or flags).
	Way crcp.Quiesce
	// Frames is the number of the library's own frames this rank wrote
	// to its peers during the suspension: what the protocol cost (the
	// counts' messages or the flags).
	Frames uint64
}

// gate holds back the library's entries during a suspension. Public
// entry points wait at it (pass) without holding it, so a goroutine
// blocked in Recv, Wait or a collective never holds it; every message the
// library sends but its own control traffic enters and leaves it around
// the send (enter, leave), so the suspension knows when the sends that
// passed before it closed have reached the transport.
type gate struct {
	closed atomic.Bool
	inside atomic.Int64  // sends between enter and leave
	idle   chan struct{} // a token when inside fell to 0 while closed
	mu     sync.Mutex    // guards open
	open   chan struct{} // closed when the gate opens again
}

func (g *gate) init() { g.idle = make(chan struct{}, 1) }

// shut closes the gate: new entries wait from now on.
func (g *gate) shut() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.closed.Store(true)
	g.mu.Unlock()
}

// reopen lets every waiting entry through.
func (g *gate) reopen() {
	g.mu.Lock()
	g.closed.Store(false)
	if g.open != nil {
		close(g.open)
		g.open = nil
	}
	g.mu.Unlock()
}

// pass waits while the gate is closed; it ends early when the Proc stops.
func (p *Proc) pass() error {
	if p.rb.active.Load() {
		return p.rolledBackErr()
	}
	g := &p.gate
	for g.closed.Load() {
		g.mu.Lock()
		ch := g.open
		g.mu.Unlock()
		if ch == nil {
			continue
		}
		select {
		case <-ch:
		case <-p.done:
			return p.stopErr()
		}
	}
	return nil
}

// enter is pass for a send, which then counts as inside until leave.
func (p *Proc) enter() error {
	g := &p.gate
	if p.rb.active.Load() {
		return p.rolledBackErr()
	}
	for {
		g.inside.Add(1)
		if !g.closed.Load() {
			return nil
		}
		p.leave()
		if err := p.pass(); err != nil {
			return err
		}
	}
}

func (p *Proc) leave() {
	g := &p.gate
	if g.inside.Add(-1) == 0 && g.closed.Load() {
		select {
		case g.idle <- struct{}{}:
		default:
		}
	}
}

// settle waits until no send is inside the gate (closed by the caller).
func (p *Proc) settle(ctx context.Context) error {
	g := &p.gate
	for g.inside.Load() != 0 {
		select {
		case <-g.idle:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return p.stopErr()
		}
	}
	return nil
}

// suspension is the state of Suspend and Resume, under mu (one at a time).
type suspension struct {
	mu        sync.Mutex
	suspended bool
	quiet     atomic.Bool // suspended, for Suspended without waiting for mu
	epoch     uint64      // the last epoch begun
	begun     bool        // a Suspend ever began (epoch is meaningful)
	listening bool        // Resume listens again: done, before the remodex
	// tag is the control tag of the count exchange in progress or done
	// (0: none): a connection whose last frame is the peer's count for
	// it ended on purpose (quietEnd).
	tag atomic.Int64
	// closing: this rank is closing its own connections.
	closing atomic.Bool
}

// Suspend quiesces this rank for a job-wide suspension numbered epoch
// (the same on every rank, larger than any earlier one) and returns once
// it owns no socket or listener: every rank must call it. It runs on the
// caller's goroutine (the runtime's link), whatever the application's
// goroutines are doing; library entries wait until Resume. When ctx ends
// or a peer fails first, the suspension is given up on this rank and it
// runs on (as do the others when every rank gives up: a rank that was
// never asked keeps every other from completing).
func (p *Proc) Suspend(ctx context.Context, epoch uint64) (Quiet, error) {
	start := time.Now()
	s := &p.susp
	s.mu.Lock()
	defer s.mu.Unlock()
	tag, way, err := p.canSuspend(epoch)
	if err != nil {
		return Quiet{}, err
	}
	s.epoch, s.begun = epoch, true
	s.tag.Store(int64(tag))
	frames := p.ctlFrames.Load()
	p.gate.shut()
	sentTo, recvd, err := p.quietChannels(ctx, way, tag)
	if err != nil {
		s.tag.Store(0)
		p.gate.reopen()
		return Quiet{}, fmt.Errorf("mpi: suspend epoch %d: %w", epoch, err)
	}
	p.disconnect()
	s.suspended, s.listening = true, false
	s.quiet.Store(true)
	q := Quiet{Epoch: epoch, Took: time.Since(start), SentTo: sentTo, RecvdFrom: recvd,
		Way: way, Frames: p.ctlFrames.Load() - frames}
	p.log.Debug("suspended", "epoch", epoch, "by", way, "took", q.Took)
	return q, nil
}

// canSuspend checks that a suspension for epoch may start and returns
// the tag of its count exchange or flags, and how the channels are made
// quiet.
func (p *Proc) canSuspend(epoch uint64) (int, crcp.Quiesce, error) {
	s := &p.susp
	switch {
	case s.suspended:
		return 0, 0, fmt.Errorf("mpi: suspend epoch %d: %w: already suspended (epoch %d)", epoch, ErrArg, s.epoch)
	case p.finalizing.Load():
		return 0, 0, fmt.Errorf("mpi: suspend epoch %d: %w: finalizing", epoch, ErrStopped)
	case p.isStopped():
		return 0, 0, fmt.Errorf("mpi: suspend epoch %d: %w", epoch, p.stopErr())
	case s.begun && epoch <= s.epoch:
		return 0, 0, fmt.Errorf("mpi: suspend epoch %d: %w: epochs must grow (the last was %d)", epoch, ErrArg, s.epoch)
	case epoch >= suspendTagBase:
		return 0, 0, fmt.Errorf("mpi: suspend epoch %d: %w: beyond %d", epoch, ErrArg, uint64(suspendTagBase-1))
	}
	way, err := p.quiesceWay()
	if err != nil {
		return 0, 0, fmt.Errorf("mpi: suspend: %w", err)
	}
	if err := p.refuseRevoked(); err != nil {
		return 0, 0, fmt.Errorf("mpi: suspend epoch %d: %w", epoch, err)
	}
	if p.size == 1 {
		return suspendTagBase + int(epoch), way, nil
	}
	if _, ok := p.boot.(Rejoiner); !ok {
		return 0, 0, fmt.Errorf("mpi: suspend: %w: the runtime cannot give the ranks' new addresses after a suspension (its bootstrap %T is no mpi.Rejoiner)", errors.ErrUnsupported, p.boot)
	}
	for i, m := range p.mods {
		if _, ok := m.(btl.Relistener); !ok {
			return 0, 0, fmt.Errorf("mpi: suspend: %w: btl %s cannot listen again", errors.ErrUnsupported, p.modName[i])
		}
	}
	for _, pe := range p.peers {
		if err := pe.goneOrFailed(); err != nil {
			return 0, 0, fmt.Errorf("mpi: suspend epoch %d: %w", epoch, err)
		}
	}
	return suspendTagBase + int(epoch), way, nil
}

// quietChannels lets the sends that passed the gate reach the transport
// and makes every channel toward this rank quiet, the way given. It
// returns this rank's totals. Either way every connection this rank
// opened ends with a flag of the suspension (tag), its last frame, so
// the peer knows it was closed on purpose (quietEnd).
func (p *Proc) quietChannels(ctx context.Context, way crcp.Quiesce, tag int) (sentTo, recvd []uint64, err error) {
	if err := p.settle(ctx); err != nil {
		return nil, nil, err
	}
	if way == crcp.QuiesceCounts {
		return p.quietByCounts(ctx, tag)
	}
	// The flags queue behind every send queued before them: no flush.
	if err := p.flagAll(ctx, tag); err != nil {
		return nil, nil, err
	}
	sentTo, recvd = p.Counts()
	return sentTo, recvd, nil
}

// quietByCounts ends every connection this rank opened with a flag,
// behind the sends that passed the gate, and waits until they were
// written; then it exchanges counts with the other ranks (over the
// control tree: only the non-zero ones travel, and a rank that only
// receives learns what it must wait for) and waits until everything
// counted arrived. It returns this rank's totals. The flags go first: a
// peer closes its connections once its exchange and drain are done, which
// needs this rank's part in the exchange, so nothing this rank writes
// after it (but the exchange's own messages) would find the peer
// listening.
func (p *Proc) quietByCounts(ctx context.Context, tag int) (sentTo, recvd []uint64, err error) {
	if err := p.sendFlags(ctx, tag, p.outPeers()); err != nil {
		return nil, nil, err
	}
	sentTo, _ = p.Counts()
	got, err := p.exchange(ctx, p.control.pt, tag, sentTo, suspendTagBase)
	if err != nil {
		return nil, nil, err
	}
	ch := channels{p}
	for r, n := range got {
		if r == p.rank {
			continue
		}
		if err := ch.Drain(ctx, r, n); err != nil {
			return nil, nil, err
		}
	}
	_, recvd = p.Counts()
	return sentTo, recvd, nil
}

// disconnect closes every listener and connection of this rank and waits
// for its reader goroutines to end. Nothing moves any more: every rank's
// sends are done and counted.
func (p *Proc) disconnect() {
	s := &p.susp
	s.closing.Store(true)
	defer s.closing.Store(false)
	for i, m := range p.mods {
		if err := m.(btl.Relistener).Unlisten(); err != nil {
			p.log.Warn("suspend: close a listener", "btl", p.modName[i], "err", err)
		}
	}
	p.closeIn()
	p.inMu.Lock()
	clear(p.inFrom)
	p.inMu.Unlock()
	for _, pe := range p.peers {
		pe.dropOut()
	}
	p.readers.Wait()
}

// dropOut closes the connection this process dialed to the peer; the
// next send dials again. A suspension drops them once its sends are done;
// a rollback may find a send being written, which then fails on the closed
// connection, and the holder of the writer token forgets it (idleLocked).
func (pe *peer) dropOut() {
	pe.mu.Lock()
	out := pe.out
	if pe.writing {
		pe.dropIdle = true
	} else {
		pe.out = nil
	}
	pe.mu.Unlock()
	if out != nil {
		out.Close()
	}
}

// quietEnd reports whether a connection from src that ended did so for a
// suspension: this rank closed it, or the peer closed it after its flag
// or its message of the control tree of the suspension in progress (its
// last frame). The slot is freed.
func (p *Proc) quietEnd(src int, c btl.Conn, last *header) bool {
	s := &p.susp
	tag := s.tag.Load()
	ours := s.closing.Load()
	theirs := tag != 0 && last.tag == tag &&
		(last.kind == kindFlag || last.kind == kindData && last.ctx == ctxControl)
	if !ours && !theirs {
		return false
	}
	p.inMu.Lock()
	if p.inFrom[src] == c {
		p.inFrom[src] = nil
	}
	p.inMu.Unlock()
	return true
}

// Resume ends a suspension: it listens again (at new addresses where the
// transports pick them), exchanges the new addresses with every rank
// through the runtime (Rejoiner.Remodex for the suspension's epoch), points
// every peer at its new endpoint and opens the gate. The same call resumes
// a process restored from a dump of the suspended one (its memory is the
// suspended process's: its sockets are already closed). Messages sent
// before the suspension and not yet received are in the library's queues
// and match as if nothing happened. When it fails the rank stays
// suspended and Resume may be called again.
func (p *Proc) Resume(ctx context.Context) error {
	s := &p.susp
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.suspended {
		return fmt.Errorf("mpi: resume: %w: not suspended", ErrArg)
	}
	if p.size > 1 {
		if err := p.reconnect(ctx); err != nil {
			return fmt.Errorf("mpi: resume epoch %d: %w", s.epoch, err)
		}
	}
	s.suspended = false
	s.quiet.Store(false)
	s.tag.Store(0)
	p.gate.reopen()
	p.log.Debug("resumed", "epoch", s.epoch)
	return nil
}

// reconnect listens again and learns every peer's new endpoint.
func (p *Proc) reconnect(ctx context.Context) error {
	s := &p.susp
	// A process restored from a dump may run on another node: the
	// runtime says where it is now, and same-node transports follow.
	if node := p.boot.Node(); node != p.Node() {
		p.node.Store(&node)
		for i := range p.selfEP {
			p.selfEP[i].Node = node
		}
	}
	mine := map[string]string{"node": p.Node()}
	if !s.listening {
		p.inMu.Lock()
		p.inClosed = false
		p.inMu.Unlock()
		// The listeners outlive this call: they end with the module or
		// the next suspension.
		lctx := context.WithoutCancel(ctx)
		for i, m := range p.mods {
			addr, err := m.Listen(lctx, p.selfEP[i], p.accept)
			if err != nil {
				for _, m := range p.mods[:i] {
					m.(btl.Relistener).Unlisten()
				}
				return fmt.Errorf("listen again on btl %s: %w", p.modName[i], err)
			}
			p.selfEP[i].Addr = addr
		}
		s.listening = true
	}
	for i, ep := range p.selfEP {
		mine["btl_"+p.modName[i]] = ep.Addr
	}
	all, err := p.boot.(Rejoiner).Remodex(ctx, s.epoch, maps.Clone(mine))
	if err != nil {
		return fmt.Errorf("modex: %w", err)
	}
	if len(all) != p.size {
		return fmt.Errorf("modex returned %d entries for %d ranks", len(all), p.size)
	}
	p.setPolling(all)
	var errs []error
	for r, info := range all {
		if r == p.rank || info == nil {
			continue
		}
		if err := p.choosePath(p.peers[r], info); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Suspended reports whether the Proc is suspended (Suspend returned and
// Resume has not).
func (p *Proc) Suspended() bool { return p.susp.quiet.Load() }
