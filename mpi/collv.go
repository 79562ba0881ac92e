package mpi

import (
	"context"
	"fmt"
	"unsafe"

	"gompi/frameworks/coll"
)

// The collectives beyond the first ones (coll.go), and the non-blocking
// form of every collective. Counts and displacements are in bytes; a
// Datatype's caller scales them (or uses Alltoallw's Bufs). MPI_IN_PLACE
// is the receive region passed as send: the algorithms allow send to
// alias recv wherever MPI allows IN_PLACE. A non-blocking form checks its
// arguments and takes its collective tag on the caller's goroutine, in
// program order, and runs the algorithm on a goroutine of its own that
// ends with it (Comm.async).

// overlap reports whether two byte slices share memory.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}

// Allgatherv collects every rank's send into every rank's recv: rank i's
// counts[i] bytes at displs[i] (ring).
func (c *Comm) Allgatherv(send, recv []byte, counts, displs []int) error {
	if err := c.allgathervArgs(send, recv, counts, displs); err != nil {
		return err
	}
	return c.allgatherv(c.nextTag(), send, recv, counts, displs)
}

// Iallgatherv starts an Allgatherv.
func (c *Comm) Iallgatherv(send, recv []byte, counts, displs []int) (*Request, error) {
	if err := c.allgathervArgs(send, recv, counts, displs); err != nil {
		return nil, err
	}
	tag := c.nextTag()
	return c.async(func() error { return c.allgatherv(tag, send, recv, counts, displs) }), nil
}

func (c *Comm) allgathervArgs(send, recv []byte, counts, displs []int) error {
	if err := c.checkOp(); err != nil {
		return err
	}
	if err := c.checkV("allgatherv", len(recv), counts, displs); err != nil {
		return err
	}
	if len(send) != counts[c.rank] {
		return fmt.Errorf("mpi: allgatherv: %w: rank %d sends %d bytes, its count is %d", ErrArg, c.rank, len(send), counts[c.rank])
	}
	return nil
}

// Iallgather starts an Allgather.
func (c *Comm) Iallgather(send, recv []byte) (*Request, error) {
	counts, displs, err := c.allgatherArgs(send, recv)
	if err != nil {
		return nil, err
	}
	tag := c.nextTag()
	return c.async(func() error { return c.allgatherv(tag, send, recv, counts, displs) }), nil
}

// Alltoallv sends scounts[i] bytes at sdispls[i] of send to rank i and
// receives rank i's rcounts[i] bytes at rdispls[i] of recv.
func (c *Comm) Alltoallv(send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	if err := c.alltoallvArgs(send, scounts, sdispls, recv, rcounts, rdispls); err != nil {
		return err
	}
	return c.alltoallv(c.nextTag(), send, scounts, sdispls, recv, rcounts, rdispls)
}

// Ialltoallv starts an Alltoallv.
func (c *Comm) Ialltoallv(send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) (*Request, error) {
	if err := c.alltoallvArgs(send, scounts, sdispls, recv, rcounts, rdispls); err != nil {
		return nil, err
	}
	tag := c.nextTag()
	return c.async(func() error { return c.alltoallv(tag, send, scounts, sdispls, recv, rcounts, rdispls) }), nil
}

func (c *Comm) alltoallvArgs(send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	if err := c.checkOp(); err != nil {
		return err
	}
	if err := c.checkV("alltoallv", len(send), scounts, sdispls); err != nil {
		return err
	}
	return c.checkV("alltoallv", len(recv), rcounts, rdispls)
}

// Ialltoall starts an Alltoall.
func (c *Comm) Ialltoall(send, recv []byte) (*Request, error) {
	counts, displs, err := c.alltoallArgs(send, recv)
	if err != nil {
		return nil, err
	}
	tag := c.nextTag()
	return c.async(func() error { return c.alltoallv(tag, send, counts, displs, recv, counts, displs) }), nil
}

// Alltoallw sends send[i] to rank i and receives rank i's message into
// recv[i]: each peer with a datatype, count and place of its own (MPI's
// byte displacements are the Bufs' Base). Messages move packed.
func (c *Comm) Alltoallw(send, recv []Buf) error {
	if err := c.alltoallwArgs(send, recv); err != nil {
		return err
	}
	return c.alltoallw(c.nextTag(), send, recv)
}

// Ialltoallw starts an Alltoallw.
func (c *Comm) Ialltoallw(send, recv []Buf) (*Request, error) {
	if err := c.alltoallwArgs(send, recv); err != nil {
		return nil, err
	}
	tag := c.nextTag()
	return c.async(func() error { return c.alltoallw(tag, send, recv) }), nil
}

func (c *Comm) alltoallwArgs(send, recv []Buf) error {
	if err := c.checkOp(); err != nil {
		return err
	}
	if len(send) != c.size || len(recv) != c.size {
		return fmt.Errorf("mpi: alltoallw: %w: %d send and %d receive buffers for %d ranks", ErrArg, len(send), len(recv), c.size)
	}
	for i := range send {
		if err := send[i].check(); err != nil {
			return err
		}
		if err := recv[i].check(); err != nil {
			return err
		}
	}
	return nil
}

