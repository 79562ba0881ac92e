package capi

/*
#include "gompi.h"
*/
import "C"

import (
	"unsafe"

	"gompi/mpi"
)

const errTopology = 11

// cart returns the Cartesian topology of a communicator handle.
func cart(ch C.uintptr_t) (*mpi.Cart, C.int) {
	c, err := comm(ch)
	if err != nil {
		return nil, errComm
	}
	t, err := c.Cart()
	if err != nil {
		return nil, errTopology
	}
	return t, 0
}

// topology returns a communicator's topology (nil for none).
func topology(ch C.uintptr_t) (*mpi.Topology, C.int) {
	c, err := comm(ch)
	if err != nil {
		return nil, errComm
	}
	return c.Topology(), 0
}

// putInts copies vs to the C ints at p, at most n of them.
func putInts(p *C.int, n int, vs []int) {
	if n <= 0 || len(vs) == 0 {
		return
	}
	dst := unsafe.Slice(p, n)
	for i := 0; i < n && i < len(vs); i++ {
		dst[i] = rankToC(vs[i])
	}
}

// newComm files a constructor's communicator (MPI_COMM_NULL for nil).
func newComm(nc *mpi.Comm, err error, parent C.uintptr_t, out *C.uintptr_t) C.int {
	if err != nil {
		return code(err)
	}
	if nc == nil {
		*out = commNull
		return 0
	}
	*out = addComm(nc, parent)
	return 0
}

//export gompi_go_dims_create
func gompi_go_dims_create(nnodes, ndims C.int, dims *C.int) C.int {
	if ndims == 0 {
		return 0
	}
	d, err := mpi.DimsCreate(int(nnodes), ints(dims, int(ndims)))
	if err != nil {
		return C.MPI_ERR_DIMS
	}
	putInts(dims, int(ndims), d)
	return 0
}

//export gompi_go_cart_create
func gompi_go_cart_create(ch C.uintptr_t, ndims C.int, dims, periods *C.int, out *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	var d []int
	var p []bool
	if ndims > 0 {
		d = ints(dims, int(ndims))
		for _, v := range ints(periods, int(ndims)) {
			p = append(p, v != 0)
		}
	}
	nc, err := c.CartCreate(d, p)
	return newComm(nc, err, ch, out)
}

//export gompi_go_cart_sub
func gompi_go_cart_sub(ch C.uintptr_t, remain *C.int, out *C.uintptr_t) C.int {
	t, rc := cart(ch)
	if rc != 0 {
		return rc
	}
	c, _ := comm(ch)
	var keep []bool
	if len(t.Dims) > 0 {
		for _, v := range ints(remain, len(t.Dims)) {
			keep = append(keep, v != 0)
		}
	}
	nc, err := c.CartSub(keep)
	return newComm(nc, err, ch, out)
}

// gompi_go_cart_get answers MPI_Cartdim_get (dims NULL) and MPI_Cart_get
// (maxdims entries of dims, periods and this rank's coords).
//
//export gompi_go_cart_get
func gompi_go_cart_get(ch C.uintptr_t, ndims *C.int, maxdims C.int, dims, periods, coords *C.int) C.int {
	t, rc := cart(ch)
	if rc != 0 {
		return rc
	}
	if ndims != nil {
		*ndims = C.int(len(t.Dims))
		return 0
	}
	c, _ := comm(ch)
	me, err := t.Coords(c.Rank())
	if err != nil {
		return code(err)
	}
	p := make([]int, len(t.Periods))
	for i, v := range t.Periods {
		if v {
			p[i] = 1
		}
	}
	putInts(dims, int(maxdims), t.Dims)
	putInts(periods, int(maxdims), p)
	putInts(coords, int(maxdims), me)
	return 0
}

//export gompi_go_cart_coords
func gompi_go_cart_coords(ch C.uintptr_t, rank, maxdims C.int, coords *C.int) C.int {
	t, rc := cart(ch)
	if rc != 0 {
		return rc
	}
	cs, err := t.Coords(int(rank))
	if err != nil {
		return errRank
	}
	putInts(coords, int(maxdims), cs)
	return 0
}

//export gompi_go_cart_rank
func gompi_go_cart_rank(ch C.uintptr_t, coords *C.int, rank *C.int) C.int {
	t, rc := cart(ch)
	if rc != 0 {
		return rc
	}
	var cs []int
	if len(t.Dims) > 0 {
		cs = ints(coords, len(t.Dims))
	}
	r, err := t.Rank(cs)
	if err != nil {
		return errRank
	}
	*rank = C.int(r)
	return 0
}

//export gompi_go_cart_shift
func gompi_go_cart_shift(ch C.uintptr_t, dir, disp C.int, src, dst *C.int) C.int {
	t, rc := cart(ch)
	if rc != 0 {
		return rc
	}
	c, _ := comm(ch)
	s, d, err := t.Shift(c.Rank(), int(dir), int(disp))
	if err != nil {
		return errArg
	}
	*src, *dst = rankToC(s), rankToC(d)
	return 0
}
