// Package capi is gompi's C interface: the functions of the MPI standard's
// C bindings, on the MPI-5.0 standard ABI (capi/include/mpi.h), over
// package mpi's public API. capi/libmpi builds it into libmpi_abi.so.1
// (-buildmode=c-shared; scripts/build-c.sh).
//
// The C files hold what must or should be C: every PMPI_ function (each
// MPI_ name is a weak alias of its PMPI_ one), argument checks, the
// error-handler dispatch, and the calls that need nothing of package mpi
// (Comm_rank/size on cached values, Wtime, Type_size of predefined types,
// handle conversion). The rest calls the Go functions exported here, which
// call package mpi. Functions gompi does not implement are generated stubs
// (capi/gen) that raise MPI_ERR_UNSUPPORTED_OPERATION.
//
// Handles are never addresses: a communicator's is derived from its context
// id (mpi.Comm.Handle), a request's from a per-process creation sequence
// number, an error handler's from its creation order, so a program that
// runs again the same way sees the same handles (see gompi.h). A C handle
// never becomes a Go pointer: Go sees it as a uintptr.
//
// Beside the standard's functions the library has two headers of its own:
// mpi-ext.h, ULFM's MPIX_ calls with Open MPI's names and feature macros
// (ulfm.c, ulfm.go: package mpi's fault tolerance, its errors mapped to
// MPIX_ERR_PROC_FAILED, _PENDING and MPIX_ERR_REVOKED by code), and
// gompi_cr.h, package cr's API for C (crapi.c, crapi.go: protected C
// memory regions, safe points, checkpoints, callbacks). A request's
// completion raises its error on the request's communicator, so that
// MPI_ERRORS_RETURN set there returns it.
//
// Waits entered from C poll their request from C, yielding the processor
// between looks, before they park in Go (p2p.c's gompi_wait_request): a Go
// function called from C that blocks parks a locked OS thread, whose
// wake-up costs tens of microseconds, and a locked goroutine that polls
// in Go hands its processor off at every yield.
package capi

/*
#cgo CFLAGS: -I${SRCDIR}/include -O2 -Wall -Wno-unused-function
#cgo LDFLAGS: -lpthread
#include "gompi.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"gompi/mpi"
)

// lib is the C interface's Go state: the communicators and requests C
// holds handles to. Calls from several C threads share it.
var lib struct {
	mu        sync.Mutex
	self      *mpi.Comm
	comms     map[uintptr]*mpi.Comm
	names     map[uintptr]string
	reqs      map[uintptr]*creq
	groups    map[uintptr]mpi.Group
	nextGroup uint64
	nextReq   uint64
	finished  bool
}

// Handle kinds and layout: gompi.h's GOMPI_HANDLE.
const (
	handleBase   = 0x10000
	kindComm     = 1
	kindRequest  = 7
	commNull     = 0x100
	commWorld    = 0x101
	commSelf     = 0x102
	requestNull  = 0x180
	anyTagABI    = -2
	procNull     = -3
	undefinedABI = -32766
	threadMult   = 4096
	errUnsupp    = 55
	errOther     = 16
	errArg       = 13
	errComm      = 5
	errTruncate  = 15
	errRequest   = 7
	errType      = 3
	errOp        = 10
	errRank      = 6
)

func handleOf(kind int, id uint64) uintptr { return uintptr(handleBase + id<<4 + uint64(kind)) }

// errUnsupported marks an operation gompi does not implement (yet).
var errUnsupported = errors.New("not supported by gompi")

// code maps an error of package mpi to an MPI error class.
func code(err error) C.int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUnsupported), errors.Is(err, errors.ErrUnsupported):
		return errUnsupp
	case errors.Is(err, mpi.ErrTruncate):
		return errTruncate
	case errors.Is(err, mpi.ErrProcFailedPending):
		return errProcFailedPending
	case errors.Is(err, mpi.ErrRevoked):
		return errRevoked
	case errors.Is(err, mpi.ErrProcFailed):
		return errProcFailed
	case errors.Is(err, mpi.ErrArg):
		return errArg
	}
	return errOther
}

//export gompi_go_init
func gompi_go_init(required C.int, provided *C.int) C.int {
	if err := mpi.Init(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "gompi: MPI_Init:", err)
		return code(err)
	}
	// A C thread in the library holds a Go processor, and keeps it, idle
	// and unavailable, while it runs C between calls (as a system call
	// does until the scheduler retakes it, 20 µs to 10 ms later). The
	// launcher gives a rank that fills its share of a node one processor
	// (plm_base_gomaxprocs): in a C program that one would be the C
	// thread's, and the reader goroutines that take messages off the
	// transports would wait for it. One more is theirs.
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	mpi.Default().CalledFromC()
	w := mpi.World()
	// MPI_COMM_SELF is made by this process alone (create_group of a
	// group of one sends nothing): a collective over the world here would
	// let a rank that dies right after its own MPI_Init fail the others'
	// (a ULFM program must survive that).
	me, err := w.Group().Incl([]int{w.Rank()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "gompi: MPI_Init: MPI_COMM_SELF:", err)
		return code(err)
	}
	self, err := w.CreateGroup(context.Background(), me, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gompi: MPI_Init: MPI_COMM_SELF:", err)
		return code(err)
	}
	lib.mu.Lock()
	lib.self = self
	lib.comms = map[uintptr]*mpi.Comm{commWorld: w, commSelf: self}
	lib.names = map[uintptr]string{commWorld: "MPI_COMM_WORLD", commSelf: "MPI_COMM_SELF"}
	lib.reqs = map[uintptr]*creq{}
	lib.groups = map[uintptr]mpi.Group{groupEmpty: w.Group().Difference(w.Group())}
	lib.mu.Unlock()
	C.gompi_comm_put(commWorld, C.int(w.Rank()), C.int(w.Size()), 0)
	C.gompi_comm_put(commSelf, 0, 1, 0)
	// Package mpi's calls may come from any goroutine, and a C thread
	// calling in runs on a goroutine of its own: every level is provided.
	level := required
	if level > threadMult {
		level = threadMult
	}
	C.gompi_thread_level = level
	*provided = level
	C.gompi_state = 1
	return 0
}

//export gompi_go_finalize
func gompi_go_finalize() C.int {
	C.gompi_state = 2
	if err := mpi.Finalize(); err != nil {
		return code(err)
	}
	return 0
}

//export gompi_go_abort
func gompi_go_abort(errcode C.int, msg *C.char) {
	mpi.Abort(int(errcode), C.GoString(msg))
}

// comm returns the communicator behind a C handle.
func comm(h C.uintptr_t) (*mpi.Comm, error) {
	lib.mu.Lock()
	c := lib.comms[uintptr(h)]
	lib.mu.Unlock()
	if c == nil {
		return nil, fmt.Errorf("communicator handle %#x: %w", uintptr(h), mpi.ErrArg)
	}
	return c, nil
}

// bytes views n bytes of C memory at p as a slice, without copying.
func bytes(p unsafe.Pointer, n C.int64_t) []byte {
	if n == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(p), int(n))
}

// ints views n C ints at p.
func ints(p *C.int, n int) []int {
	out := make([]int, n)
	for i, v := range unsafe.Slice(p, n) {
		out[i] = int(v)
	}
	return out
}
