package capi

/*
#include "gompi.h"
*/
import "C"

import (
	"context"
	"unsafe"

	"gompi/mpi"
)

// Group handles: MPI_GROUP_EMPTY is predefined, the others are filed
// under a per-process creation sequence number (handleOf(kindGroup, n)).
const (
	kindGroup     = 2
	groupEmpty    = 0x109
	splitShare    = 221 // MPI_COMM_TYPE_SHARED
	splitUnguided = 222 // MPI_COMM_TYPE_HW_UNGUIDED
)

// addGroup files a new group and returns its handle.
func addGroup(g mpi.Group) C.uintptr_t {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	lib.nextGroup++
	h := handleOf(kindGroup, lib.nextGroup)
	lib.groups[h] = g
	return C.uintptr_t(h)
}

// group returns the group behind a handle.
func group(h C.uintptr_t) (mpi.Group, bool) {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	g, ok := lib.groups[uintptr(h)]
	return g, ok
}

// rankToC maps package mpi's special ranks to the ABI's.
func rankToC(r int) C.int {
	switch r {
	case mpi.Undefined:
		return undefinedABI
	case mpi.ProcNull:
		return procNull
	}
	return C.int(r)
}

//export gompi_go_group_known
func gompi_go_group_known(h C.uintptr_t) C.int {
	if _, ok := group(h); ok {
		return 1
	}
	return 0
}

//export gompi_go_comm_group
func gompi_go_comm_group(ch C.uintptr_t, out *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	*out = addGroup(c.Group())
	return 0
}

//export gompi_go_group_size
func gompi_go_group_size(h C.uintptr_t) C.int {
	g, _ := group(h)
	return C.int(g.Size())
}

//export gompi_go_group_rank
func gompi_go_group_rank(h C.uintptr_t) C.int {
	g, _ := group(h)
	return rankToC(g.Rank())
}

//export gompi_go_group_free
func gompi_go_group_free(h C.uintptr_t) {
	lib.mu.Lock()
	delete(lib.groups, uintptr(h))
	lib.mu.Unlock()
}

// gompi_go_group_incl makes MPI_Group_incl (excl 0) or MPI_Group_excl
// (excl 1) of n ranks.
//
//export gompi_go_group_incl
func gompi_go_group_incl(h C.uintptr_t, n C.int, ranks *C.int, excl C.int, out *C.uintptr_t) C.int {
	g, _ := group(h)
	var rs []int
	if n > 0 {
		rs = ints(ranks, int(n))
	}
	var ng mpi.Group
	var err error
	if excl != 0 {
		ng, err = g.Excl(rs)
	} else {
		ng, err = g.Incl(rs)
	}
	if err != nil {
		return errRank
	}
	*out = addGroup(ng)
	return 0
}

// gompi_go_group_range makes MPI_Group_range_incl or _excl of n
// (first, last, stride) triplets.
//
//export gompi_go_group_range
func gompi_go_group_range(h C.uintptr_t, n C.int, triplets *C.int, excl C.int, out *C.uintptr_t) C.int {
	g, _ := group(h)
	var rs []mpi.Range
	if n > 0 {
		t := ints(triplets, 3*int(n))
		for i := 0; i < len(t); i += 3 {
			rs = append(rs, mpi.Range{First: t[i], Last: t[i+1], Stride: t[i+2]})
		}
	}
	var ng mpi.Group
	var err error
	if excl != 0 {
		ng, err = g.RangeExcl(rs)
	} else {
		ng, err = g.RangeIncl(rs)
	}
	if err != nil {
		return errRank
	}
	*out = addGroup(ng)
	return 0
}

// gompi_go_group_setop makes the union (op 0), intersection (1) or
// difference (2) of two groups.
//
//export gompi_go_group_setop
func gompi_go_group_setop(h1, h2 C.uintptr_t, op C.int, out *C.uintptr_t) C.int {
	a, _ := group(h1)
	b, _ := group(h2)
	switch op {
	case 0:
		*out = addGroup(a.Union(b))
	case 1:
		*out = addGroup(a.Intersection(b))
	default:
		*out = addGroup(a.Difference(b))
	}
	return 0
}

//export gompi_go_group_compare
func gompi_go_group_compare(h1, h2 C.uintptr_t) C.int {
	a, _ := group(h1)
	b, _ := group(h2)
	switch a.Compare(b) {
	case mpi.Ident:
		return C.MPI_IDENT
	case mpi.Similar:
		return C.MPI_SIMILAR
	}
	return C.MPI_UNEQUAL
}

//export gompi_go_group_translate
func gompi_go_group_translate(h1 C.uintptr_t, n C.int, in *C.int, h2 C.uintptr_t, out *C.int) C.int {
	if n == 0 {
		return 0
	}
	a, _ := group(h1)
	b, _ := group(h2)
	rs := ints(in, int(n))
	for i, r := range rs {
		if r == procNull {
			rs[i] = mpi.ProcNull
		}
	}
	tr, err := a.TranslateRanks(rs, b)
	if err != nil {
		return errRank
	}
	dst := unsafe.Slice(out, int(n))
	for i, r := range tr {
		dst[i] = rankToC(r)
	}
	return 0
}

//export gompi_go_comm_create
func gompi_go_comm_create(ch, gh C.uintptr_t, out *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	g, _ := group(gh)
	nc, err := c.Create(g)
	if err != nil {
		return code(err)
	}
	if nc == nil {
		*out = commNull
		return 0
	}
	*out = addComm(nc, ch)
	return 0
}

// gompi_go_comm_create_group makes MPI_Comm_create_group's communicator
// (this process is a member of the group: C checked).
//
//export gompi_go_comm_create_group
func gompi_go_comm_create_group(ch, gh C.uintptr_t, tag C.int, out *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	g, _ := group(gh)
	nc, err := c.CreateGroup(context.Background(), g, int(tag))
	if err != nil {
		return code(err)
	}
	*out = addComm(nc, ch)
	return 0
}

// gompi_go_comm_split_type splits by node for MPI_COMM_TYPE_SHARED, and
// for MPI_COMM_TYPE_HW_UNGUIDED when that leaves each rank a proper part
// of c (else every rank gets MPI_COMM_NULL); a rank giving MPI_UNDEFINED
// takes part in the same collective split and gets MPI_COMM_NULL. C maps
// MPI_COMM_TYPE_HW_GUIDED onto these (group.c).
//
//export gompi_go_comm_split_type
func gompi_go_comm_split_type(ch C.uintptr_t, kind, key C.int, out *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	var nc *mpi.Comm
	switch kind {
	case splitShare:
		nc, err = c.SplitShared(int(key))
	case splitUnguided:
		if nc, err = c.SplitShared(int(key)); err == nil && nc.Size() == c.Size() {
			// c lies on one node: same on every member, so all drop it
			err, nc = nc.Free(), nil
		}
	case undefinedABI:
		nc, err = c.Split(mpi.Undefined, int(key))
	default:
		return errUnsupp
	}
	if err != nil {
		return code(err)
	}
	if nc == nil {
		*out = commNull
		return 0
	}
	*out = addComm(nc, ch)
	return 0
}
