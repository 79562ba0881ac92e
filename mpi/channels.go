package mpi

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"

	"gompi/frameworks/crcp"
)

// Channels returns what a coordination protocol needs from this process's
// message layer. Its traffic travels on the library's control context: it
// is neither counted nor shown to the protocol's Sent/Received.
func (p *Proc) Channels() crcp.Channels { return channels{p} }

type channels struct{ p *Proc }

func (ch channels) Rank() int { return ch.p.rank }
func (ch channels) Size() int { return ch.p.size }

// Exchange is an all-to-all of one counter per pair of ranks, numbered
// like a collective of the control communicator: every rank must call it
// the same number of times. ChannelsAt numbers exchanges by checkpoint
// instead.
func (ch channels) Exchange(ctx context.Context, sentTo []uint64) ([]uint64, error) {
	c := ch.p.control
	return ch.p.exchange(ctx, c.co, c.nextTag(), sentTo, -1)
}

// ChannelsAt returns the channels of one checkpoint (or quiesce), epoch
// being its safe point: the same on every rank, and never reused by a
// later checkpoint. The n-th Exchange made through them (n < 8) travels
// on the control context with a tag of its own, so exchanges of a
// checkpoint that was cancelled half-way on some ranks never match a
// later one's: their leftovers are discarded by the next exchange.
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

func (ch *epochChannels) Exchange(ctx context.Context, sentTo []uint64) ([]uint64, error) {
	ch.mu.Lock()
	n := ch.n
	ch.n++
	ch.mu.Unlock()
	if n >= exchangesPerEpoch || ch.epoch > math.MaxInt64/exchangesPerEpoch-1 {
		return nil, fmt.Errorf("mpi: exchange: %w: exchange %d of epoch %d is beyond the %d an epoch has", ErrArg, n, ch.epoch, exchangesPerEpoch)
	}
	p := ch.p
	return p.exchange(ctx, p.control.pt, int(ch.epoch)*exchangesPerEpoch+n, sentTo, 0)
}

// exchange sends sentTo[r] to every rank r and receives theirs, on cs
// with tag. With purgeFrom >= 0 it first drops the leftovers of exchanges
// with tags from purgeFrom up to tag (those of checkpoints or suspensions
// given up half-way).
// When it fails (ctx ended, a peer failed) its receives are withdrawn, so
// nothing stays posted.
func (p *Proc) exchange(ctx context.Context, cs *ctxState, tag int, sentTo []uint64, purgeFrom int) ([]uint64, error) {
	if len(sentTo) != p.size {
		return nil, fmt.Errorf("mpi: exchange: %w: %d counts for %d ranks", ErrArg, len(sentTo), p.size)
	}
	if purgeFrom >= 0 {
		p.mu.Lock()
		cs.unexp = slices.DeleteFunc(cs.unexp, func(m *message) bool {
			if m.tag >= purgeFrom && m.tag < tag {
				putMsg(m)
				return true
			}
			return false
		})
		p.mu.Unlock()
	}
	c := p.control
	out := make([]uint64, p.size)
	out[p.rank] = sentTo[p.rank]
	bufs := make([][8]byte, p.size)
	recvs := make([]*Request, 0, p.size)
	for r := 0; r < p.size; r++ {
		if r != p.rank {
			recvs = append(recvs, c.irecvOn(cs, bufs[r][:], r, tag))
		}
	}
	withdraw := func(err error) ([]uint64, error) {
		for _, rq := range recvs {
			p.cancelRecv(rq)
		}
		return nil, fmt.Errorf("mpi: exchange: %w", err)
	}
	sends := make([]*Request, 0, p.size)
	for r := 0; r < p.size; r++ {
		if r == p.rank {
			continue
		}
		b := binary.LittleEndian.AppendUint64(nil, sentTo[r])
		sr := newRequest(p, reqSend)
		if err := p.send(cs, r, tag, b, sr); err != nil {
			return withdraw(err)
		}
		sends = append(sends, sr)
	}
	for _, rq := range append(recvs, sends...) {
		if _, err := rq.WaitCtx(ctx); err != nil {
			return withdraw(err)
		}
	}
	for r := 0; r < p.size; r++ {
		if r != p.rank {
			out[r] = binary.LittleEndian.Uint64(bufs[r][:])
		}
	}
	return out, nil
}

// Drain waits until total messages from peer have been taken off the
// transport (the reader goroutines take everything as it arrives, so
// nothing needs posting).
func (ch channels) Drain(ctx context.Context, peer int, total uint64) error {
	p := ch.p
	if peer < 0 || peer >= p.size {
		return fmt.Errorf("mpi: drain: %w: rank %d of %d", ErrArg, peer, p.size)
	}
	pe := p.peers[peer]
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
	n := p.peers[src].recvd.Load()
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

// Counts returns this process's per-peer totals of messages handed to the
// transport and taken off it (the library's control traffic excluded).
func (p *Proc) Counts() (sentTo, recvdFrom []uint64) {
	sentTo, recvdFrom = make([]uint64, p.size), make([]uint64, p.size)
	for i, pe := range p.peers {
		sentTo[i], recvdFrom[i] = pe.sent.Load(), pe.recvd.Load()
	}
	return sentTo, recvdFrom
}

var _ crcp.Channels = channels{}
