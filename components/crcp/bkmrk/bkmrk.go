// Package crcpbkmrk is the bookmark-exchange coordination protocol (Hursey's
// bkmrk, after LAM/MPI): every rank counts the messages it sends to and
// receives from each peer; at a checkpoint the ranks exchange those
// counts (bookmarks) and each waits until it has received from every
// peer exactly what that peer says it sent. The library's reader
// goroutines take every message off the transport as it arrives, into
// the library's unexpected queue, so "draining" needs no receive to be
// posted: the drained messages are the unexpected ones, saved with the
// library's state and matched by later receives as if nothing happened.
//
// What this changes from Open MPI's bkmrk: no per-signature details are
// exchanged and no drain receives are posted, so receives with
// MPI_ANY_SOURCE or MPI_ANY_TAG play no part in the protocol (Open MPI's
// matched drained messages against posted wildcard receives and could hang,
// open-mpi/ompi#72); the bookmarks travel on the library's own ordered
// channels (after the data they count) instead of a separate out-of-band
// network; and a count received that exceeds the sender's bookmark is an
// error, not a warning.
package crcpbkmrk

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"gompi/frameworks/crcp"
	"gompi/frameworks/crs"
	"gompi/mca"
)

// Name of the component.
const Name = "bkmrk"

// Priority is the component's default priority, above none.
const Priority = 20

// New returns the bkmrk CRCP component.
func New() mca.Component[crcp.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: crcp.Name, Name: Name,
		Description: "Bookmark exchange: per-peer message counts exchanged at a checkpoint, channels drained into the library",
		Version:     "1.0.0",
		Priority:    Priority,
	}, query)
}

// query answers in ranks of a job with checkpoint/restart on; elsewhere
// it skips, so C/R off leaves the message path unwatched.
func query(_ context.Context, q mca.Query) (crcp.Module, int, error) {
	if err := q.SkipUnlessRankCR(crcp.Name, Name, "the protocol runs in ranks"); err != nil {
		return nil, 0, err
	}
	return NewModule(), q.Priority, nil
}

// Module is the protocol of one rank.
type Module struct {
	mu     sync.Mutex // serializes growth of counts
	counts atomic.Pointer[counts]
}

type counts struct {
	sent, recvd []atomic.Uint64 // per world rank
}

// NewModule returns a module with no messages counted.
func NewModule() *Module {
	m := &Module{}
	m.counts.Store(&counts{})
	return m
}

// SeedCounts sets the per-peer totals (the library's, restored ones after
// a restart); the mpi package calls it before installing the module.
func (m *Module) SeedCounts(sentTo, recvdFrom []uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := max(len(sentTo), len(recvdFrom))
	c := &counts{sent: make([]atomic.Uint64, n), recvd: make([]atomic.Uint64, n)}
	for i, v := range sentTo {
		c.sent[i].Store(v)
	}
	for i, v := range recvdFrom {
		c.recvd[i].Store(v)
	}
	m.counts.Store(c)
}

// grow makes room for rank (only when a module was not seeded).
func (m *Module) grow(rank int) *counts {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.counts.Load()
	if rank < len(old.sent) {
		return old
	}
	n := max(rank+1, 2*len(old.sent))
	c := &counts{sent: make([]atomic.Uint64, n), recvd: make([]atomic.Uint64, n)}
	for i := range old.sent {
		c.sent[i].Store(old.sent[i].Load())
		c.recvd[i].Store(old.recvd[i].Load())
	}
	m.counts.Store(c)
	return c
}

func (m *Module) at(rank int) *counts {
	c := m.counts.Load()
	if rank >= len(c.sent) {
		c = m.grow(rank)
	}
	return c
}

// Sent counts a message handed to the transport.
func (m *Module) Sent(e crcp.Envelope) { m.at(e.Dst).sent[e.Dst].Add(1) }

// Received counts a message taken off the transport.
func (m *Module) Received(e crcp.Envelope) { m.at(e.Src).recvd[e.Src].Add(1) }

// Counts returns the per-peer totals, for tests and diagnostics.
func (m *Module) Counts(size int) (sentTo, recvdFrom []uint64) {
	c := m.at(max(size-1, 0))
	sentTo, recvdFrom = make([]uint64, size), make([]uint64, size)
	for i := range size {
		sentTo[i], recvdFrom[i] = c.sent[i].Load(), c.recvd[i].Load()
	}
	return sentTo, recvdFrom
}

// FTEvent at StateCheckpoint exchanges the bookmarks and drains every
// channel into the library; the caller holds the application still (a
// safe point) so nothing new is sent meanwhile. Other states need
// nothing: the drained messages stay in the library's queue (continue)
// or come back with its state (restart), and the totals run on.
func (m *Module) FTEvent(ctx context.Context, state crs.State, ch crcp.Channels) error {
	if state != crs.StateCheckpoint {
		return nil
	}
	me, n := ch.Rank(), ch.Size()
	sentTo, _ := m.Counts(n)
	sentToMe, err := ch.Exchange(ctx, sentTo)
	if err != nil {
		return fmt.Errorf("crcp/bkmrk: rank %d: exchange bookmarks: %w", me, err)
	}
	for peer := range n {
		if peer == me {
			continue
		}
		if err := ch.Drain(ctx, peer, sentToMe[peer]); err != nil {
			return fmt.Errorf("crcp/bkmrk: rank %d: drain rank %d: %w", me, peer, err)
		}
	}
	_, recvd := m.Counts(n)
	for peer := range n {
		if peer != me && recvd[peer] != sentToMe[peer] {
			return fmt.Errorf("crcp/bkmrk: rank %d: received %d messages from rank %d, which bookmarked %d sent: it sent after its bookmark (a rank left the checkpoint early)",
				me, recvd[peer], peer, sentToMe[peer])
		}
	}
	return nil
}

// TransparentQuiesce tells the library to quiesce by counts for a
// transparent checkpoint (mpi.Proc.Suspend): the same bookmarks, kept by
// the library itself.
func (m *Module) TransparentQuiesce() crcp.Quiesce { return crcp.QuiesceCounts }

var (
	_ crcp.Module      = (*Module)(nil)
	_ crcp.Transparent = (*Module)(nil)
)
