package capi

/*
#include "gompi.h"
*/
import "C"

import (
	"runtime"
	"time"
	"unsafe"

	"gompi/mpi"
)

// creq is a request C holds a handle to. A request with a nil r completed
// at once (a send to or receive from MPI_PROC_NULL).
type creq struct {
	r *mpi.Request
}

// pollFor is how long a wait entered from C polls before it parks.
const pollFor = 50 * time.Microsecond

func tagIn(t C.int) int {
	if t == anyTagABI {
		return mpi.AnyTag
	}
	return int(t)
}

func setStatus(st *C.MPI_Status, s mpi.Status) {
	C.gompi_status_set(st, C.int(s.Source), C.int(s.Tag), C.int64_t(s.Count), 0)
}

func setNullStatus(st *C.MPI_Status) {
	C.gompi_status_set(st, procNull, anyTagABI, 0, 0)
}

// Send modes, as the C side names them (gompi.h).
const (
	modeStandard = iota
	modeSync
	modeReady
)

// gompi_go_send sends in a mode: standard, synchronous or ready.
//
//export gompi_go_send
func gompi_go_send(ch C.uintptr_t, buf unsafe.Pointer, n C.int64_t, dest, tag, mode C.int) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	b := bytes(buf, n)
	switch mode {
	case modeSync:
		return code(c.Ssend(b, int(dest), int(tag)))
	case modeReady:
		return code(c.Rsend(b, int(dest), int(tag)))
	}
	return code(c.Send(b, int(dest), int(tag)))
}

//export gompi_go_recv
func gompi_go_recv(ch C.uintptr_t, buf unsafe.Pointer, n C.int64_t, src, tag C.int, st *C.MPI_Status) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	r, err := c.Irecv(bytes(buf, n), int(src), tagIn(tag))
	if err != nil {
		return code(err)
	}
	s, err := wait(r)
	if err == nil || s.Count > 0 {
		setStatus(st, s)
	}
	return code(err)
}

// wait polls r, yielding, for up to pollFor, then parks on it.
func wait(r *mpi.Request) (mpi.Status, error) {
	deadline := time.Now().Add(pollFor)
	for {
		if s, done, err := r.Test(); done {
			return s, err
		}
		if time.Now().After(deadline) {
			return r.Wait()
		}
		runtime.Gosched()
	}
}

// newRequest files r and returns its handle: a creation sequence number.
func newRequest(r *mpi.Request) C.uintptr_t {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	lib.nextReq++
	h := handleOf(kindRequest, lib.nextReq)
	lib.reqs[h] = &creq{r: r}
	return C.uintptr_t(h)
}

//export gompi_go_isend
func gompi_go_isend(ch C.uintptr_t, buf unsafe.Pointer, n C.int64_t, dest, tag, mode C.int, req *C.uintptr_t) C.int {
	return start(ch, dest, req, func(c *mpi.Comm) (*mpi.Request, error) {
		switch mode {
		case modeSync:
			return c.Issend(bytes(buf, n), int(dest), int(tag))
		case modeReady:
			return c.Irsend(bytes(buf, n), int(dest), int(tag))
		}
		return c.Isend(bytes(buf, n), int(dest), int(tag))
	})
}

//export gompi_go_irecv
func gompi_go_irecv(ch C.uintptr_t, buf unsafe.Pointer, n C.int64_t, src, tag C.int, req *C.uintptr_t) C.int {
	return start(ch, src, req, func(c *mpi.Comm) (*mpi.Request, error) {
		return c.Irecv(bytes(buf, n), int(src), tagIn(tag))
	})
}

// start starts a non-blocking operation with peer on communicator ch
// and files its request; one with MPI_PROC_NULL completes at once.
func start(ch C.uintptr_t, peer C.int, req *C.uintptr_t, op func(*mpi.Comm) (*mpi.Request, error)) C.int {
	if peer == procNull {
		*req = newRequest(nil)
		return 0
	}
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	r, err := op(c)
	if err != nil {
		return code(err)
	}
	*req = newRequest(r)
	return 0
}

func request(h C.uintptr_t) (*creq, bool) {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	q, ok := lib.reqs[uintptr(h)]
	return q, ok
}

