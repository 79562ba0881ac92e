package mpi

import (
	"context"
	"fmt"
	"math"
	"sync"

	"gompi/frameworks/crcp"
)

// Channels returns what a coordination protocol needs from this process's
// message layer. Its traffic travels on the library's control context: it
// is neither counted nor shown to the protocol's Sent/Received.
func (p *Proc) Channels() crcp.Channels { return channels{p} }

type channels struct{ p *Proc }

// Rank and Size are the process's index and the number of processes: a
// replicated job's channels are between processes (replica.go).
func (ch channels) Rank() int { return ch.p.phys }
func (ch channels) Size() int { return ch.p.physN }

// Exchange gives every rank this rank's count of messages sent to it and
// returns every rank's count for this one, over the control tree
// (ctltree.go): only non-zero counts travel. It is numbered like a
// collective of the control communicator: every rank must call it, and
// Agree, the same number of times. ChannelsAt numbers them by checkpoint
// instead.
func (ch channels) Exchange(ctx context.Context, sentTo []uint64) ([]uint64, error) {
	c := ch.p.control
	return ch.p.exchange(ctx, c.co, c.nextTag(), sentTo, -1)
}

// Agree reports whether ok holds on every rank, over the control tree;
// numbered as Exchange.
func (ch channels) Agree(ctx context.Context, ok bool) (bool, error) {
	c := ch.p.control
	all, err := ch.p.agreeAll(ctx, c.co, c.nextTag(), ok)
	if err != nil {
		return false, fmt.Errorf("mpi: agree: %w", err)
	}
	return all, nil
}

// ChannelsAt returns the channels of one checkpoint (or quiesce), epoch
// being its safe point: the same on every rank, and never reused by a
// later checkpoint. The n-th Exchange or Agree made through them (n < 8)
// travels on the control context with a tag of its own, so the messages
// of a checkpoint that was cancelled half-way on some ranks never match
// a later one's: their leftovers are discarded by the next exchange.
func (p *Proc) ChannelsAt(epoch uint64) crcp.Channels {
	return &epochChannels{channels: channels{p}, epoch: epoch}
}

const exchangesPerEpoch = 8

type epochChannels struct {
	channels
	epoch uint64
	mu    sync.Mutex
	n     int
}

// tag numbers the next Exchange or Agree of the epoch.
func (ch *epochChannels) tag(op string) (int, error) {
	ch.mu.Lock()
	n := ch.n
	ch.n++
	ch.mu.Unlock()
	if n >= exchangesPerEpoch || ch.epoch > math.MaxInt64/exchangesPerEpoch-1 {
		return 0, fmt.Errorf("mpi: %s: %w: call %d of epoch %d is beyond the %d an epoch has", op, ErrArg, n, ch.epoch, exchangesPerEpoch)
	}
	return int(ch.epoch)*exchangesPerEpoch + n, nil
}

func (ch *epochChannels) Exchange(ctx context.Context, sentTo []uint64) ([]uint64, error) {
	tag, err := ch.tag("exchange")
	if err != nil {
		return nil, err
	}
	p := ch.p
	return p.exchange(ctx, p.control.pt, tag, sentTo, 0)
}

func (ch *epochChannels) Agree(ctx context.Context, ok bool) (bool, error) {
	tag, err := ch.tag("agree")
	if err != nil {
		return false, err
	}
	p := ch.p
	p.purgeControl(p.control.pt, 0, tag)
	all, err := p.agreeAll(ctx, p.control.pt, tag, ok)
	if err != nil {
		return false, fmt.Errorf("mpi: agree: %w", err)
	}
	return all, nil
}

// Drain waits until total messages from peer have been taken off the
// transport (the reader goroutines take everything as it arrives, so
// nothing needs posting).
func (ch channels) Drain(ctx context.Context, peer int, total uint64) error {
	p := ch.p
	if peer < 0 || peer >= p.physN {
		return fmt.Errorf("mpi: drain: %w: rank %d of %d", ErrArg, peer, p.physN)
	}
	pe := p.link(peer)
	if pe.recvd.Load() >= total {
		return nil
	}
	w := &drainWait{peer: peer, total: total, ch: make(chan struct{})}
	p.drainMu.Lock()
	if pe.recvd.Load() >= total {
		p.drainMu.Unlock()
		return nil
	}
	if err := pe.failure(); err != nil {
		p.drainMu.Unlock()
		return fmt.Errorf("mpi: drain: %w", err)
	}
	p.drains = append(p.drains, w)
	p.nDrains.Add(1)
	p.drainMu.Unlock()
	var err error
	select {
	case <-w.ch:
		if err = pe.failure(); err != nil && pe.recvd.Load() >= total {
			err = nil
		}
	case <-ctx.Done():
		err = ctx.Err()
	case <-p.done:
		err = p.stopErr()
	}
	p.drainMu.Lock()
	for i, d := range p.drains {
		if d == w {
			p.drains = append(p.drains[:i], p.drains[i+1:]...)
			p.nDrains.Add(-1)
			break
		}
	}
	p.drainMu.Unlock()
	if err != nil {
		return fmt.Errorf("mpi: drain rank %d (%d of %d messages): %w", peer, pe.recvd.Load(), total, err)
	}
	return nil
}

// checkDrains wakes drains of src that are satisfied.
func (p *Proc) checkDrains(src int) {
	p.drainMu.Lock()
	defer p.drainMu.Unlock()
	n := p.link(src).recvd.Load()
	for _, d := range p.drains {
		if d.peer == src && n >= d.total {
			closeOnce(d.ch)
		}
	}
}

// failDrains wakes every drain of a failed peer.
func (p *Proc) failDrains(rank int) {
	p.drainMu.Lock()
	defer p.drainMu.Unlock()
	for _, d := range p.drains {
		if d.peer == rank {
			closeOnce(d.ch)
		}
	}
}

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// ControlFrames is the number of the library's own frames this process
// has written to its peers (messages of the control context, flags): what
// the coordination of its checkpoints and suspensions cost.
func (p *Proc) ControlFrames() uint64 { return p.ctlFrames.Load() }

// Counts returns this process's per-peer totals of messages handed to the
// transport and taken off it (the library's control traffic excluded).
// In a replicated job they are per process (Proc.Copy's indices).
func (p *Proc) Counts() (sentTo, recvdFrom []uint64) {
	sentTo, recvdFrom = make([]uint64, p.physN), make([]uint64, p.physN)
	for i, pe := range p.links() {
		sentTo[i], recvdFrom[i] = pe.sent.Load(), pe.recvd.Load()
	}
	return sentTo, recvdFrom
}

var _ crcp.Channels = channels{}
