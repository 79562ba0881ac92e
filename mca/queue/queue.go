// Package queue is the one unbounded, ordered queue of gompi's
// long-lived actors: a producer that must never block on a slow consumer
// (gompirun's mailbox to each daemon, a daemon's requests to a rank's
// checkpoint coordinator and its failure notices to a rank, the snapshot
// coordinator's pending checkpoint requests) puts into a Queue, and the
// one goroutine that owns the consumer end pops with a context.
//
// It lives under mca because mca is the one layer every other layer may
// import: frameworks import mca and nothing of rte or components, rte and
// components import frameworks and mca. A queue under rte could not be used
// by a framework's shared code, and one in a component could not be used
// by rte. It imports only the standard library.
//
// Ownership: any goroutine may Put, Wake and Close; the queue's owner —
// the goroutine that drains it, named where each queue is made — is the
// one that pops. Several poppers are safe but share the items.
package queue

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// ErrClosed is returned by the pops once the queue is closed and every
// item queued before Close has been taken.
var ErrClosed = errors.New("queue: closed")

// Queue is an unbounded FIFO queue. Make one with New.
type Queue[T any] struct {
	mu     sync.Mutex
	items  []T
	closed bool
	// changed is closed (and dropped) when an item arrives, the queue
	// closes, or Wake is called; nil while nobody waits.
	changed chan struct{}
}

// New returns an empty, open queue.
func New[T any]() *Queue[T] { return &Queue[T]{} }

// Put appends v. It never blocks. Once the queue is closed it drops v and
// returns false.
func (q *Queue[T]) Put(v T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.items = append(q.items, v)
	q.signalLocked()
	return true
}

// Close ends the queue: Put drops what comes after, and the pops return
// what was queued before, then ErrClosed. Closing twice is harmless.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.signalLocked()
}

// Wake makes a PopFunc blocked on items none of which was ready look at
// them again: call it when what its ready function reads has changed.
func (q *Queue[T]) Wake() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.signalLocked()
}

// Len is the number of queued items.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// Pop takes the oldest item. It returns at once while an item is queued,
// and otherwise blocks until one is put, the queue closes (ErrClosed), or
// ctx ends (ctx.Err()).
func (q *Queue[T]) Pop(ctx context.Context) (T, error) {
	return q.PopFunc(ctx, nil)
}

// PopFunc takes the oldest item for which ready reports true (nil: any
// item), blocking like Pop while there is none; items not ready keep their
// place. ready runs with the queue's lock held, so it must not call the
// queue, and it must read only state it may read from any goroutine; the
// code that changes that state calls Wake. Once the queue is closed ready
// is no longer asked: the items come back in order, ready or not, so the
// owner can end each of them.
func (q *Queue[T]) PopFunc(ctx context.Context, ready func(T) bool) (T, error) {
	q.mu.Lock()
	for {
		i := 0
		if ready != nil && !q.closed {
			i = slices.IndexFunc(q.items, ready)
		}
		if i >= 0 && i < len(q.items) {
			v := q.items[i]
			var zero T
			q.items[i] = zero // no reference kept for the collector
			q.items = slices.Delete(q.items, i, i+1)
			q.mu.Unlock()
			return v, nil
		}
		if q.closed {
			q.mu.Unlock()
			var zero T
			return zero, ErrClosed
		}
		changed := q.waitLocked()
		q.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
		q.mu.Lock()
	}
}

// PopAll takes every queued item, oldest first, blocking like Pop while
// the queue is empty: a consumer that sends in batches uses it.
func (q *Queue[T]) PopAll(ctx context.Context) ([]T, error) {
	q.mu.Lock()
	for len(q.items) == 0 {
		if q.closed {
			q.mu.Unlock()
			return nil, ErrClosed
		}
		changed := q.waitLocked()
		q.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		q.mu.Lock()
	}
	all := q.items
	q.items = nil
	q.mu.Unlock()
	return all, nil
}

// waitLocked returns the channel the next change closes. q.mu is held.
func (q *Queue[T]) waitLocked() <-chan struct{} {
	if q.changed == nil {
		q.changed = make(chan struct{})
	}
	return q.changed
}

// signalLocked wakes every waiter. q.mu is held.
func (q *Queue[T]) signalLocked() {
	if q.changed != nil {
		close(q.changed)
		q.changed = nil
	}
}
