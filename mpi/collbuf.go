package mpi

import "fmt"

// The collectives on Bufs: what a caller with (buffer, count, datatype)
// arguments (C) uses. Counts and displacements are in elements of the
// Buf's datatype (displacements in its extent, from Base), as MPI's.
// Dense datatypes move the memory itself; others are packed before and
// unpacked after the byte-level collective runs.

// vLayout is a v-collective's blocks of b: their places in the bytes the
// byte-level collective sees, and how to bring those bytes back into b.
type vLayout struct {
	bytes          []byte
	counts, displs []int // in bytes of bytes
	finish         func()
}

// layoutV lays out counts[i] elements at displs[i] of b. For a dense
// datatype bytes is b's memory; otherwise a packed buffer, filled from b
// now when fill is set (the blocks are sent), unpacked into b by finish.
func layoutV(b Buf, counts, displs []int, fill bool) (vLayout, error) {
	if b.Type == nil || len(counts) != len(displs) {
		return vLayout{}, fmt.Errorf("mpi: %w: %d counts, %d displacements, datatype %v", ErrArg, len(counts), len(displs), b.Type)
	}
	size, ext := b.Type.size, b.Type.Extent()
	l := vLayout{counts: make([]int, len(counts)), displs: make([]int, len(counts)), finish: func() {}}
	blocks := make([]Buf, len(counts))
	total := 0
	for i := range counts {
		blocks[i] = Buf{Mem: b.Mem, Base: b.Base + displs[i]*ext, Count: counts[i], Type: b.Type}
		if err := blocks[i].check(); err != nil {
			return vLayout{}, err
		}
		l.counts[i], l.displs[i] = counts[i]*size, total
		total += counts[i] * size
	}
	if b.Type.Dense() {
		l.bytes = b.Mem
		for i := range counts {
			l.displs[i] = blocks[i].Base
		}
		return l, nil
	}
	l.bytes = make([]byte, total)
	if fill {
		for i, blk := range blocks {
			blk.pack(l.bytes[l.displs[i] : l.displs[i]+l.counts[i]])
		}
		return l, nil
	}
	l.finish = func() {
		for i, blk := range blocks {
			blk.unpack(l.bytes[l.displs[i] : l.displs[i]+l.counts[i]])
		}
	}
	return l, nil
}

// recvInto is where one Buf's packed bytes land, and how they get into it.
func recvInto(b Buf) ([]byte, func(), error) {
	buf, direct, err := b.recvTarget()
	if err != nil || direct {
		return buf, func() {}, err
	}
	return buf, func() { b.unpack(buf) }, nil
}

// BcastBuf broadcasts root's b into every rank's b.
func (c *Comm) BcastBuf(b Buf, root int) error {
	buf, finish, err := recvInto(b)
	if err != nil {
		return err
	}
	// On an intercommunicator the root passes Root and its group ProcNull.
	sends := root == Root || (c.inter == nil && c.rank == root)
	if sends {
		if buf, err = b.Packed(); err != nil {
			return err
		}
	}
	if err := c.Bcast(buf, root); err != nil {
		return err
	}
	if !sends && root != ProcNull {
		finish()
	}
	return nil
}

// GathervBuf gathers every rank's send into root's recv: rank i's
// counts[i] elements at displs[i] (read at root only).
func (c *Comm) GathervBuf(send, recv Buf, counts, displs []int, root int) error {
	data, err := send.Packed()
	if err != nil {
		return err
	}
	if c.rank != root {
		return c.Gatherv(data, nil, nil, nil, root)
	}
	l, err := layoutV(recv, counts, displs, false)
	if err != nil {
		return err
	}
	if err := c.Gatherv(data, l.bytes, l.counts, l.displs, root); err != nil {
		return err
	}
	l.finish()
	return nil
}

// ScattervBuf sends counts[i] elements at displs[i] of root's send to
// rank i's recv.
func (c *Comm) ScattervBuf(send Buf, counts, displs []int, recv Buf, root int) error {
	buf, finish, err := recvInto(recv)
	if err != nil {
		return err
	}
	var l vLayout
	if c.rank == root {
		if l, err = layoutV(send, counts, displs, true); err != nil {
			return err
		}
	}
	if err := c.Scatterv(l.bytes, l.counts, l.displs, buf, root); err != nil {
		return err
	}
	finish()
	return nil
}

// AllgathervBuf gathers every rank's send into every rank's recv: rank
// i's counts[i] elements at displs[i].
func (c *Comm) AllgathervBuf(send, recv Buf, counts, displs []int) error {
	data, err := send.Packed()
	if err != nil {
		return err
	}
	l, err := layoutV(recv, counts, displs, false)
	if err != nil {
		return err
	}
	if overlap(data, l.bytes) {
		data = append([]byte(nil), data...)
	}
	if err := c.Allgatherv(data, l.bytes, l.counts, l.displs); err != nil {
		return err
	}
	l.finish()
	return nil
}

// AlltoallvBuf sends scounts[i] elements at sdispls[i] of send to rank i
// and receives rank i's rcounts[i] elements at rdispls[i] of recv.
func (c *Comm) AlltoallvBuf(send Buf, scounts, sdispls []int, recv Buf, rcounts, rdispls []int) error {
	s, err := layoutV(send, scounts, sdispls, true)
	if err != nil {
		return err
	}
	r, err := layoutV(recv, rcounts, rdispls, false)
	if err != nil {
		return err
	}
	if err := c.Alltoallv(s.bytes, s.counts, s.displs, r.bytes, r.counts, r.displs); err != nil {
		return err
	}
	r.finish()
	return nil
}
