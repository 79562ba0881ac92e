package coll

import (
	"context"
	"unsafe"
)

// The flat algorithms treat every member alike, wherever it runs: the
// order in which they combine contributions depends only on the
// communicator's size (and root). Package mpi runs them when no module
// takes an operation, component basic offers them as the default, and
// han runs them within a node and among the nodes' leaders (Sub).

// RingMin is the message size from which Allreduce uses the ring
// (reduce-scatter + allgather) instead of recursive doubling.
const RingMin = 64 << 10

// Barrier returns once every member has entered it (dissemination).
func Barrier(ctx context.Context, c Comm, tag int) error {
	n, r := c.Size(), c.Rank()
	for k := 1; k < n; k <<= 1 {
		if err := c.SendRecv(ctx, nil, (r+k)%n, nil, (r-k+n)%n, tag); err != nil {
			return err
		}
	}
	return nil
}

// Bcast copies root's buf into every member's buf (binomial tree).
func Bcast(ctx context.Context, c Comm, tag int, buf []byte, root int) error {
	n := c.Size()
	vr := (c.Rank() - root + n) % n
	mask := 1
	for mask < n {
		if vr&mask != 0 {
			if err := c.Recv(ctx, buf, (vr-mask+root)%n, tag); err != nil {
				return err
			}
			break
		}
		mask <<= 1
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			if err := c.Send(ctx, (vr+mask+root)%n, tag, buf); err != nil {
				return err
			}
		}
	}
	return nil
}

// Reduce combines send into root's recv over a binomial tree: each member
// folds in its children's partial results in a fixed order. The tree is
// rooted at root, ranks numbered from it; a non-commutative reduction
// needs rank order, so its tree is rooted at rank 0, which hands the
// result to root.
func Reduce(ctx context.Context, c Comm, tag int, send, recv []byte, red Reduction, root int) error {
	if red.NonCommutative && root != 0 {
		r := c.Rank()
		var at0 []byte
		if r == 0 {
			at0 = AlignedBuf(len(send))
		}
		if err := reduceTree(ctx, c, tag, send, at0, red, 0); err != nil {
			return err
		}
		switch r {
		case 0:
			return c.Send(ctx, root, tag, at0)
		case root:
			return c.Recv(ctx, recv[:len(send)], 0, tag)
		}
		return nil
	}
	return reduceTree(ctx, c, tag, send, recv, red, root)
}

// reduceTree is the binomial tree rooted at root: a member with virtual
// rank v (v = rank - root) folds the subtree [v+mask, v+2mask) into its
// own [v, v+mask), lower ranks on the left.
func reduceTree(ctx context.Context, c Comm, tag int, send, recv []byte, red Reduction, root int) error {
	n := c.Size()
	vr := (c.Rank() - root + n) % n
	acc := AlignedBuf(len(send))
	copy(acc, send)
	var tmp []byte
	for mask := 1; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			return c.Send(ctx, ((vr&^mask)+root)%n, tag, acc)
		}
		if child := vr | mask; child < n {
			if tmp == nil {
				tmp = AlignedBuf(len(send))
			}
			if err := c.Recv(ctx, tmp, (child+root)%n, tag); err != nil {
				return err
			}
			red.Fn(acc, tmp)
		}
	}
	copy(recv, acc)
	return nil
}

// Allreduce is recursive doubling, or the ring from RingMin bytes when
// every member has at least one element and there are more than two.
// A non-commutative reduction is a Reduce to rank 0 and a Bcast: both
// exchanges would combine in different orders on the two partners.
func Allreduce(ctx context.Context, c Comm, tag int, send, recv []byte, red Reduction) error {
	if red.NonCommutative {
		if err := Reduce(ctx, c, tag, send, recv, red, 0); err != nil {
			return err
		}
		return Bcast(ctx, c, tag, recv[:len(send)], 0)
	}
	if len(send) >= RingMin && len(send)/red.Elem >= c.Size() && c.Size() > 2 {
		return allreduceRing(ctx, c, tag, send, recv, red)
	}
	return allreduceRD(ctx, c, tag, send, recv, red)
}

// allreduceRD is recursive doubling. With a size that is not a power of
// two, the first 2*rem members pair up first (the odd one keeps the sum),
// and the result is handed back at the end. At each step both partners
// combine the same two partial results, which commute exactly, so every
// member ends with the same bits.
func allreduceRD(ctx context.Context, c Comm, tag int, send, recv []byte, red Reduction) error {
	n, r := c.Size(), c.Rank()
	acc := AlignedBuf(len(send))
	copy(acc, send)
	tmp := AlignedBuf(len(send))
	pof2 := 1
	for pof2*2 <= n {
		pof2 *= 2
	}
	rem := n - pof2
	newRank := -1
	switch {
	case r < 2*rem && r%2 == 0:
		if err := c.Send(ctx, r+1, tag, acc); err != nil {
			return err
		}
	case r < 2*rem:
		if err := c.Recv(ctx, tmp, r-1, tag); err != nil {
			return err
		}
		red.Fn(acc, tmp)
		newRank = r / 2
	default:
		newRank = r - rem
	}
	if newRank >= 0 {
		for mask := 1; mask < pof2; mask <<= 1 {
			np := newRank ^ mask
			partner := np + rem
			if np < rem {
				partner = np*2 + 1
			}
			if err := c.SendRecv(ctx, acc, partner, tmp, partner, tag); err != nil {
				return err
			}
			red.Fn(acc, tmp)
		}
	}
	if r < 2*rem {
		if r%2 == 1 {
			if err := c.Send(ctx, r-1, tag, acc); err != nil {
				return err
			}
		} else if err := c.Recv(ctx, acc, r+1, tag); err != nil {
			return err
		}
	}
	copy(recv, acc)
	return nil
}

// allreduceRing is a reduce-scatter followed by an allgather around the
// ring: each chunk is reduced once, along a fixed path, then copied to all.
func allreduceRing(ctx context.Context, c Comm, tag int, send, recv []byte, red Reduction) error {
	n, r, elem := c.Size(), c.Rank(), red.Elem
	acc := AlignedBuf(len(send))
	copy(acc, send)
	count := len(send) / elem
	lo := func(i int) int { return (i * count / n) * elem }
	chunk := func(i int) []byte { i = (i%n + n) % n; return acc[lo(i):lo(i+1)] }
	tmp := AlignedBuf(len(chunk(0)) + elem)
	right, left := (r+1)%n, (r-1+n)%n
	for s := 0; s < n-1; s++ {
		in := chunk(r - s - 1)
		if err := c.SendRecv(ctx, chunk(r-s), right, tmp[:len(in)], left, tag); err != nil {
			return err
		}
		red.Fn(in, tmp[:len(in)])
	}
	for s := 0; s < n-1; s++ {
		if err := c.SendRecv(ctx, chunk(r+1-s), right, chunk(r-s), left, tag); err != nil {
			return err
		}
	}
	copy(recv, acc)
	return nil
}

// AlignedBuf returns n bytes aligned for any numeric element type, which
// a Reduction's Fn may view as its elements.
func AlignedBuf(n int) []byte {
	if n == 0 {
		return nil
	}
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), n)
}
