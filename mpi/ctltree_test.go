package mpi_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// TestTreeShape: every rank but 0 has one parent, the tree spans the job,
// and its depth is the ceiling of log2 of the size.
func TestTreeShape(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 8, 13, 64, 100, 1024} {
		children := 0
		depth := make([]int, n)
		deepest := 0
		for r := range n {
			nb := mpi.TreeNeighbours(r, n)
			if r > 0 {
				p := nb[0]
				if p >= r {
					t.Fatalf("n=%d: rank %d's parent is %d", n, r, p)
				}
				nb = nb[1:]
				depth[r] = depth[p] + 1
				deepest = max(deepest, depth[r])
			}
			children += len(nb)
		}
		if children != n-1 {
			t.Errorf("n=%d: %d children in all, want %d", n, children, n-1)
		}
		if deepest != mpi.TreeDepth(n) {
			t.Errorf("n=%d: depth %d, TreeDepth says %d", n, deepest, mpi.TreeDepth(n))
		}
	}
}

// TestSparseExchange: in a ring where each rank only sends to the next
// and has received nothing yet, every rank learns what its predecessor
// sent it, only that, and drains it; each rank writes its messages of the
// control tree and nothing else (2(N-1) in all per exchange), and opens
// no connection but toward its successor and its neighbours in the tree.
// An agreement is an AND over all ranks.
func TestSparseExchange(t *testing.T) {
	const n, k = 8, 3
	mpitest.Run(t, n, "mem", func(p *mpi.Proc) error {
		w := p.World()
		r := w.Rank()
		next, prev := (r+1)%n, (r+n-1)%n
		for i := range k {
			if err := w.Send(make([]byte, 100*i), next, i); err != nil {
				return err
			}
		}
		ctx := context.Background()
		before := p.ControlFrames()
		ch := p.ChannelsAt(1)
		sentTo, _ := p.Counts()
		got, err := ch.Exchange(ctx, sentTo)
		if err != nil {
			return err
		}
		for q, v := range got {
			if want := map[bool]uint64{true: k}[q == prev]; v != want {
				return fmt.Errorf("rank %d says it sent %d, want %d", q, v, want)
			}
		}
		if err := ch.Drain(ctx, prev, got[prev]); err != nil {
			return err
		}
		_, recvd := p.Counts()
		if recvd[prev] != k {
			return fmt.Errorf("%d messages from rank %d drained, want %d", recvd[prev], prev, k)
		}
		if f, want := p.ControlFrames()-before, uint64(mpi.TreeMessages(r, n)); f != want {
			return fmt.Errorf("the exchange wrote %d frames, want %d", f, want)
		}
		allowed := append(mpi.TreeNeighbours(r, n), next)
		for _, q := range mpi.OutPeers(p) {
			if !slices.Contains(allowed, q) {
				return fmt.Errorf("a connection to rank %d, which is neither the successor nor a tree neighbour", q)
			}
		}
		if all, err := ch.Agree(ctx, true); err != nil || !all {
			return fmt.Errorf("agree on true: %v, %v", all, err)
		}
		if all, err := ch.Agree(ctx, r != 5); err != nil || all {
			return fmt.Errorf("agree with rank 5 saying no: %v, %v", all, err)
		}
		for i := range k {
			buf := make([]byte, 1000)
			st, err := w.Recv(buf, prev, mpi.AnyTag)
			if err != nil {
				return err
			}
			if st.Tag != i || st.Count != 100*i {
				return fmt.Errorf("message %d came as tag %d, %d bytes", i, st.Tag, st.Count)
			}
		}
		return nil
	})
}
