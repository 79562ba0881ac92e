package mpi

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Status describes a received (or probed) message.
type Status struct {
	Source int // rank of the sender in the communicator
	Tag    int
	Count  int // length of the message in bytes
	// Cancelled says a receive was withdrawn by Request.Cancel.
	Cancelled bool
}

type reqKind uint8

const (
	reqRecv reqKind = iota + 1
	reqSend
	reqColl
)

// Request is a non-blocking operation in flight. It is owned by the
// library: the application only waits on it or tests it, any number of
// times; once complete it keeps its status and error.
type Request struct {
	p    *Proc
	kind reqKind
	// done is closed on completion (or, for the library's own blocking
	// receives, signalled once, so the request can be pooled).
	done   chan struct{}
	pooled bool
	status Status
	err    error

	// receives: matching fields, set before posting and read under p.mu
	comm *Comm
	cs   *ctxState
	src  int // world rank or AnySource
	tag  int
	buf  []byte
	// inner is the receive a wrapping request (IrecvBuf's) completes
	// after: what Cancel withdraws.
	inner *Request
	// anyN numbers an AnySource receive of a replicated job on its
	// context (replica_any.go); 0 otherwise.
	anyN uint64
}

func newRequest(p *Proc, kind reqKind) *Request {
	return &Request{p: p, kind: kind, done: make(chan struct{})}
}

// complete records the outcome and wakes the waiter. Nothing may touch r
// after it: a pooled request may already be reused.
func (r *Request) complete(st Status, err error) {
	r.status, r.err = st, err
	if r.pooled {
		r.done <- struct{}{}
		return
	}
	close(r.done)
}

// waitSpin is how long a waiter polls its request before it parks on the
// request's channel. With more than one Go processor (GOMAXPROCS > 1) the
// reader goroutine that completes the request runs on another thread, and
// completing a parked waiter wakes a thread with a futex (several µs, more
// than a small message takes to cross the node); a waiter that polls,
// yielding between looks, is found runnable instead. The transports poll
// their sockets for as long (btl_tcp_poll's default). Only when the
// node has a processor for every rank's every Go processor: otherwise
// the polling threads take the cores the ranks being waited for need
// (measured with GOMAXPROCS=2 for 2 ranks on 2 loaded cores: 8 B latency
// 122-174 µs against 94-111 µs without the waiter's poll).
//
// With one processor (GOMAXPROCS=1, what the launcher gives ranks that
// fill a node) the waiter does not poll: the reader goroutine, polling
// its socket and yielding, keeps the one thread busy, so completing the
// parked waiter is a hand-off on that thread without a wake-up; and a
// waiter yielding in a loop would keep the scheduler from ever looking at
// the network poller, where a reader whose poll budget ran out sleeps:
// its message would wait for the waiter's budget to run out (measured
// on 2 loaded cores, 2 ranks: 8 B latency 134-145 µs against 99-106 µs
// without the waiter's poll).
const waitSpin = 50 * time.Microsecond

// spin polls done, yielding the processor between looks, for up to
// waitSpin, and reports whether it received from done (for a pooled
// request, that consumed the completion signal). It does not poll where
// p.spinOK says no (see waitSpin).
func (p *Proc) spin(done <-chan struct{}) bool {
	osYield := p.osYield.Load()
	if !p.spinOK.Load() && !osYield {
		return false
	}
	var deadline time.Time
	for i := 1; ; i++ {
		select {
		case <-done:
			return true
		default:
		}
		// Look at the clock rarely: a look costs more than a poll.
		if i%8 == 0 {
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(waitSpin)
			} else if now.After(deadline) {
				return false
			}
		}
		if osYield {
			syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
		} else {
			runtime.Gosched()
		}
	}
}

// CalledFromC tells the library that its blocking calls come from threads
// Go did not create (a C program, through package capi). Such a caller
// runs locked to its thread: a wait that parks it costs a futex wake-up
// and a hand-off of its Go processor (tens of µs), and one that yields the
// goroutine hands the processor off at every look. Its waits therefore
// poll their request yielding the OS thread instead, for waitSpin, before
// they park, whatever the node's processors (a yield gives the core to any
// thread that wants it). Measured with 2 C ranks on 2 loaded cores:
// Allreduce of 8 B from 57-91 µs to 31 µs.
func (p *Proc) CalledFromC() { p.osYield.Store(true) }

var recvPool = sync.Pool{New: func() any { return &Request{kind: reqRecv, pooled: true, done: make(chan struct{}, 1)} }}

// Wait blocks until the request completes and returns its status and
// error. It returns early with an error wrapping ErrStopped if the Proc
// stops (see WaitCtx for a caller's deadline). On an AnySource receive
// it returns an error wrapping ErrProcFailedPending while a member of
// the communicator failed unacknowledged (at once, or when the failure
// happens during the wait); the request stays active (anysource.go).
func (r *Request) Wait() (Status, error) {
	return r.WaitCtx(context.Background())
}

