package mpi

import (
	"context"
	"fmt"
)

// Collectives run over point-to-point messages on the communicator's
// collective context, tagged with the collective's sequence number, so
// they never match user messages nor each other. Every algorithm fixes the
// order in which contributions are combined, so results never depend on
// timing. Barrier, Bcast, Reduce and Allreduce run on the selected coll
// modules (coll_select.go); the others are the flat algorithms below.

func (c *Comm) checkRoot(root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("mpi: %w: root %d outside communicator of size %d", ErrArg, root, c.size)
	}
	return nil
}

func (c *Comm) csend(dst, tag int, data []byte) error {
	return c.p.send(c.co, c.members[dst], tag, data, nil)
}

func (c *Comm) cisend(dst, tag int, data []byte) (*Request, error) {
	r := newRequest(c.p, reqSend)
	if err := c.p.send(c.co, c.members[dst], tag, data, r); err != nil {
		return nil, err
	}
	return r, nil
}

// crecv receives exactly len(buf) bytes from src: a collective whose
// members pass buffers of different sizes is an error.
func (c *Comm) crecv(ctx context.Context, buf []byte, src, tag int) error {
	st, err := c.recvOn(ctx, c.co, buf, c.members[src], tag)
	if err != nil {
		return err
	}
	if st.Count != len(buf) {
		return fmt.Errorf("mpi: collective: %w: rank %d contributed %d bytes, %d expected (buffers differ between ranks)", ErrArg, src, st.Count, len(buf))
	}
	return nil
}

func (c *Comm) cirecv(buf []byte, src, tag int) *Request {
	return c.irecvOn(c.co, buf, c.members[src], tag)
}

// csendrecv sends to dst and receives from src at once.
func (c *Comm) csendrecv(ctx context.Context, sbuf []byte, dst int, rbuf []byte, src, tag int) error {
	sr, err := c.cisend(dst, tag, sbuf)
	if err != nil {
		return err
	}
	rerr := c.crecv(ctx, rbuf, src, tag)
	if _, err := sr.Wait(); err != nil {
		return err
	}
	return rerr
}

func waitColl(reqs []*Request, want []int) error {
	for i, r := range reqs {
		if r == nil {
			continue
		}
		st, err := r.Wait()
		if err != nil {
			return err
		}
		if want != nil && want[i] >= 0 && st.Count != want[i] {
			return fmt.Errorf("mpi: collective: %w: rank %d contributed %d bytes, %d expected (buffers differ between ranks)", ErrArg, i, st.Count, want[i])
		}
	}
	return nil
}

// async runs a non-blocking collective on its own goroutine; its tag was
// taken on the caller's goroutine, in program order.
func (c *Comm) async(f func() error) *Request {
	r := newRequest(c.p, reqColl)
	c.p.activeNB.Add(1)
	go func() {
		err := f()
		c.p.activeNB.Add(-1)
		r.complete(Status{}, err)
	}()
	return r
}

// Barrier returns once every rank of c has entered it.
func (c *Comm) Barrier() error {
	if c != nil && c.inter != nil {
		return c.interBarrier()
	}
	if err := c.checkOp(); err != nil {
		return err
	}
	return c.barrier(c.nextTag())
}

// Ibarrier starts a barrier.
func (c *Comm) Ibarrier() (*Request, error) {
	if c != nil && c.inter != nil {
		return c.interIbarrier()
	}
	if err := c.checkOp(); err != nil {
		return nil, err
	}
	tag := c.nextTag()
	return c.async(func() error { return c.barrier(tag) }), nil
}

// Bcast copies root's buf into every rank's buf. On an intercommunicator
// the root passes Root, the rest of its group ProcNull, and the other
// group the root's rank in it.
func (c *Comm) Bcast(buf []byte, root int) error {
	if c != nil && c.inter != nil {
		return c.interBcast(buf, root)
	}
	if err := c.checkOp(); err != nil {
		return err
	}
	if err := c.checkRoot(root); err != nil {
		return err
	}
	return c.bcast(c.nextTag(), buf, root)
}

// Ibcast starts a broadcast; buf belongs to the library until it completes.
func (c *Comm) Ibcast(buf []byte, root int) (*Request, error) {
	if c != nil && c.inter != nil {
		return c.interIbcast(buf, root)
	}
	if err := c.checkOp(); err != nil {
		return nil, err
	}
	if err := c.checkRoot(root); err != nil {
		return nil, err
	}
	tag := c.nextTag()
	return c.async(func() error { return c.bcast(tag, buf, root) }), nil
}