// alltoallw packs every outgoing block first (an in-place exchange may
// receive into a block before it is sent) and exchanges pairwise.
func (c *Comm) alltoallw(tag int, send, recv []Buf) error {
	n, r := c.size, c.rank
	out := make([][]byte, n)
	for i := range send {
		p, err := send[i].Packed()
		if err != nil {
			return err
		}
		out[i] = append([]byte(nil), p...)
	}
	for s := 0; s < n; s++ {
		dst, src := (r+s)%n, (r-s+n)%n
		in := make([]byte, recv[src].Type.PackSize(recv[src].Count))
		if s == 0 {
			copy(in, out[r])
		} else if err := c.csendrecv(context.Background(), out[dst], dst, in, src, tag); err != nil {
			return fmt.Errorf("mpi: alltoallw: %w", err)
		}
		recv[src].unpack(in)
	}
	return nil
}

// Igather starts a Gather.
func (c *Comm) Igather(send, recv []byte, root int) (*Request, error) {
	counts, displs, err := c.rootedArgs("gather", len(send), len(recv), root)
	if err != nil {
		return nil, err
	}
	tag := c.nextTag()
	return c.async(func() error { return c.gatherv(tag, send, recv, counts, displs, root) }), nil
}

// Igatherv starts a Gatherv.
func (c *Comm) Igatherv(send, recv []byte, counts, displs []int, root int) (*Request, error) {
	if err := c.vArgs("gatherv", len(recv), counts, displs, root); err != nil {
		return nil, err
	}
	tag := c.nextTag()
	return c.async(func() error { return c.gatherv(tag, send, recv, counts, displs, root) }), nil
}

// Iscatter starts a Scatter.
func (c *Comm) Iscatter(send, recv []byte, root int) (*Request, error) {
	counts, displs, err := c.rootedArgs("scatter", len(recv), len(send), root)
	if err != nil {
		return nil, err
	}
	tag := c.nextTag()
	return c.async(func() error { return c.scatterv(tag, send, counts, displs, recv, root) }), nil
}

// Iscatterv starts a Scatterv.
func (c *Comm) Iscatterv(send []byte, counts, displs []int, recv []byte, root int) (*Request, error) {
	if err := c.vArgs("scatterv", len(send), counts, displs, root); err != nil {
		return nil, err
	}
	tag := c.nextTag()
	return c.async(func() error { return c.scatterv(tag, send, counts, displs, recv, root) }), nil
}

// rootedArgs checks a Gather's or Scatter's arguments: blocks of b bytes,
// every rank's in root's all-ranks buffer of total bytes.
func (c *Comm) rootedArgs(op string, b, total, root int) (counts, displs []int, err error) {
	if err := c.checkOp(); err != nil {
		return nil, nil, err
	}
	if err := c.checkRoot(root); err != nil {
		return nil, nil, err
	}
	if c.rank != root {
		return nil, nil, nil
	}
	if total < b*c.size {
		return nil, nil, fmt.Errorf("mpi: %s: %w: root's buffer holds %d bytes for %d ranks of %d", op, ErrArg, total, c.size, b)
	}
	counts, displs = make([]int, c.size), make([]int, c.size)
	for i := range counts {
		counts[i], displs[i] = b, i*b
	}
	return counts, displs, nil
}

func (c *Comm) vArgs(op string, n int, counts, displs []int, root int) error {
	if err := c.checkOp(); err != nil {
		return err
	}
	if err := c.checkRoot(root); err != nil {
		return err
	}
	if c.rank == root {
		return c.checkV(op, n, counts, displs)
	}
	return nil
}

// ReduceScatterBlock combines every rank's send (size blocks of
// len(recv) bytes) with red and leaves block i of the result in rank i's
// recv. It reduces to rank 0 (in rank order) and scatters from there.
func (c *Comm) ReduceScatterBlock(send, recv []byte, red Reduction) error {
	counts, err := c.reduceScatterArgs("reduce_scatter_block", send, red, nil, len(recv))
	if err != nil {
		return err
	}
	return c.reduceScatter(c.nextTag(), c.nextTag(), send, recv, counts, red)
}

// IreduceScatterBlock starts a ReduceScatterBlock.
func (c *Comm) IreduceScatterBlock(send, recv []byte, red Reduction) (*Request, error) {
	counts, err := c.reduceScatterArgs("ireduce_scatter_block", send, red, nil, len(recv))
	if err != nil {
		return nil, err
	}
	t1, t2 := c.nextTag(), c.nextTag()
	return c.async(func() error { return c.reduceScatter(t1, t2, send, recv, counts, red) }), nil
}

