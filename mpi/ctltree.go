package mpi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
)

// The library's own collectives at a checkpoint (crcp.Channels) travel
// over a tree, so that a checkpoint costs O(N) messages and O(log N)
// steps instead of an all-to-all: the bookmark exchange is a sparse
// reduce-scatter (each rank's non-zero counts climb the tree only as far
// as the subtree that holds their destination, then go down to it), and
// the agreement on an outcome is an AND up the tree and its result down.
// Each costs 2(N-1) messages of the control context, whatever the
// traffic; a count of a pair of ranks that never exchanged a message
// does not travel at all (it is zero), so the bookmarks of a halo or ring
// program add a few bytes per message, not messages.
//
// The tree is the binomial tree rooted at rank 0 of the library's flat
// Reduce and Bcast (frameworks/coll): rank r's parent is r less its
// lowest set bit. Its edges are the connections a program that ran a
// Reduce or Bcast rooted at 0, or an Allreduce by recursive doubling, has
// already; otherwise a checkpoint opens them, at most one per edge, 2(N-1)
// in all, and never one between two ranks that are not neighbours in the
// tree. Every other pair of ranks exchanges nothing at a checkpoint: a
// rank that only receives from another learns its count through the tree.

// treeNode is one rank's place in the control tree: its parent (-1 at
// the root), its children in ascending order, and the end of its subtree,
// which holds the ranks [rank, hi).
type treeNode struct {
	rank, parent int
	children     []int
	hi           int
}

func treeOf(rank, size int) treeNode {
	span := size // the root's subtree is the whole job
	if rank > 0 {
		span = rank & -rank
	}
	t := treeNode{rank: rank, parent: -1, hi: min(rank+span, size)}
	if rank > 0 {
		t.parent = rank - span
	}
	for m := 1; m < span && rank+m < size; m <<= 1 {
		t.children = append(t.children, rank+m)
	}
	return t
}

// childFor returns the index among t.children of the child whose subtree
// holds dst, a rank of t's subtree other than t.rank: child rank+2^k
// holds [rank+2^k, rank+2^(k+1)).
func (t treeNode) childFor(dst int) int { return bits.Len(uint(dst-t.rank)) - 1 }

// TreeDepth is the depth of the tree the control traffic of a
// checkpoint follows in a job of size ranks: the number of steps a
// message takes from the deepest rank to rank 0, floor(log2(size)) (a
// rank's depth is the number of its set bits).
func TreeDepth(size int) int {
	if size <= 1 {
		return 0
	}
	return bits.Len(uint(size)) - 1
}

// bookmark is one rank's count of the messages it sent to another.
type bookmark struct {
	src, dst int
	n        uint64
}

// exchange gives every rank r the count sentTo[r] of this rank and
// returns every rank's count for this one (zero for a rank that says
// nothing), on cs with tag, over the control tree. With purgeFrom >= 0 it
// first drops the leftovers of exchanges with tags from purgeFrom up to
// tag (those of checkpoints or suspensions given up half-way). When it
// fails (ctx ended, a rank failed) nothing stays posted.
func (p *Proc) exchange(ctx context.Context, cs *ctxState, tag int, sentTo []uint64, purgeFrom int) ([]uint64, error) {
	if len(sentTo) != p.size {
		return nil, fmt.Errorf("mpi: exchange: %w: %d counts for %d ranks", ErrArg, len(sentTo), p.size)
	}
	if purgeFrom >= 0 {
		p.purgeControl(cs, purgeFrom, tag)
	}
	out, err := p.reduceScatter(ctx, cs, tag, sentTo)
	if err != nil {
		return nil, fmt.Errorf("mpi: exchange: %w", err)
	}
	return out, nil
}

// purgeControl drops what arrived on cs with tags in [from, to).
func (p *Proc) purgeControl(cs *ctxState, from, to int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cs.unexp = slices.DeleteFunc(cs.unexp, func(m *message) bool {
		if m.tag >= from && m.tag < to {
			putMsg(m)
			return true
		}
		return false
	})
}