// Gather collects every rank's send (all the same length) into root's
// recv, in rank order.
func (c *Comm) Gather(send, recv []byte, root int) error {
	if err := c.checkOp(); err != nil {
		return err
	}
	if err := c.checkRoot(root); err != nil {
		return err
	}
	var counts, displs []int
	if c.rank == root {
		if len(recv) < len(send)*c.size {
			return fmt.Errorf("mpi: gather: %w: recv holds %d bytes, %d ranks send %d", ErrArg, len(recv), c.size, len(send))
		}
		counts, displs = make([]int, c.size), make([]int, c.size)
		for i := range counts {
			counts[i], displs[i] = len(send), i*len(send)
		}
	}
	return c.gatherv(c.nextTag(), send, recv, counts, displs, root)
}

// Gatherv collects counts[i] bytes from rank i into root's recv at
// displs[i]; counts and displs matter at root only.
func (c *Comm) Gatherv(send, recv []byte, counts, displs []int, root int) error {
	if err := c.checkOp(); err != nil {
		return err
	}
	if err := c.checkRoot(root); err != nil {
		return err
	}
	if c.rank == root {
		if err := c.checkV("gatherv", len(recv), counts, displs); err != nil {
			return err
		}
	}
	return c.gatherv(c.nextTag(), send, recv, counts, displs, root)
}

func (c *Comm) checkV(op string, n int, counts, displs []int) error {
	if len(counts) != c.size || len(displs) != c.size {
		return fmt.Errorf("mpi: %s: %w: %d counts and %d displacements for %d ranks", op, ErrArg, len(counts), len(displs), c.size)
	}
	for i := range counts {
		if counts[i] < 0 || displs[i] < 0 || displs[i]+counts[i] > n {
			return fmt.Errorf("mpi: %s: %w: block %d (%d bytes at %d) outside a %d-byte buffer", op, ErrArg, i, counts[i], displs[i], n)
		}
	}
	return nil
}

func (c *Comm) gatherv(tag int, send, recv []byte, counts, displs []int, root int) error {
	if c.rank != root {
		if err := c.csend(root, tag, send); err != nil {
			return fmt.Errorf("mpi: gather: %w", err)
		}
		return nil
	}
	if len(send) != counts[root] {
		return fmt.Errorf("mpi: gather: %w: root sends %d bytes, its count is %d", ErrArg, len(send), counts[root])
	}
	reqs := make([]*Request, c.size)
	for i := range reqs {
		if i != root {
			reqs[i] = c.cirecv(recv[displs[i]:displs[i]+counts[i]], i, tag)
		}
	}
	copy(recv[displs[root]:], send)
	if err := waitColl(reqs, counts); err != nil {
		return fmt.Errorf("mpi: gather: %w", err)
	}
	return nil
}

// Scatter sends the i-th len(recv)-byte block of root's send to rank i.
func (c *Comm) Scatter(send, recv []byte, root int) error {
	if err := c.checkOp(); err != nil {
		return err
	}
	if err := c.checkRoot(root); err != nil {
		return err
	}
	var counts, displs []int
	if c.rank == root {
		if len(send) < len(recv)*c.size {
			return fmt.Errorf("mpi: scatter: %w: send holds %d bytes for %d ranks of %d", ErrArg, len(send), c.size, len(recv))
		}
		counts, displs = make([]int, c.size), make([]int, c.size)
		for i := range counts {
			counts[i], displs[i] = len(recv), i*len(recv)
		}
	}
	return c.scatterv(c.nextTag(), send, counts, displs, recv, root)
}

// Scatterv sends counts[i] bytes at displs[i] of root's send to rank i.
func (c *Comm) Scatterv(send []byte, counts, displs []int, recv []byte, root int) error {
	if err := c.checkOp(); err != nil {
		return err
	}
	if err := c.checkRoot(root); err != nil {
		return err
	}
	if c.rank == root {
		if err := c.checkV("scatterv", len(send), counts, displs); err != nil {
			return err
		}
	}
	return c.scatterv(c.nextTag(), send, counts, displs, recv, root)
}