func dropRequest(h C.uintptr_t) {
	lib.mu.Lock()
	delete(lib.reqs, uintptr(h))
	lib.mu.Unlock()
}

// finish reports a completed request's status and frees it: MPI_Wait and
// MPI_Test set a completed request's handle to MPI_REQUEST_NULL.
func finish(req *C.uintptr_t, q *creq, s mpi.Status, err error, st *C.MPI_Status) C.int {
	dropRequest(*req)
	*req = requestNull
	switch {
	case q.r == nil:
		setNullStatus(st)
	case err == nil || s.Count > 0:
		setStatus(st, s)
	}
	return code(err)
}

//export gompi_go_wait
func gompi_go_wait(req *C.uintptr_t, st *C.MPI_Status) C.int {
	if *req == requestNull {
		C.gompi_status_set(st, C.MPI_ANY_SOURCE, anyTagABI, 0, 0)
		return 0
	}
	q, ok := request(*req)
	if !ok {
		return errRequest
	}
	var s mpi.Status
	var err error
	if q.r != nil {
		s, err = wait(q.r)
	}
	return finish(req, q, s, err, st)
}

//export gompi_go_test
func gompi_go_test(req *C.uintptr_t, flag *C.int, st *C.MPI_Status) C.int {
	if *req == requestNull {
		*flag = 1
		C.gompi_status_set(st, C.MPI_ANY_SOURCE, anyTagABI, 0, 0)
		return 0
	}
	q, ok := request(*req)
	if !ok {
		return errRequest
	}
	s, done, err := q.r.Test()
	if !done {
		*flag = 0
		return 0
	}
	*flag = 1
	return finish(req, q, s, err, st)
}

//export gompi_go_waitany
func gompi_go_waitany(n C.int, reqs *C.uintptr_t, index *C.int, st *C.MPI_Status) C.int {
	hs := unsafe.Slice(reqs, int(n))
	rs := make([]*mpi.Request, len(hs))
	active := false
	for i, h := range hs {
		if h == requestNull {
			continue
		}
		q, ok := request(h)
		if !ok {
			return errRequest
		}
		if q.r == nil { // completed at once
			*index = C.int(i)
			return finish(&hs[i], q, mpi.Status{}, nil, st)
		}
		rs[i], active = q.r, true
	}
	if !active {
		*index = undefinedABI
		C.gompi_status_set(st, C.MPI_ANY_SOURCE, anyTagABI, 0, 0)
		return 0
	}
	deadline := time.Now().Add(pollFor)
	for time.Now().Before(deadline) {
		for i, r := range rs {
			if r == nil {
				continue
			}
			if s, done, err := r.Test(); done {
				*index = C.int(i)
				q, _ := request(hs[i])
				return finish(&hs[i], q, s, err, st)
			}
		}
		runtime.Gosched()
	}
	i, s, err := mpi.Waitany(rs)
	*index = C.int(i)
	q, _ := request(hs[i])
	return finish(&hs[i], q, s, err, st)
}

//export gompi_go_request_free
func gompi_go_request_free(req *C.uintptr_t) C.int {
	if _, ok := request(*req); !ok {
		return errRequest
	}
	// The operation goes on; package mpi owns it until it completes.
	dropRequest(*req)
	*req = requestNull
	return 0
}

//export gompi_go_probe
func gompi_go_probe(ch C.uintptr_t, src, tag C.int, st *C.MPI_Status) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	s, err := c.Probe(int(src), tagIn(tag))
	if err == nil {
		setStatus(st, s)
	}
	return code(err)
}

//export gompi_go_iprobe
func gompi_go_iprobe(ch C.uintptr_t, src, tag C.int, flag *C.int, st *C.MPI_Status) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	s, ok, err := c.Iprobe(int(src), tagIn(tag))
	*flag = 0
	if err == nil && ok {
		*flag = 1
		setStatus(st, s)
	}
	return code(err)
}

//export gompi_go_peek
func gompi_go_peek(h C.uintptr_t, done *C.int) C.int {
	*done = 1
	if h == requestNull {
		return 0
	}
	q, ok := request(h)
	if !ok {
		return errRequest
	}
	if q.r != nil {
		if _, d, _ := q.r.Test(); !d {
			*done = 0
		}
	}
	return 0
}
