package capi

/*
#include "gompi.h"
*/
import "C"

// Intercommunicators (inter.c): package mpi's, filed like every
// communicator by addComm, which also caches the remote size in C.

//export gompi_go_intercomm_create
func gompi_go_intercomm_create(lh C.uintptr_t, leader C.int, ph C.uintptr_t, remoteLeader, tag C.int, out *C.uintptr_t) C.int {
	l, err := comm(lh)
	if err != nil {
		return errComm
	}
	// The peer communicator means something at the local leader only.
	peer := l
	if l.Rank() == int(leader) {
		if peer, err = comm(ph); err != nil {
			return errComm
		}
	}
	ic, err := l.IntercommCreate(int(leader), peer, int(remoteLeader), int(tag))
	if err != nil {
		return code(err)
	}
	*out = addComm(ic, lh)
	return 0
}

//export gompi_go_intercomm_merge
func gompi_go_intercomm_merge(ch C.uintptr_t, high C.int, out *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	m, err := c.Merge(high != 0)
	if err != nil {
		return code(err)
	}
	*out = addComm(m, ch)
	return 0
}

//export gompi_go_comm_remote_group
func gompi_go_comm_remote_group(ch C.uintptr_t, out *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	g, err := c.RemoteGroup()
	if err != nil {
		return errComm
	}
	*out = addGroup(g)
	return 0
}
