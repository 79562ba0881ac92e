package capi

/*
#include "gompi.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gompi/mpi"
)

// The collectives C calls: each takes (buffer, count, datatype) as C
// passes them, with a nil req for the blocking form and a place for the
// request handle for the non-blocking one, which completes through the
// Wait/Test families like any request (p2p.go's table). Package mpi's
// collectives move bytes: a dense datatype's memory is lent as it is; a
// datatype with holes is staged, packed into Go memory before the
// collective and unpacked into C's when it ends (for a non-blocking one,
// by Request.Then before the request completes). C's memory is only
// lent to Go for the operation; C never holds a Go pointer.

// side is one buffer argument as the byte-level collective sees it:
// elements of dt at p, scale bytes each in b (the extent for memory lent
// as it is, the packed size when staged).
type side struct {
	p      unsafe.Pointer
	dt     *mpi.Datatype
	b      []byte
	scale  int
	staged bool
}

// newSide lends n elements of dt at p, or stages them (packed from C's
// memory, which the collective may read or partly leave as it is) when dt
// is a derived type with holes and raw is false; raw lends the memory as
// laid out (what a user op combines). A predefined type is lent as it is,
// a pair type's padding included (what package mpi's pair ops expect).
func newSide(p unsafe.Pointer, n int, dt *mpi.Datatype, raw bool) (side, error) {
	s := side{p: p, dt: dt, scale: dt.Extent()}
	if n == 0 {
		s.b = []byte{}
		return s, nil
	}
	if dt.Dense() || raw || predef(dt) {
		if p == nil {
			return s, fmt.Errorf("%d elements at a null address: %w", n, mpi.ErrArg)
		}
		s.b = bytes(p, C.int64_t(n*s.scale))
		return s, nil
	}
	s.staged, s.scale = true, dt.Size()
	s.b = make([]byte, n*s.scale)
	_, err := mpi.Pack(cbuf(p, n, dt), s.b, 0)
	return s, err
}

// predef reports whether dt is a predefined type (its kind is not
// coll.KindNone, 0).
func predef(dt *mpi.Datatype) bool { return dt.Kind() != 0 }

// block is elements [off, off+n) of s.
func (s side) block(off, n int) []byte { return s.b[off*s.scale : (off+n)*s.scale] }

// unpack copies staged blocks (counts[i] elements at displs[i]; all of s
// when counts is nil) back into C's memory.
func (s side) unpack(counts, displs []int) error {
	if !s.staged {
		return nil
	}
	if counts == nil {
		_, err := mpi.Unpack(s.b, 0, cbuf(s.p, len(s.b)/max(1, s.scale), s.dt))
		return err
	}
	for i, n := range counts {
		at := unsafe.Add(s.p, displs[i]*s.dt.Extent())
		if _, err := mpi.Unpack(s.block(displs[i], n), 0, cbuf(at, n, s.dt)); err != nil {
			return err
		}
	}
	return nil
}

// run runs a collective: blocking when req is nil, otherwise started and
// filed as a request; after (unpacking staged receives, or nil) runs once
// the collective has completed, before a waiter sees it complete.
func run(ch C.uintptr_t, req *C.uintptr_t, block func(*mpi.Comm) error, start func(*mpi.Comm) (*mpi.Request, error), after func() error) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	if req == nil {
		err := block(c)
		if err == nil && after != nil {
			err = after()
		}
		return code(err)
	}
	r, err := start(c)
	if err != nil {
		return code(err)
	}
	if after != nil {
		r = r.Then(after)
	}
	*req = newRequest(r, ch)
	return 0
}

// gompi_go_barrier is MPI_Barrier, or MPI_Ibarrier with a req.
//
//export gompi_go_barrier
func gompi_go_barrier(ch C.uintptr_t, req *C.uintptr_t) C.int {
	return run(ch, req, (*mpi.Comm).Barrier, (*mpi.Comm).Ibarrier, nil)
}

// gompi_go_bcast is MPI_Bcast, or MPI_Ibcast with a req.
//
//export gompi_go_bcast
func gompi_go_bcast(ch C.uintptr_t, p unsafe.Pointer, count C.int64_t, dh C.uintptr_t, root C.int, req *C.uintptr_t) C.int {
	dt, rc := dtypeOf(dh)
	if rc != 0 {
		return rc
	}
	s, err := newSide(p, int(count), dt, false)
	if err != nil {
		return code(err)
	}
	var after func() error
	if s.staged {
		after = func() error { return s.unpack(nil, nil) }
	}
	at := rootIn(root)
	return run(ch, req, func(c *mpi.Comm) error { return c.Bcast(s.b, at) },
		func(c *mpi.Comm) (*mpi.Request, error) { return c.Ibcast(s.b, at) }, after)
}

// rootIn maps a C root argument to package mpi's: on an
// intercommunicator MPI_ROOT and MPI_PROC_NULL differ (mpi.Root,
// mpi.ProcNull).
func rootIn(root C.int) int {
	if root == rootABI {
		return mpi.Root
	}
	return peerIn(root)
}

// rootABI is MPI_ROOT's value in the standard ABI.
const rootABI = -4

// The reductions gompi_go_reduce runs (coll.c's names).
const (
	redReduce = iota
	redAllreduce
	redScan
	redExscan
	redScatterBlock
	redScatter
)

// gompi_go_reduce runs the reductions: send holds count elements (the
// whole input; for Reduce_scatter_block count is the block), recv this
// rank's result (nil where it means nothing). For MPI_IN_PLACE C passes
// recv as send.
//
//export gompi_go_reduce
func gompi_go_reduce(kind C.int, ch C.uintptr_t, sp, rp unsafe.Pointer, count C.int64_t, counts *C.int, dh, oh C.uintptr_t,
	root C.int, req *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	dt, rc := dtypeOf(dh)
	if rc != 0 {
		return rc
	}
	red, raw, rc := opFor(oh, dh, dt)
	if rc != 0 {
		return rc
	}
	n, m, cs := int(count), int(count), []int(nil)
	switch kind {
	case redScatterBlock:
		n *= c.Size()
	case redScatter:
		cs, n = ints(counts, c.Size()), 0
		for _, k := range cs {
			n += k
		}
		m = cs[c.Rank()]
	case redReduce:
		if c.Rank() != int(root) {
			m = 0
		}
	}
	return reduceRun(kind, ch, req, red, sp, n, rp, m, cs, dt, raw, int(root))
}

// reduceRun lends or stages the buffers and runs reduction kind.
func reduceRun(kind C.int, ch C.uintptr_t, req *C.uintptr_t, red mpi.Reduction, sp unsafe.Pointer, n int,
	rp unsafe.Pointer, m int, cs []int, dt *mpi.Datatype, raw bool, root int) C.int {
	s, err := newSide(sp, n, dt, raw)
	if err != nil {
		return code(err)
	}
	r, err := newSide(rp, m, dt, raw)
	if err != nil {
		return code(err)
	}
	var after func() error
	if r.staged {
		after = func() error { return r.unpack(nil, nil) }
	}
	bc := make([]int, len(cs))
	for i, k := range cs {
		bc[i] = k * s.scale
	}
	block := func(c *mpi.Comm) error {
		switch kind {
		case redReduce:
			return c.ReduceBytes(s.b, r.b, red, root)
		case redAllreduce:
			return c.AllreduceBytes(s.b, r.b, red)
		case redScan:
			return c.Scan(s.b, r.b, red)
		case redExscan:
			return c.Exscan(s.b, r.b, red)
		case redScatterBlock:
			return c.ReduceScatterBlock(s.b, r.b, red)
		}
		return c.ReduceScatter(s.b, r.b, bc, red)
	}
	start := func(c *mpi.Comm) (*mpi.Request, error) {
		switch kind {
		case redReduce:
			return c.IreduceBytes(s.b, r.b, red, root)
		case redAllreduce:
			return c.IallreduceBytes(s.b, r.b, red)
		case redScan:
			return c.Iscan(s.b, r.b, red)
		case redExscan:
			return c.Iexscan(s.b, r.b, red)
		case redScatterBlock:
			return c.IreduceScatterBlock(s.b, r.b, red)
		}
		return c.IreduceScatter(s.b, r.b, bc, red)
	}
	return run(ch, req, block, start, after)
}

// The rooted and all-to-all collectives gompi_go_vcoll runs (coll.c's
// names). Each runs as its v-form on bytes.
const (
	vGather = iota
	vGatherv
	vScatter
	vScatterv
	vAllgather
	vAllgatherv
	vAlltoall
	vAlltoallv
)

// vbuf is one buffer argument of a v-collective: C's per-rank counts and
// displacements (nil for one block of n elements, or size blocks of n
// when uniform), and its datatype.
type vbuf struct {
	p              unsafe.Pointer
	n              C.int64_t
	dh             C.uintptr_t
	counts, displs *C.int
	used, uniform  bool
}

// layout returns the per-rank blocks of a buffer in elements, and how many
// elements it spans.
func (v vbuf) layout(size int) (counts, displs []int, span int) {
	switch {
	case !v.used:
		return nil, nil, 0
	case v.counts != nil:
		counts, displs = ints(v.counts, size), ints(v.displs, size)
	case v.uniform:
		counts, displs = make([]int, size), make([]int, size)
		for i := range counts {
			counts[i], displs[i] = int(v.n), i*int(v.n)
		}
	default:
		return nil, nil, int(v.n)
	}
	for i := range counts {
		span = max(span, displs[i]+counts[i])
	}
	return counts, displs, span
}

// bytesOf scales element counts to a side's bytes.
func bytesOf(x []int, s side) []int {
	if x == nil {
		return nil
	}
	out := make([]int, len(x))
	for i, v := range x {
		out[i] = v * s.scale
	}
	return out
}
