package capi

/*
#include "gompi.h"
*/
import "C"

import (
	"unsafe"

	"gompi/mpi"
)

// addComm files a new communicator and returns its handle, derived from
// its context id.
func addComm(c *mpi.Comm, parent C.uintptr_t) C.uintptr_t {
	h := handleOf(kindComm, c.Handle())
	lib.mu.Lock()
	lib.comms[h] = c
	lib.mu.Unlock()
	C.gompi_comm_put(C.uintptr_t(h), C.int(c.Rank()), C.int(c.Size()), parent)
	if c.IsInter() {
		C.gompi_comm_set_remote(C.uintptr_t(h), C.int(c.RemoteSize()))
	}
	return C.uintptr_t(h)
}

//export gompi_go_comm_dup
func gompi_go_comm_dup(ch C.uintptr_t, out *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	d, err := c.Dup()
	if err != nil {
		return code(err)
	}
	*out = addComm(d, ch)
	return 0
}

//export gompi_go_comm_split
func gompi_go_comm_split(ch C.uintptr_t, color, key C.int, out *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	s, err := c.Split(int(color), int(key))
	if err != nil {
		return code(err)
	}
	if s == nil {
		*out = commNull
		return 0
	}
	*out = addComm(s, ch)
	return 0
}

//export gompi_go_comm_free
func gompi_go_comm_free(ch C.uintptr_t) C.int {
	if ch == commWorld || ch == commSelf {
		return errComm
	}
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	if err := c.Free(); err != nil {
		return code(err)
	}
	lib.mu.Lock()
	delete(lib.comms, uintptr(ch))
	delete(lib.names, uintptr(ch))
	lib.mu.Unlock()
	C.gompi_comm_del(ch)
	return 0
}

// gompi_go_comm_compare compares two communicators as package mpi does:
// the same one is MPI_IDENT, the same members in the same order
// MPI_CONGRUENT, the same members in another order MPI_SIMILAR (of an
// intercommunicator: its local and remote groups both).
//
//export gompi_go_comm_compare
func gompi_go_comm_compare(h1, h2 C.uintptr_t, result *C.int) C.int {
	a, err := comm(h1)
	if err != nil {
		return errComm
	}
	b, err := comm(h2)
	if err != nil {
		return errComm
	}
	*result = map[int]C.int{mpi.Ident: C.MPI_IDENT, mpi.Congruent: C.MPI_CONGRUENT, mpi.Similar: C.MPI_SIMILAR, mpi.Unequal: C.MPI_UNEQUAL}[a.Compare(b)]
	return 0
}

//export gompi_go_comm_set_name
func gompi_go_comm_set_name(ch C.uintptr_t, name *C.char) C.int {
	if _, err := comm(ch); err != nil {
		return errComm
	}
	lib.mu.Lock()
	lib.names[uintptr(ch)] = C.GoString(name)
	lib.mu.Unlock()
	return 0
}

//export gompi_go_comm_get_name
func gompi_go_comm_get_name(ch C.uintptr_t, name *C.char, n *C.int) C.int {
	if _, err := comm(ch); err != nil {
		return errComm
	}
	lib.mu.Lock()
	s := lib.names[uintptr(ch)]
	lib.mu.Unlock()
	if len(s) > C.MPI_MAX_OBJECT_NAME-1 {
		s = s[:C.MPI_MAX_OBJECT_NAME-1]
	}
	out := unsafe.Slice((*byte)(unsafe.Pointer(name)), len(s)+1)
	copy(out, s)
	out[len(s)] = 0
	*n = C.int(len(s))
	return 0
}