func (p *Proc) reduceScatter(ctx context.Context, cs *ctxState, tag int, sentTo []uint64) ([]uint64, error) {
	t := treeOf(p.rank, p.size)
	var held []bookmark
	for dst, n := range sentTo {
		if n != 0 && dst != p.rank {
			held = append(held, bookmark{p.rank, dst, n})
		}
	}
	for _, c := range t.children {
		b, err := p.awaitCtl(ctx, cs, c, tag)
		if err != nil {
			return nil, err
		}
		if held, err = decodeBookmarks(held, b, p.size); err != nil {
			return nil, fmt.Errorf("from rank %d: %w", c, err)
		}
	}
	if t.parent >= 0 {
		var up []bookmark
		held, up = splitBookmarks(held, t.rank, t.hi)
		if err := p.sendCtl(cs, t.parent, tag, encodeBookmarks(up)); err != nil {
			return nil, err
		}
		b, err := p.awaitCtl(ctx, cs, t.parent, tag)
		if err != nil {
			return nil, err
		}
		if held, err = decodeBookmarks(held, b, p.size); err != nil {
			return nil, fmt.Errorf("from rank %d: %w", t.parent, err)
		}
	}
	out := make([]uint64, p.size)
	out[p.rank] = sentTo[p.rank]
	down := make([][]bookmark, len(t.children))
	for _, b := range held {
		if b.dst == p.rank {
			out[b.src] = b.n
			continue
		}
		if b.dst < t.rank || b.dst >= t.hi {
			return nil, fmt.Errorf("a count for rank %d reached rank %d, whose subtree is [%d, %d)", b.dst, t.rank, t.rank, t.hi)
		}
		i := t.childFor(b.dst)
		down[i] = append(down[i], b)
	}
	for i, c := range t.children {
		if err := p.sendCtl(cs, c, tag, encodeBookmarks(down[i])); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// splitBookmarks keeps in held the counts for ranks of [lo, hi) and
// returns the others.
func splitBookmarks(held []bookmark, lo, hi int) (in, out []bookmark) {
	in = held[:0]
	for _, b := range held {
		if b.dst >= lo && b.dst < hi {
			in = append(in, b)
		} else {
			out = append(out, b)
		}
	}
	return in, out
}

func encodeBookmarks(bs []bookmark) []byte {
	out := make([]byte, 0, len(bs)*6)
	for _, b := range bs {
		out = binary.AppendUvarint(out, uint64(b.src))
		out = binary.AppendUvarint(out, uint64(b.dst))
		out = binary.AppendUvarint(out, b.n)
	}
	return out
}

var errBookmarks = errors.New("malformed bookmarks")

// decodeBookmarks appends the counts of m (a message it recycles) to bs.
func decodeBookmarks(bs []bookmark, m *message, size int) ([]bookmark, error) {
	defer putMsg(m)
	d := m.data
	for len(d) > 0 {
		var v [3]uint64
		for i := range v {
			x, k := binary.Uvarint(d)
			if k <= 0 {
				return bs, errBookmarks
			}
			v[i], d = x, d[k:]
		}
		if v[0] >= uint64(size) || v[1] >= uint64(size) {
			return bs, fmt.Errorf("%w: ranks %d and %d in a job of %d", errBookmarks, v[0], v[1], size)
		}
		bs = append(bs, bookmark{int(v[0]), int(v[1]), v[2]})
	}
	return bs, nil
}

// agreeAll reports whether ok holds on every rank (an AND up the control
// tree, its result down), on cs with tag. It returns on a rank only once
// every rank called it: it is a barrier too.
func (p *Proc) agreeAll(ctx context.Context, cs *ctxState, tag int, ok bool) (bool, error) {
	t := treeOf(p.rank, p.size)
	all := ok
	recv := func(src int) error {
		m, err := p.awaitCtl(ctx, cs, src, tag)
		if err != nil {
			return err
		}
		defer putMsg(m)
		if len(m.data) != 1 || m.data[0] > 1 {
			return fmt.Errorf("from rank %d: malformed agreement (%d bytes)", src, len(m.data))
		}
		all = all && m.data[0] == 1
		return nil
	}
	for _, c := range t.children {
		if err := recv(c); err != nil {
			return false, err
		}
	}
	if t.parent >= 0 {
		if err := p.sendCtl(cs, t.parent, tag, []byte{boolByte(all)}); err != nil {
			return false, err
		}
		all = true
		if err := recv(t.parent); err != nil {
			return false, err
		}
	}
	for _, c := range t.children {
		if err := p.sendCtl(cs, c, tag, []byte{boolByte(all)}); err != nil {
			return false, err
		}
	}
	return all, nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// sendCtl sends data to world rank dst on the control context cs; it
// returns once the data is handed to the transport.
func (p *Proc) sendCtl(cs *ctxState, dst, tag int, data []byte) error {
	return p.send(cs, dst, tag, data, nil)
}

// awaitCtl waits for the message from world rank src with tag on the
// control context cs and takes it. A control tree's wait depends on every
// rank, not only on src: it fails as soon as any rank is known to have
// failed.
func (p *Proc) awaitCtl(ctx context.Context, cs *ctxState, src, tag int) (*message, error) {
	for {
		p.mu.Lock()
		if i := cs.findUnexpected(src, tag); i >= 0 {
			m := cs.removeUnexpected(i)
			p.mu.Unlock()
			return m, nil
		}
		err := p.recvFailureLocked(cs, p.control, src, true)
		if err == nil && p.nFailed.Load() > 0 {
			err = p.firstFailure()
		}
		if err != nil {
			p.mu.Unlock()
			return nil, err
		}
		pw := &probeWait{src: src, tag: tag, ch: make(chan struct{})}
		cs.probes = append(cs.probes, pw)
		p.mu.Unlock()
		if err := p.parkProbe(ctx, cs, pw); err != nil {
			return nil, fmt.Errorf("wait for rank %d: %w", src, err)
		}
	}
}

// firstFailure returns the error of a failed rank, nil when none failed.
func (p *Proc) firstFailure() error {
	for _, pe := range p.peers {
		if err := pe.failure(); err != nil {
			return err
		}
	}
	return nil
}

// parkProbe waits, as a receive does (the readers may poll), until pw is
// woken: a message it matches arrived on cs, or a failure woke every
// probe. It withdraws pw when ctx ends or the Proc stops first.
func (p *Proc) parkProbe(ctx context.Context, cs *ctxState, pw *probeWait) error {
	p.waiting.Add(1)
	defer p.waiting.Add(-1)
	var err error
	select {
	case <-pw.ch:
		return nil
	case <-p.done:
		err = p.stopErr()
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.mu.Lock()
	if i := slices.Index(cs.probes, pw); i >= 0 {
		cs.probes = slices.Delete(cs.probes, i, i+1)
	}
	p.mu.Unlock()
	return err
}
