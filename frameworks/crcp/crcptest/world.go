package crcptest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"gompi/frameworks/crcp"
	"gompi/frameworks/crs"
)

// World is a simulated job of n ranks, each with its own module: the
// library (what each rank has taken off the transport) and the
// transport (what is in flight, FIFO per ordered pair of ranks). The
// message path calls the modules as mpi does: Sent when a message is
// handed to the transport, Received when it is taken off.
type World struct {
	mods []crcp.Module

	mu        sync.Mutex
	seq       [][]uint64          // [src][dst] messages sent so far
	inflight  [][][]crcp.Envelope // [src][dst] on the transport
	library   [][][]crcp.Envelope // [dst][src] taken off, in arrival order
	round     *exchangeRound
	exchanges int
	failWith  error
}

type exchangeRound struct {
	sent    [][]uint64 // [rank] what each rank said it sent to each peer
	arrived int
	done    chan struct{}
}

// NewWorld returns a job whose rank r runs mods[r], nothing sent.
func NewWorld(mods []crcp.Module) *World {
	n := len(mods)
	w := &World{mods: mods, seq: make([][]uint64, n), inflight: make([][][]crcp.Envelope, n), library: make([][][]crcp.Envelope, n)}
	for i := range n {
		w.seq[i] = make([]uint64, n)
		w.inflight[i] = make([][]crcp.Envelope, n)
		w.library[i] = make([][]crcp.Envelope, n)
	}
	return w
}

// Size is the number of ranks.
func (w *World) Size() int { return len(w.mods) }

// Send hands one message from src to dst to the transport.
func (w *World) Send(src, dst, tag int) {
	w.mu.Lock()
	w.seq[src][dst]++
	e := crcp.Envelope{Context: 1, Src: src, Dst: dst, Tag: tag, Seq: w.seq[src][dst], Size: tag % 64}
	w.inflight[src][dst] = append(w.inflight[src][dst], e)
	w.mu.Unlock()
	w.mods[src].Sent(e)
}

// Deliver takes up to k messages from src off dst's transport into dst's
// library and returns how many it took.
func (w *World) Deliver(dst, src, k int) int {
	for i := range k {
		if _, ok := w.take(dst, src); !ok {
			return i
		}
	}
	return k
}

func (w *World) take(dst, src int) (crcp.Envelope, bool) {
	w.mu.Lock()
	q := w.inflight[src][dst]
	if len(q) == 0 {
		w.mu.Unlock()
		return crcp.Envelope{}, false
	}
	e := q[0]
	w.inflight[src][dst] = q[1:]
	w.library[dst][src] = append(w.library[dst][src], e)
	w.mu.Unlock()
	w.mods[dst].Received(e)
	return e, true
}

// FailExchange makes every later Exchange fail with err.
func (w *World) FailExchange(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failWith = err
}

// Exchanges is how many exchange rounds have completed.
func (w *World) Exchanges() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.exchanges
}

// InFlight is the number of messages on the transport.
func (w *World) InFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, row := range w.inflight {
		for _, q := range row {
			n += len(q)
		}
	}
	return n
}

// Delivered is the number of messages in the libraries.
func (w *World) Delivered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, row := range w.library {
		for _, q := range row {
			n += len(q)
		}
	}
	return n
}

// Consistent says whether the channels are as a checkpoint must leave
// them: nothing on the transport, and every message sent in its
// receiver's library exactly once, in the order sent.
func (w *World) Consistent() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for src := range w.seq {
		for dst := range w.seq {
			if q := w.inflight[src][dst]; len(q) > 0 {
				return fmt.Errorf("message %d from rank %d to rank %d (and %d more) left on the transport: lost when the process is saved", q[0].Seq, src, dst, len(q)-1)
			}
			got := w.library[dst][src]
			if uint64(len(got)) != w.seq[src][dst] {
				return fmt.Errorf("rank %d holds %d messages from rank %d, which sent %d", dst, len(got), src, w.seq[src][dst])
			}
			for i, e := range got {
				if e.Seq != uint64(i)+1 {
					return fmt.Errorf("rank %d holds message %d from rank %d at position %d", dst, e.Seq, src, i+1)
				}
			}
		}
	}
	return nil
}

