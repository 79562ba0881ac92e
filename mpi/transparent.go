package mpi

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"gompi/frameworks/snapc"
)

// A transparent checkpoint (a CRS that dumps the rank from outside, such
// as criu) needs nothing from the program: the library answers the job's
// Quiesce request by itself, on its own goroutine, whatever the
// application goroutines are doing. It suspends the rank (Suspend: every
// rank drains its channels with the others and closes its sockets), has
// the runtime detach from gompid and say it is ready on its lifeline
// (Pauser.Pause, which returns once gompid's word came: go on, or this is
// a process restored from the dump), and resumes (Resume: new addresses,
// same communicators and requests). Suspensions are numbered by the
// request's sequence plus one: every rank gets the same number, and it
// only grows, across restarts too. A Cancel of the request given before
// the rank is quiet withdraws it: the rank stays as it was and tells
// gompid it gave up (Pauser.Refuse).

// Pauser is implemented by a Bootstrap whose runtime lets gompid dump the
// rank from outside (the rank client, when gompid gave it a lifeline).
type Pauser interface {
	// Pause detaches from the runtime, says the rank is ready to be
	// dumped for request id and waits for the word to go on; restarted
	// reports that this process is one restored from the dump.
	Pause(ctx context.Context, id uint64) (restarted bool, err error)
	// Refuse says the rank could not be quiesced for request id.
	Refuse(id uint64, reason string) error
}

// quiesceState holds the transparent quiesces under way, by request, so
// that a Cancel can withdraw one.
type quiesceState struct {
	mu     sync.Mutex
	cancel map[uint64]context.CancelFunc
}

// handleQuiesce takes the requests of a transparent checkpoint: a
// Quiesce, and a Cancel of one under way. It reports whether r was one;
// the others go to package cr's coordinator as before.
func (p *Proc) handleQuiesce(r snapc.AppRequest) bool {
	q := &p.quiesce
	switch r.Kind {
	case snapc.Quiesce:
	case snapc.Cancel:
		q.mu.Lock()
		cancel, ok := q.cancel[r.ID]
		q.mu.Unlock()
		if ok {
			cancel()
		}
		return ok
	default:
		return false
	}
	pauser, ok := p.boot.(Pauser)
	if !ok {
		p.log.Warn("asked to quiesce for a transparent checkpoint, but the runtime cannot pause this rank", "request", r.ID)
		return true
	}
	if p.isStopped() {
		p.refuse(pauser, r.ID, fmt.Errorf("rank %d has stopped (finalized or aborted)", p.rank))
		return true
	}
	ctx, cancel := context.WithCancel(context.Background())
	q.mu.Lock()
	if q.cancel == nil {
		q.cancel = map[uint64]context.CancelFunc{}
	}
	q.cancel[r.ID] = cancel
	q.mu.Unlock()
	// The goroutine is the library's, owned by the Proc: it ends with the
	// quiesce (resumed, refused, or the rank aborted).
	go func() {
		defer func() {
			q.mu.Lock()
			delete(q.cancel, r.ID)
			q.mu.Unlock()
			cancel()
		}()
		p.quiesceFor(ctx, pauser, r)
	}()
	return true
}

// quiesceFor suspends the rank for request r, pauses it while gompid
// dumps it, and resumes it. Once the rank said it is ready it has no
// connection to gompid nor to its peers: if it cannot go on (gompid gone,
// the new addresses not exchanged), the rank ends.
func (p *Proc) quiesceFor(ctx context.Context, pauser Pauser, r snapc.AppRequest) {
	q, err := p.Suspend(ctx, uint64(r.Seq)+1)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			err = fmt.Errorf("the checkpoint was withdrawn: %w", err)
		}
		p.refuse(pauser, r.ID, err)
		return
	}
	p.log.Debug("quiesced for a transparent checkpoint", "request", r.ID, "seq", r.Seq, "took", q.Took)
	// No bound on the wait: gompid's word comes after the dump (after the
	// commit with --term), and a gompid that dies closes the lifeline.
	restarted, err := pauser.Pause(context.Background(), r.ID)
	if err != nil {
		p.boot.Abort(1, fmt.Sprintf("rank %d: transparent checkpoint %d: %v", p.rank, r.ID, err))
		return
	}
	// The suspension's context is the request's, ended by a late Cancel;
	// the resume is not to be given up.
	if err := p.Resume(context.Background()); err != nil {
		p.boot.Abort(1, fmt.Sprintf("rank %d: resume after transparent checkpoint %d: %v", p.rank, r.ID, err))
		return
	}
	p.log.Debug("resumed after a transparent checkpoint", "request", r.ID, "restarted", restarted)
}

// refuse tells gompid the rank could not be quiesced.
func (p *Proc) refuse(pauser Pauser, id uint64, why error) {
	reason := fmt.Sprintf("rank %d: %v", p.rank, why)
	if err := pauser.Refuse(id, reason); err != nil {
		p.log.Warn("could not tell gompid this rank cannot be quiesced", "request", id, "reason", reason, "err", err)
	}
}
