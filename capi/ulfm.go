package capi

/*
#include "gompi.h"
*/
import "C"

import (
	"math"

	"gompi/mpi"
)

// ULFM's error classes (mpi-ext.h): MPICH's numbers.
const (
	errProcFailed        = 101
	errProcFailedPending = 102
	errRevoked           = 103
)

// The MPIX_ calls of mpi-ext.h (ulfm.c): package mpi's fault-tolerance
// API. A call that starts a request (ishrink, iagree) writes its C output
// when the request completes, from finish (creq.done), which MPI_Wait and
// MPI_Test reach: that is when MPI says the output is defined.

//export gompi_go_comm_revoke
func gompi_go_comm_revoke(ch C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	return code(c.Revoke())
}

//export gompi_go_comm_is_revoked
func gompi_go_comm_is_revoked(ch C.uintptr_t, flag *C.int) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	*flag = 0
	if c.IsRevoked() {
		*flag = 1
	}
	return 0
}

// gompi_go_comm_shrink is MPIX_Comm_shrink, or MPIX_Comm_ishrink with a
// req.
//
//export gompi_go_comm_shrink
func gompi_go_comm_shrink(ch C.uintptr_t, out *C.uintptr_t, req *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	if req == nil {
		nc, err := c.Shrink()
		if err != nil {
			return code(err)
		}
		*out = addComm(nc, ch)
		return 0
	}
	var nc *mpi.Comm
	r, err := c.Ishrink(&nc)
	if err != nil {
		return code(err)
	}
	*req = fileRequest(&creq{r: r, comm: ch, done: func() {
		if nc != nil {
			*out = addComm(nc, ch)
		}
	}})
	return 0
}

// gompi_go_comm_agree is MPIX_Comm_agree, or MPIX_Comm_iagree with a req.
// The agreed flag is written even when the call reports a failure, as
// ULFM's agree does.
//
//export gompi_go_comm_agree
func gompi_go_comm_agree(ch C.uintptr_t, flag *C.int, req *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	if req == nil {
		v, err := c.Agree(int(*flag))
		*flag = C.int(v)
		return code(err)
	}
	v := new(int)
	*v = int(*flag)
	r, err := c.Iagree(v)
	if err != nil {
		return code(err)
	}
	*req = fileRequest(&creq{r: r, comm: ch, done: func() { *flag = C.int(*v) }})
	return 0
}

// gompi_go_comm_ack_failed is MPIX_Comm_ack_failed; n < 0 acknowledges
// every failure known (MPIX_Comm_failure_ack).
//
//export gompi_go_comm_ack_failed
func gompi_go_comm_ack_failed(ch C.uintptr_t, n C.int, acked *C.int) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	k := int(n)
	if k < 0 {
		k = math.MaxInt32
	}
	a, err := c.AckFailed(k)
	if err != nil {
		return code(err)
	}
	*acked = C.int(a)
	return 0
}

// gompi_go_comm_get_failed is MPIX_Comm_get_failed, or with acked set
// MPIX_Comm_failure_get_acked: the acknowledged prefix of the same group.
//
//export gompi_go_comm_get_failed
func gompi_go_comm_get_failed(ch C.uintptr_t, acked C.int, out *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	n := -1
	if acked != 0 {
		// Acknowledging none returns the count acknowledged so far,
		// read before the group so that the group holds it.
		if n, err = c.AckFailed(0); err != nil {
			return code(err)
		}
	}
	g, err := c.GetFailed()
	if err != nil {
		return code(err)
	}
	if n >= 0 && n < g.Size() {
		first := make([]int, n)
		for i := range first {
			first[i] = i
		}
		if g, err = g.Incl(first); err != nil {
			return code(err)
		}
	}
	*out = addGroup(g)
	return 0
}