func (c *Comm) scatterv(tag int, send []byte, counts, displs []int, recv []byte, root int) error {
	if c.rank != root {
		if err := c.crecv(context.Background(), recv, root, tag); err != nil {
			return fmt.Errorf("mpi: scatter: %w", err)
		}
		return nil
	}
	reqs := make([]*Request, c.size)
	for i := range reqs {
		if i == root {
			continue
		}
		r, err := c.cisend(i, tag, send[displs[i]:displs[i]+counts[i]])
		if err != nil {
			return fmt.Errorf("mpi: scatter: %w", err)
		}
		reqs[i] = r
	}
	if len(recv) != counts[root] {
		return fmt.Errorf("mpi: scatter: %w: root receives %d bytes, its count is %d", ErrArg, len(recv), counts[root])
	}
	copy(recv, send[displs[root]:displs[root]+counts[root]])
	if err := waitColl(reqs, nil); err != nil {
		return fmt.Errorf("mpi: scatter: %w", err)
	}
	return nil
}

// Allgather collects every rank's send into every rank's recv, in rank
// order (ring).
func (c *Comm) Allgather(send, recv []byte) error {
	counts, displs, err := c.allgatherArgs(send, recv)
	if err != nil {
		return err
	}
	return c.allgatherv(c.nextTag(), send, recv, counts, displs)
}

func (c *Comm) allgatherArgs(send, recv []byte) (counts, displs []int, err error) {
	if err := c.checkOp(); err != nil {
		return nil, nil, err
	}
	b, n := len(send), c.size
	if len(recv) < b*n {
		return nil, nil, fmt.Errorf("mpi: allgather: %w: recv holds %d bytes, %d ranks send %d", ErrArg, len(recv), n, b)
	}
	counts, displs = make([]int, n), make([]int, n)
	for i := range counts {
		counts[i], displs[i] = b, i*b
	}
	return counts, displs, nil
}

// allgatherv passes the blocks around the ring: at step s each rank
// forwards the block it got at step s-1 (its own first).
func (c *Comm) allgatherv(tag int, send, recv []byte, counts, displs []int) error {
	n, r := c.size, c.rank
	copy(recv[displs[r]:displs[r]+counts[r]], send)
	block := func(i int) []byte { i = (i%n + n) % n; return recv[displs[i] : displs[i]+counts[i]] }
	for s := 0; s < n-1; s++ {
		if err := c.csendrecv(context.Background(), block(r-s), (r+1)%n, block(r-s-1), (r-1+n)%n, tag); err != nil {
			return fmt.Errorf("mpi: allgather: %w", err)
		}
	}
	return nil
}

// Alltoall sends block i of send to rank i and receives rank i's block
// into block i of recv (blocks are len(send)/size bytes).
func (c *Comm) Alltoall(send, recv []byte) error {
	sc, sd, err := c.alltoallArgs(send, recv)
	if err != nil {
		return err
	}
	return c.alltoallv(c.nextTag(), send, sc, sd, recv, sc, sd)
}

func (c *Comm) alltoallArgs(send, recv []byte) (counts, displs []int, err error) {
	if err := c.checkOp(); err != nil {
		return nil, nil, err
	}
	n := c.size
	if len(send)%n != 0 || len(recv) < len(send) {
		return nil, nil, fmt.Errorf("mpi: alltoall: %w: send of %d bytes is not %d equal blocks, or recv (%d bytes) is smaller", ErrArg, len(send), n, len(recv))
	}
	b := len(send) / n
	counts, displs = make([]int, n), make([]int, n)
	for i := range counts {
		counts[i], displs[i] = b, i*b
	}
	return counts, displs, nil
}

// alltoallv exchanges pairwise: at step s rank r sends to r+s and
// receives from r-s. A send that overlaps recv (MPI_IN_PLACE) is copied
// first: a block may be received into before it is sent.
func (c *Comm) alltoallv(tag int, send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	n, r := c.size, c.rank
	if overlap(send, recv) {
		send = append([]byte(nil), send...)
	}
	copy(recv[rdispls[r]:rdispls[r]+rcounts[r]], send[sdispls[r]:sdispls[r]+scounts[r]])
	for s := 1; s < n; s++ {
		dst, src := (r+s)%n, (r-s+n)%n
		if err := c.csendrecv(context.Background(), send[sdispls[dst]:sdispls[dst]+scounts[dst]], dst, recv[rdispls[src]:rdispls[src]+rcounts[src]], src, tag); err != nil {
			return fmt.Errorf("mpi: alltoall: %w", err)
		}
	}
	return nil
}