// Restarted returns the job restarted from this one's saved libraries
// with new modules: the transport is not part of a snapshot, so what is
// in flight is gone. Modules implementing Seeder are given the restored
// totals first, as mpi does.
func (w *World) Restarted(mods []crcp.Module) *World {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := NewWorld(mods)
	for r := range mods {
		sentTo, recvdFrom := slices.Clone(w.seq[r]), make([]uint64, len(mods))
		for src := range mods {
			n.library[r][src] = slices.Clone(w.library[r][src])
			recvdFrom[src] = uint64(len(w.library[r][src]))
		}
		n.seq[r] = sentTo
		if s, ok := mods[r].(Seeder); ok {
			s.SeedCounts(slices.Clone(sentTo), recvdFrom)
		}
	}
	return n
}

// FTEventAll runs FTEvent(state) on every rank at once and returns each
// rank's error.
func (w *World) FTEventAll(ctx context.Context, state crs.State) []error {
	errs := make([]error, w.Size())
	var wg sync.WaitGroup
	for r := range w.Size() {
		wg.Go(func() { errs[r] = w.FTEvent(ctx, r, state) })
	}
	wg.Wait()
	return errs
}

// FTEvent runs rank r's FTEvent over its Channels.
func (w *World) FTEvent(ctx context.Context, r int, state crs.State) error {
	return w.mods[r].FTEvent(ctx, state, channels{w, r, ctx})
}

// channels is rank r's view of the World during one FTEvent, whose
// context is given so that a protocol that waits on another context
// fails instead of hanging the kit.
type channels struct {
	w      *World
	r      int
	caller context.Context
}

func (c channels) Rank() int { return c.r }
func (c channels) Size() int { return c.w.Size() }

// Exchange waits for every rank's counts, as the library's exchange does.
func (c channels) Exchange(ctx context.Context, sentTo []uint64) ([]uint64, error) {
	w := c.w
	if len(sentTo) != w.Size() {
		return nil, fmt.Errorf("crcptest: rank %d exchanged %d counts in a job of %d", c.r, len(sentTo), w.Size())
	}
	w.mu.Lock()
	if w.failWith != nil {
		defer w.mu.Unlock()
		return nil, fmt.Errorf("crcptest: exchange: %w", w.failWith)
	}
	if w.round == nil {
		w.round = &exchangeRound{sent: make([][]uint64, w.Size()), done: make(chan struct{})}
	}
	rd := w.round
	if rd.sent[c.r] != nil {
		w.mu.Unlock()
		return nil, fmt.Errorf("crcptest: rank %d exchanged twice in one round", c.r)
	}
	rd.sent[c.r] = slices.Clone(sentTo)
	if rd.arrived++; rd.arrived == w.Size() {
		close(rd.done)
		w.round = nil
		w.exchanges++
	}
	w.mu.Unlock()
	select {
	case <-rd.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("crcptest: rank %d: exchange: %w", c.r, ctx.Err())
	case <-c.caller.Done():
		if ctx.Err() != nil { // both ended: the protocol's is the one to report
			return nil, fmt.Errorf("crcptest: rank %d: exchange: %w", c.r, ctx.Err())
		}
		return nil, fmt.Errorf("crcptest: rank %d: exchange: FTEvent's context ended but the exchange's did not: the protocol does not pass its context on", c.r)
	}
	out := make([]uint64, w.Size())
	for p := range out {
		out[p] = rd.sent[p][c.r]
	}
	return out, nil
}

// Agree is an Exchange of ok: every rank learns whether it held on all.
func (c channels) Agree(ctx context.Context, ok bool) (bool, error) {
	v := uint64(0)
	if ok {
		v = 1
	}
	got, err := c.Exchange(ctx, slices.Repeat([]uint64{v}, c.w.Size()))
	if err != nil {
		return false, fmt.Errorf("crcptest: agree: %w", err)
	}
	return !slices.Contains(got, 0), nil
}

// Drain takes messages from peer off the transport until the library
// holds total from it. Where a real drain would wait for ever for a
// message that was never sent, this one says so.
func (c channels) Drain(ctx context.Context, peer int, total uint64) error {
	w := c.w
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("crcptest: rank %d: drain rank %d: %w", c.r, peer, err)
		}
		if c.caller.Err() != nil {
			return fmt.Errorf("crcptest: rank %d: drain rank %d: FTEvent's context ended but the drain's did not: the protocol does not pass its context on", c.r, peer)
		}
		w.mu.Lock()
		have, sent := uint64(len(w.library[c.r][peer])), w.seq[peer][c.r]
		w.mu.Unlock()
		if have >= total {
			return nil
		}
		if _, ok := w.take(c.r, peer); !ok {
			return fmt.Errorf("%w: rank %d drains rank %d up to %d messages; %d arrived and rank %d sent %d",
				errNeverSent, c.r, peer, total, have, peer, sent)
		}
	}
}
