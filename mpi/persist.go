package mpi

import (
	"errors"
	"fmt"
	"sync"
)

// Prequest is a persistent request (MPI_Send_init, MPI_Recv_init...): an
// operation with its arguments fixed once, started any number of times.
// Between a Start and the completion a Wait or Test observes it is
// active; otherwise inactive, and Wait and Test return at once with an
// empty status, as MPI says of an inactive persistent request.
type Prequest struct {
	start func() (*Request, error)
	mu    sync.Mutex
	cur   *Request // the active operation, nil when inactive
}

func (c *Comm) persistent(start func() (*Request, error)) (*Prequest, error) {
	if err := c.usable(); err != nil {
		return nil, err
	}
	return &Prequest{start: start}, nil
}

// SendInit makes a persistent Isend of buf to dst with tag.
func (c *Comm) SendInit(buf []byte, dst, tag int) (*Prequest, error) {
	return c.persistent(func() (*Request, error) { return c.Isend(buf, dst, tag) })
}

// SsendInit makes a persistent Issend.
func (c *Comm) SsendInit(buf []byte, dst, tag int) (*Prequest, error) {
	return c.persistent(func() (*Request, error) { return c.Issend(buf, dst, tag) })
}

// RsendInit makes a persistent Irsend.
func (c *Comm) RsendInit(buf []byte, dst, tag int) (*Prequest, error) {
	return c.persistent(func() (*Request, error) { return c.Irsend(buf, dst, tag) })
}

// BsendInit makes a persistent Ibsend.
func (c *Comm) BsendInit(buf []byte, dst, tag int) (*Prequest, error) {
	return c.persistent(func() (*Request, error) { return c.Ibsend(buf, dst, tag) })
}

// RecvInit makes a persistent Irecv into buf from src with tag.
func (c *Comm) RecvInit(buf []byte, src, tag int) (*Prequest, error) {
	return c.persistent(func() (*Request, error) { return c.Irecv(buf, src, tag) })
}

// SendBufInit and RecvBufInit are SendInit and RecvInit of a Buf.
func (c *Comm) SendBufInit(b Buf, dst, tag int) (*Prequest, error) {
	return c.persistent(func() (*Request, error) { return c.IsendBuf(b, dst, tag) })
}

// SsendBufInit, RsendBufInit and BsendBufInit are SsendInit, RsendInit
// and BsendInit of a Buf: b is packed at each start.
func (c *Comm) SsendBufInit(b Buf, dst, tag int) (*Prequest, error) {
	return c.persistent(func() (*Request, error) { return c.IssendBuf(b, dst, tag) })
}

// RsendBufInit is RsendInit of a Buf.
func (c *Comm) RsendBufInit(b Buf, dst, tag int) (*Prequest, error) {
	return c.persistent(func() (*Request, error) { return c.IrsendBuf(b, dst, tag) })
}

// BsendBufInit is BsendInit of a Buf.
func (c *Comm) BsendBufInit(b Buf, dst, tag int) (*Prequest, error) {
	return c.persistent(func() (*Request, error) { return c.IbsendBuf(b, dst, tag) })
}

// RecvBufInit is RecvInit of a Buf.
func (c *Comm) RecvBufInit(b Buf, src, tag int) (*Prequest, error) {
	return c.persistent(func() (*Request, error) { return c.IrecvBuf(b, src, tag) })
}

// Start starts the operation; starting an active request is an error.
func (q *Prequest) Start() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cur != nil {
		return fmt.Errorf("mpi: start: %w: the persistent request is active", ErrArg)
	}
	r, err := q.start()
	if err != nil {
		return err
	}
	q.cur = r
	return nil
}

// Startall starts every request, in order; it stops at the first error.
func Startall(qs []*Prequest) error {
	for i, q := range qs {
		if err := q.Start(); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
	}
	return nil
}

// Active reports whether the request was started and not yet observed
// complete.
func (q *Prequest) Active() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.cur != nil
}

// Request is the active operation's request (nil when inactive): what
// Waitany and the other calls over many requests take. Completing it
// there leaves q active until q's own Wait or Test observes it.
func (q *Prequest) Request() *Request {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.cur
}

// Wait waits for the active operation and makes the request inactive.
func (q *Prequest) Wait() (Status, error) {
	r := q.Request()
	if r == nil {
		return Status{}, nil
	}
	st, err := r.Wait()
	if err == nil || !(errors.Is(err, ErrStopped) || errors.Is(err, ErrProcFailedPending)) {
		q.finish(r)
	}
	return st, err
}

// Test reports whether the active operation is complete; if so the
// request becomes inactive.
func (q *Prequest) Test() (Status, bool, error) {
	r := q.Request()
	if r == nil {
		return Status{}, true, nil
	}
	st, ok, err := r.Test()
	if ok {
		q.finish(r)
	}
	return st, ok, err
}

// Cancel cancels the active operation (a receive not matched yet).
func (q *Prequest) Cancel() error { return q.Request().Cancel() }

func (q *Prequest) finish(r *Request) {
	q.mu.Lock()
	if q.cur == r {
		q.cur = nil
	}
	q.mu.Unlock()
}
