package mpi

import (
	"context"
	"encoding/binary"
	"fmt"

	"gompi/frameworks/crcp"
)

// Channels returns what a coordination protocol needs from this process's
// message layer. Its traffic travels on the library's control context: it
// is neither counted nor shown to the protocol's Sent/Received.
func (p *Proc) Channels() crcp.Channels { return channels{p} }

type channels struct{ p *Proc }

func (ch channels) Rank() int { return ch.p.rank }
func (ch channels) Size() int { return ch.p.size }

// Exchange is an all-to-all of one counter per pair of ranks.
func (ch channels) Exchange(ctx context.Context, sentTo []uint64) ([]uint64, error) {
	p := ch.p
	if len(sentTo) != p.size {
		return nil, fmt.Errorf("mpi: exchange: %w: %d counts for %d ranks", ErrArg, len(sentTo), p.size)
	}
	c := p.control
	tag := c.nextTag()
	out := make([]uint64, p.size)
	out[p.rank] = sentTo[p.rank]
	bufs := make([][8]byte, p.size)
	reqs := make([]*Request, 0, 2*p.size)
	for r := 0; r < p.size; r++ {
		if r == p.rank {
			continue
		}
		reqs = append(reqs, c.cirecv(bufs[r][:], r, tag))
	}
	for r := 0; r < p.size; r++ {
		if r == p.rank {
			continue
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], sentTo[r])
		sr, err := c.cisend(r, tag, b[:])
		if err != nil {
			return nil, fmt.Errorf("mpi: exchange: %w", err)
		}
		reqs = append(reqs, sr)
	}
	for _, r := range reqs {
		if _, err := r.WaitCtx(ctx); err != nil {
			return nil, fmt.Errorf("mpi: exchange: %w", err)
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