// WaitCtx is Wait bounded by ctx. When ctx ends first it returns ctx's
// error; the request stays pending and may be waited on again.
func (r *Request) WaitCtx(ctx context.Context) (Status, error) {
	if r == nil {
		return Status{}, nil
	}
	select {
	case <-r.done:
		return r.status, r.err
	default:
	}
	// Watch before looking, so a failure between the look and the wait
	// still wakes it.
	failed := r.failWatch()
	if err := r.pendingFailure(); err != nil {
		return Status{}, err
	}
	r.p.waiting.Add(1)
	defer r.p.waiting.Add(-1)
	if r.p.spin(r.done) {
		return r.status, r.err
	}
	for {
		select {
		case <-r.done:
			return r.status, r.err
		case <-r.p.done:
			return r.stopped()
		case <-failed:
			failed = r.failWatch()
			if err := r.pendingFailure(); err != nil {
				return Status{}, err
			}
		case <-ctx.Done():
			select {
			case <-r.done:
				return r.status, r.err
			default:
			}
			return Status{}, fmt.Errorf("mpi: wait: %w", ctx.Err())
		}
	}
}

// await is Wait without ULFM's pending rule: the library's own waits for
// a request to end (a wrapping request's goroutine) wait it out.
func (r *Request) await() (Status, error) {
	select {
	case <-r.done:
		return r.status, r.err
	case <-r.p.done:
		return r.stopped()
	}
}

// stopped reports the Proc's stop unless the request completed meanwhile.
func (r *Request) stopped() (Status, error) {
	select {
	case <-r.done:
		return r.status, r.err
	default:
	}
	return Status{}, r.p.stopErr()
}

// Test reports whether the request is complete, with its status and
// error. An incomplete AnySource receive reports an error wrapping
// ErrProcFailedPending while its communicator has unacknowledged
// failures (as Wait does), and stays active.
func (r *Request) Test() (Status, bool, error) {
	if r == nil {
		return Status{}, true, nil
	}
	select {
	case <-r.done:
		return r.status, true, r.err
	default:
		return Status{}, false, r.pendingFailure()
	}
}

// Waitall waits for every request (nil ones are skipped) and returns their
// statuses in order, with every error joined.
func Waitall(reqs []*Request) ([]Status, error) {
	sts := make([]Status, len(reqs))
	var errs []error
	for i, r := range reqs {
		st, err := r.Wait()
		sts[i] = st
		if err != nil {
			errs = append(errs, fmt.Errorf("request %d: %w", i, err))
		}
	}
	return sts, errors.Join(errs...)
}

// Waitany waits until one of the requests completes and returns its index,
// status and error. Nil requests are skipped; with none left it returns
// index -1 at once (MPI_UNDEFINED). An AnySource receive whose failure is
// pending (see Wait) is returned, still active, with that error.
func Waitany(reqs []*Request) (int, Status, error) {
	var p *Proc
	watch := false
	for _, r := range reqs {
		if r != nil {
			p = r.p
			watch = watch || r.anySourceRecv() != nil
		}
	}
	if p == nil {
		return -1, Status{}, nil
	}
	for {
		var failed <-chan struct{}
		if watch {
			failed = p.failWake.watch()
		}
		if i, st, err, ok := anyDone(reqs); ok {
			return i, st, err
		}
		cases := make([]reflect.SelectCase, 0, len(reqs)+2)
		idx := make([]int, 0, len(reqs))
		for i, r := range reqs {
			if r != nil {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(r.done)})
				idx = append(idx, i)
			}
		}
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.done)})
		if failed != nil {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(failed)})
		}
		p.waiting.Add(1)
		chosen, _, _ := reflect.Select(cases)
		p.waiting.Add(-1)
		switch {
		case chosen == len(idx):
			return -1, Status{}, p.stopErr()
		case chosen < len(idx):
			r := reqs[idx[chosen]]
			return idx[chosen], r.status, r.err
		}
	}
}

// anyDone returns the first complete request, or the first whose failure
// is pending (ok set either way).
func anyDone(reqs []*Request) (int, Status, error, bool) {
	for i, r := range reqs {
		if r == nil {
			continue
		}
		select {
		case <-r.done:
			return i, r.status, r.err, true
		default:
		}
	}
	for i, r := range reqs {
		if r == nil {
			continue
		}
		if err := r.pendingFailure(); err != nil {
			return i, Status{}, err, true
		}
	}
	return 0, Status{}, nil, false
}

// Testall reports whether every request is complete.
func Testall(reqs []*Request) bool {
	for _, r := range reqs {
		if _, ok, _ := r.Test(); !ok {
			return false
		}
	}
	return true
}

// Then returns a request that completes once r has and then has run: a
// caller that lent a non-blocking operation staging memory (the C
// interface, for a datatype with holes) copies the result out of it
// before its waiter sees the request complete. then runs only when r
// succeeded; its error becomes the request's. A goroutine per call owns
// the wait and ends with r (or when the Proc stops).
func (r *Request) Then(then func() error) *Request {
	out := newRequest(r.p, reqColl)
	go func() {
		st, err := r.await()
		if err == nil {
			err = then()
		}
		out.complete(st, err)
	}()
	return out
}
