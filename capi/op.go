package capi

/*
#include "gompi.h"
*/
import "C"

import (
	"sync"
	"unsafe"

	"gompi/mpi"
)

// userOp is an op made by MPI_Op_create: its C function and whether it
// commutes.
type userOp struct {
	fn      C.uintptr_t
	big     bool // an MPI_User_function_c, whose length is an MPI_Count
	commute bool
}

// ops holds the user ops C has handles to: GOMPI_HANDLE(GOMPI_KIND_OP, n),
// n counting creations, so a rerun gets the same handles.
var ops struct {
	mu   sync.Mutex
	m    map[uintptr]*userOp
	next uint64
}

const (
	kindOp    = 4
	opReplace = 0x3c
	opNoOp    = 0x3d
)

// predefOps maps the predefined op handles (mpi.h) a reduction takes to
// package mpi's. MPI_REPLACE and MPI_NO_OP are for one-sided accumulates
// only, which gompi does not implement: a collective refuses them.
var predefOps = map[C.uintptr_t]mpi.Op{
	0x21: mpi.Sum, 0x22: mpi.Min, 0x23: mpi.Max, 0x24: mpi.Prod,
	0x28: mpi.Band, 0x29: mpi.Bor, 0x2a: mpi.Bxor,
	0x30: mpi.Land, 0x31: mpi.Lor, 0x32: mpi.Lxor,
	0x38: mpi.MinLoc, 0x39: mpi.MaxLoc,
}

//export gompi_go_op_create
func gompi_go_op_create(fn C.uintptr_t, commute, big C.int, h *C.uintptr_t) C.int {
	ops.mu.Lock()
	defer ops.mu.Unlock()
	if ops.m == nil {
		ops.m = map[uintptr]*userOp{}
	}
	ops.next++
	k := handleOf(kindOp, ops.next)
	ops.m[k] = &userOp{fn: fn, big: big != 0, commute: commute != 0}
	*h = C.uintptr_t(k)
	return 0
}

func userOpOf(h C.uintptr_t) *userOp {
	ops.mu.Lock()
	defer ops.mu.Unlock()
	return ops.m[uintptr(h)]
}

// gompi_go_op_free forgets a user op; a predefined one cannot be freed.
//
//export gompi_go_op_free
func gompi_go_op_free(h C.uintptr_t) C.int {
	ops.mu.Lock()
	defer ops.mu.Unlock()
	if _, ok := ops.m[uintptr(h)]; !ok {
		return errOp
	}
	// Reductions already started keep their own copy of the function.
	delete(ops.m, uintptr(h))
	return 0
}

//export gompi_go_op_commutative
func gompi_go_op_commutative(h C.uintptr_t, commute *C.int) C.int {
	if _, ok := predefOps[h]; ok || h == opReplace || h == opNoOp {
		*commute = 1
		return 0
	}
	u := userOpOf(h)
	if u == nil {
		return errOp
	}
	*commute = 0
	if u.commute {
		*commute = 1
	}
	return 0
}

// ptr is the address of a non-empty byte slice's first byte.
func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// reduction returns op oh on elements of dt (C handle dh): a user op calls
// its C function, a predefined one is package mpi's on dt's kind (long
// double's in C). A pair the standard does not define is MPI_ERR_OP.
func reduction(oh, dh C.uintptr_t, dt *mpi.Datatype) (mpi.Reduction, C.int) {
	if u := userOpOf(oh); u != nil {
		ext := max(1, dt.Extent())
		big := C.int(0)
		if u.big {
			big = 1
		}
		fn := func(in, inout []byte) {
			if len(in) > 0 {
				C.gompi_op_call(u.fn, big, ptr(in), ptr(inout), C.int64_t(len(in)/ext), dh)
			}
		}
		return mpi.UserReduction(fn, dt, u.commute), 0
	}
	op, ok := predefOps[oh]
	if !ok {
		return mpi.Reduction{}, errOp
	}
	switch k := dt.BaseKind(); {
	case k == mpi.TypeLongDouble.Kind() && dt.Dense():
		return ldReduction(oh, 0)
	case dt.Kind() == mpi.TypeLongDoubleInt.Kind(): // a pair type, padded
		return ldReduction(oh, 1)
	}
	red, err := mpi.OpReduction(op, dt)
	if err != nil {
		return mpi.Reduction{}, errOp
	}
	return red, 0
}

// ldReduction is a predefined op on C's long double (pair 0) or
// MPI_LONG_DOUBLE_INT (pair 1), combined in C.
func ldReduction(oh C.uintptr_t, pair C.int) (mpi.Reduction, C.int) {
	if C.gompi_op_ldouble(oh, pair, nil, nil, 0) != 0 {
		return mpi.Reduction{}, errOp
	}
	elem := 16 << pair
	fn := func(inout, in []byte) {
		if len(in) > 0 {
			C.gompi_op_ldouble(oh, pair, ptr(inout), ptr(in), C.int64_t(len(in)/elem))
		}
	}
	return mpi.Reduction{Fn: fn, Elem: elem, Float: true}, 0
}

// opFor returns op oh on elements of dt (handle dh) as the collectives
// run it, and whether the memory is combined as laid out (raw: a user op,
// which sees the datatype's layout) rather than staged: a predefined op on
// a derived type with holes combines its packed base elements.
func opFor(oh, dh C.uintptr_t, dt *mpi.Datatype) (mpi.Reduction, bool, C.int) {
	raw := userOpOf(oh) != nil
	rdt := dt
	if !raw && !dt.Dense() && !predef(dt) {
		if rdt = mpi.TypeOf(dt.BaseKind()); rdt == nil {
			return mpi.Reduction{}, false, errOp
		}
	}
	red, rc := reduction(oh, dh, rdt)
	return red, raw, rc
}

// gompi_go_reduce_local combines count elements of in into inout
// (inout = in op inout).
//
//export gompi_go_reduce_local
func gompi_go_reduce_local(in, inout unsafe.Pointer, count C.int64_t, dh, oh C.uintptr_t) C.int {
	dt, rc := dtypeOf(dh)
	if rc != 0 {
		return rc
	}
	if u := userOpOf(oh); u != nil { // its own operand order, whether it commutes or not
		big := C.int(0)
		if u.big {
			big = 1
		}
		if count > 0 {
			C.gompi_op_call(u.fn, big, in, inout, count, dh)
		}
		return 0
	}
	red, _, rc := opFor(oh, dh, dt)
	if rc != 0 || count == 0 {
		return rc
	}
	s, err := newSide(in, int(count), dt, false)
	if err != nil {
		return code(err)
	}
	r, err := newSide(inout, int(count), dt, false)
	if err != nil {
		return code(err)
	}
	red.Fn(r.b, s.b)
	return code(r.unpack(nil, nil))
}