// ReduceScatter combines every rank's send with red and leaves the i-th
// part of the result, counts[i] bytes (the parts back to back), in rank
// i's recv.
func (c *Comm) ReduceScatter(send, recv []byte, counts []int, red Reduction) error {
	counts, err := c.reduceScatterArgs("reduce_scatter", send, red, counts, 0)
	if err != nil {
		return err
	}
	return c.reduceScatter(c.nextTag(), c.nextTag(), send, recv, counts, red)
}

// IreduceScatter starts a ReduceScatter.
func (c *Comm) IreduceScatter(send, recv []byte, counts []int, red Reduction) (*Request, error) {
	counts, err := c.reduceScatterArgs("ireduce_scatter", send, red, counts, 0)
	if err != nil {
		return nil, err
	}
	t1, t2 := c.nextTag(), c.nextTag()
	return c.async(func() error { return c.reduceScatter(t1, t2, send, recv, counts, red) }), nil
}

// reduceScatterArgs checks the arguments and returns the parts' sizes
// (block bytes each when counts is nil).
func (c *Comm) reduceScatterArgs(op string, send []byte, red Reduction, counts []int, block int) ([]int, error) {
	if err := c.checkOp(); err != nil {
		return nil, err
	}
	if counts == nil {
		counts = repeat(block, c.size)
	}
	total := 0
	for _, n := range counts {
		if n < 0 || n%max(1, red.Elem) != 0 {
			return nil, fmt.Errorf("mpi: %s: %w: part of %d bytes", op, ErrArg, n)
		}
		total += n
	}
	if len(counts) != c.size || len(send) < total {
		return nil, fmt.Errorf("mpi: %s: %w: %d counts for %d ranks, send of %d bytes for %d", op, ErrArg, len(counts), c.size, len(send), total)
	}
	return counts, checkRed(op, red, total)
}

func (c *Comm) reduceScatter(t1, t2 int, send, recv []byte, counts []int, red Reduction) error {
	total := 0
	displs := make([]int, len(counts))
	for i, n := range counts {
		displs[i], total = total, total+n
	}
	var all []byte
	if c.rank == 0 {
		all = coll.AlignedBuf(total)
	}
	if err := c.reduce(t1, send[:total], all, red, 0); err != nil {
		return err
	}
	return c.scatterv(t2, all, counts, displs, recv[:counts[c.rank]], 0)
}

// Scan leaves in rank i's recv the combination of ranks 0..i's send, in
// rank order (a chain: each rank passes its prefix on to the next).
func (c *Comm) Scan(send, recv []byte, red Reduction) error {
	if err := c.scanArgs("scan", send, recv, red); err != nil {
		return err
	}
	return c.scan(c.nextTag(), send, recv, red, false)
}

// Iscan starts a Scan.
func (c *Comm) Iscan(send, recv []byte, red Reduction) (*Request, error) {
	if err := c.scanArgs("iscan", send, recv, red); err != nil {
		return nil, err
	}
	tag := c.nextTag()
	return c.async(func() error { return c.scan(tag, send, recv, red, false) }), nil
}

// Exscan leaves in rank i's recv the combination of ranks 0..i-1's send;
// rank 0's recv is left as it is (MPI leaves it undefined).
func (c *Comm) Exscan(send, recv []byte, red Reduction) error {
	if err := c.scanArgs("exscan", send, recv, red); err != nil {
		return err
	}
	return c.scan(c.nextTag(), send, recv, red, true)
}

// Iexscan starts an Exscan.
func (c *Comm) Iexscan(send, recv []byte, red Reduction) (*Request, error) {
	if err := c.scanArgs("iexscan", send, recv, red); err != nil {
		return nil, err
	}
	tag := c.nextTag()
	return c.async(func() error { return c.scan(tag, send, recv, red, true) }), nil
}

func (c *Comm) scanArgs(op string, send, recv []byte, red Reduction) error {
	if err := c.checkOp(); err != nil {
		return err
	}
	if err := checkRed(op, red, len(send)); err != nil {
		return err
	}
	if len(recv) < len(send) {
		return fmt.Errorf("mpi: %s: %w: recv holds %d bytes, send %d", op, ErrArg, len(recv), len(send))
	}
	return nil
}

func (c *Comm) scan(tag int, send, recv []byte, red Reduction, exclusive bool) error {
	n, r := c.size, c.rank
	acc := coll.AlignedBuf(len(send))
	copy(acc, send)
	if r > 0 {
		prefix := coll.AlignedBuf(len(send))
		if err := c.crecv(context.Background(), prefix, r-1, tag); err != nil {
			return fmt.Errorf("mpi: scan: %w", err)
		}
		if exclusive {
			copy(recv, prefix) // send is in acc already: recv may alias it
		}
		red.Fn(prefix, acc) // ranks 0..r-1, then r
		acc = prefix
	}
	if r+1 < n {
		if err := c.csend(r+1, tag, acc); err != nil {
			return fmt.Errorf("mpi: scan: %w", err)
		}
	}
	if !exclusive {
		copy(recv, acc)
	}
	return nil
}
