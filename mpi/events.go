package mpi

import (
	"fmt"
	"sync"
)

// Failure events for the application: every failure the process learns
// of (the runtime's report through the Bootstrap's FailureNotifier, a
// connection that broke, Proc.MarkFailed) passes through failPeer, which
// publishes it here once, and each subscriber's own goroutine hands it to
// the subscriber's channel. The library never waits for a subscriber.

// Failure is a failure this process learned of.
type Failure struct {
	Rank  int   // the failed process's world rank
	Cause error // how this process learned of it: the runtime's report, or the connection's error
}

func (f Failure) String() string { return fmt.Sprintf("rank %d failed: %v", f.Rank, f.Cause) }

// failureEvents is a Proc's subscribers to failures; the zero value has
// none.
type failureEvents struct {
	mu   sync.Mutex
	subs map[chan<- Failure]*failureSub
}

// failureSub is one subscriber: the failures not yet delivered, in the
// order learned, and the ranks it was told of (each failure once).
type failureSub struct {
	ch   chan<- Failure
	mu   sync.Mutex
	q    []Failure
	seen map[int]bool
	wake chan struct{} // one token: q grew
	stop chan struct{} // closed by StopFailures
	done chan struct{} // closed when its goroutine ended
}

// put queues f unless the subscriber was told of f.Rank already.
func (s *failureSub) put(f Failure) {
	s.mu.Lock()
	if s.seen[f.Rank] {
		s.mu.Unlock()
		return
	}
	s.seen[f.Rank] = true
	s.q = append(s.q, f)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// next takes the oldest undelivered failure.
func (s *failureSub) next() (Failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.q) == 0 {
		return Failure{}, false
	}
	f := s.q[0]
	s.q[0] = Failure{}
	s.q = s.q[1:]
	return f, true
}

// deliver hands the queued failures to the subscriber's channel, in
// order, until StopFailures or the Proc's end (done). Its owner is the
// subscription.
func (s *failureSub) deliver(done <-chan struct{}) {
	defer close(s.done)
	for {
		f, ok := s.next()
		if !ok {
			select {
			case <-s.wake:
				continue
			case <-s.stop:
				return
			case <-done:
				return
			}
		}
		select {
		case s.ch <- f:
		case <-s.stop:
			return
		case <-done:
			return
		}
	}
}

// publish tells every subscriber of a failure (failPeer, once per rank).
func (p *Proc) publishFailure(e *ProcFailedError) {
	p.events.mu.Lock()
	defer p.events.mu.Unlock()
	for _, s := range p.events.subs {
		s.put(Failure{Rank: e.Rank, Cause: e.Cause})
	}
}

// NotifyFailures makes p send to ch every failure of another process it
// learns of, in the order it learns of them, whether the application is
// in an MPI call or computing: the ranks the runtime declares failed (the
// job runs on after a failure under errmgr sustain, or gompid killed an
// unresponsive rank) and the peers whose connection broke. Failures known
// before the call are sent first. Each failed rank is sent once per
// channel.
//
// As with os/signal.Notify, the library never blocks on ch: a goroutine
// of the subscription sends, and the failures ch is not ready for wait in
// an unbounded queue, so a slow reader misses none and delays nothing but
// itself. Calling it again with the same channel changes nothing. The
// sending ends with StopFailures or when p ends (Finalize, or Init's
// context); failures not yet received then are dropped. ch is never
// closed.
//
//	failures := make(chan mpi.Failure, 1)
//	p.NotifyFailures(failures)
//	defer p.StopFailures(failures)
//	go func() {
//		for f := range failures {
//			log.Printf("rank %d is gone: %v", f.Rank, f.Cause)
//		}
//	}()
func (p *Proc) NotifyFailures(ch chan<- Failure) {
	if ch == nil {
		panic("mpi: NotifyFailures with a nil channel")
	}
	p.events.mu.Lock()
	defer p.events.mu.Unlock()
	if _, ok := p.events.subs[ch]; ok {
		return
	}
	s := &failureSub{ch: ch, seen: map[int]bool{}, wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	// Under events.mu no failure is published meanwhile; one learned but
	// not yet published is in the log already and seen dedups it.
	for _, r := range p.fails.snapshot() {
		if e := p.peers[r].failErr.Load(); e != nil {
			s.put(Failure{Rank: r, Cause: e.Cause})
		}
	}
	if p.events.subs == nil {
		p.events.subs = map[chan<- Failure]*failureSub{}
	}
	p.events.subs[ch] = s
	go s.deliver(p.done)
}

// StopFailures ends NotifyFailures for ch and returns once nothing more
// will be sent on it. A channel never registered is ignored.
func (p *Proc) StopFailures(ch chan<- Failure) {
	p.events.mu.Lock()
	s := p.events.subs[ch]
	delete(p.events.subs, ch)
	p.events.mu.Unlock()
	if s == nil {
		return
	}
	close(s.stop)
	<-s.done
}

// NotifyFailures is Proc.NotifyFailures of the default Proc; it panics
// before Init.
func NotifyFailures(ch chan<- Failure) { mustDefault().NotifyFailures(ch) }

// StopFailures is Proc.StopFailures of the default Proc; it panics before
// Init.
func StopFailures(ch chan<- Failure) { mustDefault().StopFailures(ch) }
