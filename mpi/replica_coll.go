package mpi

import (
	"fmt"
	"sync"
)

// A reduction's result in a replicated job (replica.go): both copies of a
// rank run every collective over the same messages, but a reduction's
// result need not be bit-identical between them (a coll module may choose
// its tree by where the processes run, and the copies run elsewhere), and
// a copy whose state drifted would be promoted one day. So the primary's
// result is the rank's: once Reduce (at its root) or Allreduce is done,
// the primary hands its result to its replica, which waits for it and
// takes it in place of its own. A replica whose primary is lost before
// handing it keeps its own (the results it did hand stand); a primary
// whose replica is lost hands nothing.

// handState is the results handed to a replica and not yet taken.
type handState struct {
	mu   sync.Mutex
	got  map[handKey][]byte
	wait map[handKey]chan struct{}
	// gen changes when this process stops waiting for its primary's
	// results (it was promoted).
	gen chan struct{}
}

// handKey names a reduction: its communicator's handle and its number.
type handKey struct {
	comm uint64
	tag  int
}

func (h *handState) init() {
	h.got = map[handKey][]byte{}
	h.wait = map[handKey]chan struct{}{}
	h.gen = make(chan struct{})
}

// handoff makes recv, this copy's result of reduction tag on c, the
// rank's: the primary sends it to its replica, the replica waits for the
// primary's and copies it into recv.
func (r *replication) handoff(c *Comm, tag int, recv []byte) error {
	k := handKey{c.handle, tag}
	h := &r.hand
	part := r.partner()
	if r.leads() {
		h.mu.Lock()
		data, ok := h.got[k]
		delete(h.got, k)
		h.mu.Unlock()
		if ok && len(data) == len(recv) {
			// Handed by the primary this process replaced.
			copy(recv, data)
		}
		if part >= 0 {
			r.ctl(part, repHand, tag, c.handle, append([]byte(nil), recv...))
		}
		return nil
	}
	h.mu.Lock()
	data, ok := h.got[k]
	var ch chan struct{}
	gen := h.gen
	if !ok {
		ch = make(chan struct{})
		h.wait[k] = ch
	}
	h.mu.Unlock()
	if !ok {
		select {
		case <-ch:
		case <-gen:
		case <-r.p.done:
			return r.p.stopErr()
		}
		h.mu.Lock()
		data, ok = h.got[k]
		delete(h.wait, k)
		h.mu.Unlock()
	}
	h.mu.Lock()
	delete(h.got, k)
	h.mu.Unlock()
	if !ok {
		return nil // promoted: this copy's result is the rank's now
	}
	if len(data) != len(recv) {
		return fmt.Errorf("mpi: replication: the primary's result has %d bytes, this copy's %d", len(data), len(recv))
	}
	copy(recv, data)
	return nil
}

// put takes a result the primary handed (h.seq: the communicator, h.tag:
// the reduction), on the reader goroutine.
func (h *handState) put(_ *peer, hd *header, data []byte) {
	k := handKey{hd.seq, int(hd.tag)}
	h.mu.Lock()
	h.got[k] = data
	ch := h.wait[k]
	h.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// promoted ends the waits for a primary's results: this process is the
// primary now. Results the dead primary handed are still taken.
func (h *handState) promoted() {
	h.mu.Lock()
	close(h.gen)
	h.gen = make(chan struct{})
	h.mu.Unlock()
}
