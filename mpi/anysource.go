package mpi

import (
	"fmt"
	"sync"
)

// ULFM's rules for AnySource receives once a member of the communicator
// failed. A blocking one (Recv, Probe, Iprobe) fails with ErrProcFailed
// while the communicator has a failure the application has not
// acknowledged (Comm.AckFailed), and waits normally once all are. A
// non-blocking one (Irecv) stays posted: Wait and Test report an error
// wrapping ErrProcFailedPending while unacknowledged failures exist and
// leave the request active, so a matching message still completes it and
// Cancel still withdraws it. Receives naming a failed source, and
// collectives, fail as before.

// wakeup is a broadcast that can be waited on: every wake closes the
// channel the waiters got and the next waiters get a new one.
type wakeup struct {
	mu sync.Mutex
	ch chan struct{}
}

// watch returns a channel closed at the next wake.
func (w *wakeup) watch() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

func (w *wakeup) wake() {
	w.mu.Lock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
	w.mu.Unlock()
}

// unackedFailure returns the error of the first failure of c's members
// the application has not acknowledged on c, nil when there is none.
func (c *Comm) unackedFailure() error {
	failed := c.failedRanks()
	c.ackMu.Lock()
	n := c.acked
	c.ackMu.Unlock()
	if n >= len(failed) {
		return nil
	}
	if err := c.p.peers[c.members[failed[n]]].failure(); err != nil {
		return err
	}
	return &ProcFailedError{Rank: c.members[failed[n]]}
}

// anySourceRecv returns the non-blocking AnySource receive on a
// point-to-point context that r is or wraps (IrecvBuf's), nil when it is
// none: the requests ULFM's pending rule applies to.
func (r *Request) anySourceRecv() *Request {
	t := r
	if r.inner != nil {
		t = r.inner
	}
	if t.kind != reqRecv || t.pooled || t.src != AnySource || t.cs == nil || t.cs.coll || t.comm == nil {
		return nil
	}
	return t
}

// pendingFailure returns the error wrapping ErrProcFailedPending that
// Wait and Test report for an incomplete AnySource receive whose
// communicator has unacknowledged failures; nil otherwise.
func (r *Request) pendingFailure() error {
	t := r.anySourceRecv()
	if t == nil || t.p.nFailed.Load() == 0 {
		return nil
	}
	select {
	case <-r.done:
		return nil
	default:
	}
	err := t.comm.unackedFailure()
	if err == nil {
		return nil
	}
	return fmt.Errorf("mpi: wait: %w (acknowledge with Comm.AckFailed to wait on): %v", ErrProcFailedPending, err)
}

// failWatch returns a channel closed at the next failure this process
// learns of, when r is an AnySource receive the pending rule applies to;
// nil (never ready) otherwise.
func (r *Request) failWatch() <-chan struct{} {
	if r.anySourceRecv() == nil {
		return nil
	}
	return r.p.failWake.watch()
}
