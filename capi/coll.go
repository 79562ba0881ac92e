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

//export gompi_go_barrier
func gompi_go_barrier(ch C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	return code(c.Barrier())
}

//export gompi_go_bcast
func gompi_go_bcast(ch C.uintptr_t, buf unsafe.Pointer, n C.int64_t, root C.int) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	return code(c.Bcast(bytes(buf, n), int(root)))
}

// opOf maps a predefined C op to package mpi's.
func opOf(op C.uintptr_t) (mpi.Op, C.int) {
	switch op {
	case 0x21:
		return mpi.Sum, 0
	case 0x22:
		return mpi.Min, 0
	case 0x23:
		return mpi.Max, 0
	case 0x24:
		return mpi.Prod, 0
	case 0x28, 0x29, 0x2a, 0x30, 0x31, 0x32, 0x38, 0x39, 0x3c, 0x3d:
		return 0, errUnsupp // predefined, but package mpi lacks them yet
	}
	return 0, errOp
}

// reducer runs a reduction over n elements of one Go type.
type reducer func(c *mpi.Comm, send, recv unsafe.Pointer, n int, op mpi.Op, root int) error

func reduceAs[T mpi.Numeric](c *mpi.Comm, send, recv unsafe.Pointer, n int, op mpi.Op, root int) error {
	s := unsafe.Slice((*T)(send), n)
	var r []T
	if recv != nil {
		r = unsafe.Slice((*T)(recv), n)
	}
	if root < 0 {
		return mpi.Allreduce(c, s, r, op)
	}
	return mpi.Reduce(c, s, r, op, root)
}

// reducers maps the predefined C datatypes that hold numbers to the Go
// type of the same size and kind (LP64: long is 64 bits).
var reducers = map[C.uintptr_t]reducer{
	0x201: reduceAs[int64], 0x202: reduceAs[int64], 0x203: reduceAs[int64], // AINT, COUNT, OFFSET
	0x208: reduceAs[int16], 0x209: reduceAs[int32], 0x20a: reduceAs[int64], 0x20b: reduceAs[int64],
	0x20c: reduceAs[uint16], 0x20d: reduceAs[uint32], 0x20e: reduceAs[uint64], 0x20f: reduceAs[uint64],
	0x210: reduceAs[float32], 0x214: reduceAs[float64],
	0x240: reduceAs[int8], 0x241: reduceAs[uint8], 0x244: reduceAs[int8], 0x245: reduceAs[uint8],
	0x248: reduceAs[int16], 0x249: reduceAs[uint16], 0x250: reduceAs[int32], 0x251: reduceAs[uint32],
	0x258: reduceAs[int64], 0x259: reduceAs[uint64],
}

// gompi_go_reduce reduces count elements; root < 0 means Allreduce. send
// is recv itself for MPI_IN_PLACE (the C side resolved it).
//
//export gompi_go_reduce
func gompi_go_reduce(ch C.uintptr_t, send, recv unsafe.Pointer, count C.int64_t, dt, op C.uintptr_t, root C.int) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	o, rc := opOf(op)
	if rc != 0 {
		return rc
	}
	red := reducers[dt]
	if red == nil {
		return errUnsupp
	}
	return code(red(c, send, recv, int(count), o, int(root)))
}

// gompi_go_gatherv is Gather, Gatherv, Scatter, Scatterv, Allgather and
// Alltoall over bytes: C has turned counts and displacements into bytes.
//
//export gompi_go_gatherv
func gompi_go_gatherv(kind C.int, ch C.uintptr_t, send unsafe.Pointer, sn C.int64_t, recv unsafe.Pointer, rn C.int64_t,
	counts, displs *C.int64_t, root C.int) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	s, r := bytes(send, sn), bytes(recv, rn)
	var cs, ds []int
	if counts != nil {
		cs, ds = make([]int, c.Size()), make([]int, c.Size())
		for i := range cs {
			cs[i] = int(unsafe.Slice(counts, c.Size())[i])
			ds[i] = int(unsafe.Slice(displs, c.Size())[i])
		}
	}
	switch kind {
	case 0:
		err = c.Gather(s, r, int(root))
	case 1:
		err = c.Gatherv(s, r, cs, ds, int(root))
	case 2:
		err = c.Scatter(s, r, int(root))
	case 3:
		err = c.Scatterv(s, cs, ds, r, int(root))
	case 4:
		err = c.Allgather(s, r)
	case 5:
		err = c.Alltoall(s, r)
	default:
		err = fmt.Errorf("collective kind %d: %w", kind, mpi.ErrArg)
	}
	return code(err)
}

// gompi_go_ibcast starts a Bcast (a Barrier when buf is nil and n < 0).
//
//export gompi_go_ibcast
func gompi_go_ibcast(ch C.uintptr_t, buf unsafe.Pointer, n C.int64_t, root C.int, req *C.uintptr_t) C.int {
	return start(ch, 0, req, func(c *mpi.Comm) (*mpi.Request, error) {
		if n < 0 {
			return c.Ibarrier()
		}
		return c.Ibcast(bytes(buf, n), int(root))
	})
}
