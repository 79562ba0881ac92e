package mpi

import (
	"context"
	"fmt"
	"sync/atomic"

	"gompi/frameworks/snapc"
)

// In-job rollback (errmgr rollback): a surviving rank goes back in place
// to a committed sequence while only the lost ranks start anew.
//
// RollBack interrupts: every pending operation of the application fails
// with an error wrapping ErrRolledBack (posted receives, queued sends,
// probes, the collectives and agreements waiting on them), as does every
// later call, until Restore; unexpected messages are dropped; every
// listener and connection is closed (what was in flight on them, sent
// before the rollback, is discarded with them) and failures learned
// meanwhile are not reported to the application (its peers are only
// closing their connections too). Restore then puts the library back as
// the sequence saved it, exactly as a restarted rank's Init does (saved
// unexpected messages, sequence numbers, totals, the communicator log
// replayed by the program's creation calls), listens again and exchanges
// every rank's new addresses through the runtime (Rejoiner.Remodex for
// the rollback's epoch: the survivors and the restarted ranks meet
// there), so no frame of the abandoned epoch can reach the new one.
//
// COMM_WORLD keeps its handle (the *Comm the program holds). The
// communicators the program made are freed by the rollback: the program
// makes them again after it (its creation calls replay the saved log, as
// after a restart, and get the same context ids).

// RollbackEpocher is implemented by a Bootstrap that started this rank
// anew for an in-job rollback (gompirun's rank client): RollbackEpoch is
// the rollback's epoch, 0 for any other start. The rank's connections
// then belong to that epoch, as the survivors' do once restored.
type RollbackEpocher interface {
	RollbackEpoch() uint64
}

// rollbackState is the Proc's rollback, if any.
type rollbackState struct {
	active atomic.Bool   // between RollBack and Restore
	epoch  atomic.Uint64 // the last rollback's epoch
}

// rolledBackErr is the error of a call the rollback refused.
func (p *Proc) rolledBackErr() error {
	return fmt.Errorf("mpi: rank %d: %w (epoch %d)", p.rank, ErrRolledBack, p.rb.epoch.Load())
}

// RollingBack reports whether a rollback interrupted this Proc and it was
// not restored yet.
func (p *Proc) RollingBack() bool { return p.rb.active.Load() }

// RollBack interrupts this rank for the job's rollback numbered epoch (the
// same at every rank, growing): see above. It returns once the rank owns
// no connection or listener. A second call before Restore does nothing.
func (p *Proc) RollBack(epoch uint64) error {
	if p.isStopped() {
		return p.stopErr()
	}
	if !p.rb.active.CompareAndSwap(false, true) {
		return nil
	}
	p.rb.epoch.Store(epoch)
	err := p.rolledBackErr()
	// Sends queued to the writers are abandoned: a writer finishing the
	// frame it is writing sees its connection closed below.
	for _, pe := range p.peers {
		pe.mu.Lock()
		q := pe.queue
		pe.queue = nil
		pe.mu.Unlock()
		for _, op := range q {
			op.finish(err)
		}
	}
	p.mu.Lock()
	var reqs []*Request
	for _, cs := range p.ctxs {
		reqs = cs.emptyLocked(reqs)
	}
	p.mu.Unlock()
	for _, r := range reqs {
		r.complete(Status{}, err)
	}
	p.failWake.wake()
	p.wakeFlags()
	if p.size > 1 {
		p.disconnect()
	}
	p.susp.mu.Lock()
	p.susp.listening = false
	p.susp.mu.Unlock()
	p.log.Info("rolled back: every operation interrupted", "epoch", epoch)
	return nil
}

// Restore ends a rollback: the library takes state (SaveState's bytes of
// the sequence the job returns to, ReadLibraryState of this rank's local
// snapshot), listens again and meets every rank in the rollback's address
// exchange, then the program's calls go on. The program's creation calls
// replay the saved log until EndReplay (package cr ends it at the saved
// safe point). When it fails the rank stays rolled back.
func (p *Proc) Restore(ctx context.Context, state []byte) error {
	if !p.rb.active.Load() {
		return fmt.Errorf("mpi: restore: %w: no rollback under way", ErrArg)
	}
	if _, err := decodeState(state); err != nil {
		return fmt.Errorf("mpi: restore: %w", err)
	}
	key, err := helloKeyAt(p.boot.Secret(), p.job, p.rb.epoch.Load())
	if err != nil {
		return fmt.Errorf("mpi: restore: %w", err)
	}
	p.helloKey.Store(&key)
	p.resetLibrary()
	if err := p.restoreState(state, true); err != nil {
		return fmt.Errorf("mpi: restore: %w", err)
	}
	// The protocol counts from the restored totals, as after Init.
	if m := p.CRCP(); m != nil {
		p.SetCRCP(m)
	}
	if p.size > 1 {
		s := &p.susp
		s.mu.Lock()
		s.epoch = p.rb.epoch.Load()
		err := p.reconnect(ctx)
		s.mu.Unlock()
		if err != nil {
			return fmt.Errorf("mpi: restore after rollback %d: %w", p.rb.epoch.Load(), err)
		}
	}
	p.rb.active.Store(false)
	p.log.Info("restored in place", "epoch", p.rb.epoch.Load())
	return nil
}

// resetLibrary forgets everything the abandoned epoch left: matching
// state, sequence numbers and totals, communicators but the world's,
// failures, agreements. The Proc then holds what a new Proc holds before
// restoreState.
func (p *Proc) resetLibrary() {
	p.commMu.Lock()
	for h, c := range p.comms {
		if h != ctxWorld {
			c.freed.Store(true)
			delete(p.comms, h)
		}
	}
	p.clog, p.nextCtx, p.replay = nil, firstUserCtx, nil
	for _, c := range []*Comm{p.world, p.control} {
		c.collMu.Lock()
		c.collSeq = 0
		c.collMu.Unlock()
		c.ftSeq.Store(0)
		c.revokeSent.Store(false)
		c.ackMu.Lock()
		c.acked = 0
		c.ackMu.Unlock()
	}
	p.commMu.Unlock()
	p.mu.Lock()
	for _, cs := range p.ctxs {
		clear(cs.recvSeq)
		cs.revoked.Store(false)
		cs.revokeFrom = 0
	}
	p.mu.Unlock()
	for _, pe := range p.peers {
		pe.mu.Lock()
		for _, cs := range p.ctxs {
			if pe.rank < len(cs.sendSeq) {
				cs.sendSeq[pe.rank] = 0
			}
		}
		pe.mu.Unlock()
		pe.failErr.Store(nil)
		pe.gone.Store(nil)
		pe.sent.Store(0)
		pe.recvd.Store(0)
	}
	p.nFailed.Store(0)
	p.fails.mu.Lock()
	p.fails.order = nil
	p.fails.mu.Unlock()
	p.agrees.mu.Lock()
	p.agrees.boxes, p.agrees.floor = nil, nil
	p.agrees.mu.Unlock()
}

// handleRollback interrupts the rank as soon as the runtime's Rollback
// request arrives, whatever the program does and whether or not package
// cr has attached yet; the request then goes on to cr, which restores the
// rank when the program returns to its re-entry point.
func (p *Proc) handleRollback(r snapc.AppRequest) {
	if r.Kind != snapc.Rollback {
		return
	}
	if err := p.RollBack(r.Target); err != nil {
		p.log.Warn("rollback: could not interrupt the rank", "epoch", r.Target, "err", err)
	}
}
