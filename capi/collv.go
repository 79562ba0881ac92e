package capi

/*
#include "gompi.h"
*/
import "C"

import (
	"unsafe"

	"gompi/mpi"
)

// vside makes the side of a used buffer argument: its blocks in elements
// and the memory they span.
func vside(v vbuf, size int) (side, []int, []int, C.int) {
	if !v.used {
		return side{b: []byte{}}, nil, nil, 0
	}
	dt, rc := dtypeOf(v.dh)
	if rc != 0 {
		return side{}, nil, nil, rc
	}
	if v.n < 0 {
		return side{}, nil, nil, errCount
	}
	counts, displs, span := v.layout(size)
	for _, n := range counts {
		if n < 0 {
			return side{}, nil, nil, errCount
		}
	}
	s, err := newSide(v.p, span, dt, false)
	if err != nil {
		return side{}, nil, nil, code(err)
	}
	return s, counts, displs, 0
}

// gompi_go_vcoll runs Gather(v), Scatter(v), Allgather(v) and
// Alltoall(v), blocking or not (req), as package mpi's v-forms on bytes:
// C passes each buffer's count or per-rank counts and displacements in
// elements of its datatype. inPlace says MPI_IN_PLACE was given (for the
// send buffer, or Scatter's receive buffer at the root).
//
//export gompi_go_vcoll
func gompi_go_vcoll(kind C.int, ch C.uintptr_t, sp unsafe.Pointer, sn C.int64_t, sdh C.uintptr_t, scounts, sdispls *C.int,
	rp unsafe.Pointer, rn C.int64_t, rdh C.uintptr_t, rcounts, rdispls *C.int, root, inPlace C.int, req *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	size, rank := c.Size(), c.Rank()
	sv := vbuf{p: sp, n: sn, dh: sdh, counts: scounts, displs: sdispls, used: true}
	rv := vbuf{p: rp, n: rn, dh: rdh, counts: rcounts, displs: rdispls, used: true}
	switch kind {
	case vGather, vGatherv:
		rv.used, rv.uniform = rank == int(root), kind == vGather
	case vScatter, vScatterv:
		sv.used, sv.uniform = rank == int(root), kind == vScatter
	case vAllgather:
		rv.uniform = true
	case vAlltoall:
		sv.uniform, rv.uniform = true, true
	}
	if inPlace != 0 { // the data is in the other buffer already
		if kind == vScatter || kind == vScatterv {
			rv.used = false
		} else {
			sv.used = false
		}
	}
	s, sc, sd, rc := vside(sv, size)
	if rc != 0 {
		return rc
	}
	r, rcs, rds, rc := vside(rv, size)
	if rc != 0 {
		return rc
	}
	if inPlace != 0 {
		switch kind {
		case vScatter, vScatterv:
			r = side{b: s.block(sd[rank], sc[rank])}
		case vAlltoall, vAlltoallv:
			s, sc, sd = r, rcs, rds
		default:
			s = side{b: r.block(rds[rank], rcs[rank])}
		}
	}
	var after func() error
	if r.staged {
		after = func() error { return r.unpack(rcs, rds) }
	}
	return vcollRun(kind, ch, req, s, bytesOf(sc, s), bytesOf(sd, s), r, bytesOf(rcs, r), bytesOf(rds, r), int(root), after)
}

// vcollRun runs a v-collective on the sides' bytes.
func vcollRun(kind C.int, ch C.uintptr_t, req *C.uintptr_t, s side, sc, sd []int, r side, rc, rd []int, root int,
	after func() error) C.int {
	block := func(c *mpi.Comm) error {
		switch kind {
		case vGather, vGatherv:
			return c.Gatherv(s.b, r.b, rc, rd, root)
		case vScatter, vScatterv:
			return c.Scatterv(s.b, sc, sd, r.b, root)
		case vAllgather, vAllgatherv:
			return c.Allgatherv(s.b, r.b, rc, rd)
		}
		return c.Alltoallv(s.b, sc, sd, r.b, rc, rd)
	}
	start := func(c *mpi.Comm) (*mpi.Request, error) {
		switch kind {
		case vGather, vGatherv:
			return c.Igatherv(s.b, r.b, rc, rd, root)
		case vScatter, vScatterv:
			return c.Iscatterv(s.b, sc, sd, r.b, root)
		case vAllgather, vAllgatherv:
			return c.Iallgatherv(s.b, r.b, rc, rd)
		}
		return c.Ialltoallv(s.b, sc, sd, r.b, rc, rd)
	}
	return run(ch, req, block, start, after)
}

// gompi_go_alltoallw is MPI_Alltoallw (MPI_Ialltoallw with a req): per
// peer a count, a byte displacement and a datatype. For MPI_IN_PLACE C
// passes the receive arguments as the send ones.
//
//export gompi_go_alltoallw
func gompi_go_alltoallw(ch C.uintptr_t, sp unsafe.Pointer, scounts, sdispls *C.int, stypes *C.uintptr_t, rp unsafe.Pointer,
	rcounts, rdispls *C.int, rtypes *C.uintptr_t, req *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	send, rc := wbufs(sp, scounts, sdispls, stypes, c.Size())
	if rc != 0 {
		return rc
	}
	recv, rc := wbufs(rp, rcounts, rdispls, rtypes, c.Size())
	if rc != 0 {
		return rc
	}
	return run(ch, req, func(c *mpi.Comm) error { return c.Alltoallw(send, recv) },
		func(c *mpi.Comm) (*mpi.Request, error) { return c.Ialltoallw(send, recv) }, nil)
}

// wbufs lends Alltoallw's per-peer buffers.
func wbufs(p unsafe.Pointer, counts, displs *C.int, types *C.uintptr_t, size int) ([]mpi.Buf, C.int) {
	cs, ds := ints(counts, size), ints(displs, size)
	ts := unsafe.Slice(types, size)
	out := make([]mpi.Buf, size)
	for i := range out {
		dt, rc := dtypeOf(ts[i])
		if rc != 0 {
			return nil, rc
		}
		if cs[i] < 0 {
			return nil, errCount
		}
		out[i] = cbuf(unsafe.Add(p, ds[i]), cs[i], dt)
	}
	return out, 0
}
