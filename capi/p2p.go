package capi

/*
#include "gompi.h"
*/
import "C"

import (
	"errors"
	"unsafe"

	"gompi/mpi"
)

// creq is a request C holds a handle to: a one-shot operation's request
// r, or a persistent request p (MPI_Send_init...), whose handle outlives
// each completion until MPI_Request_free.
type creq struct {
	r *mpi.Request
	p *mpi.Prequest
	// comm is the communicator the operation runs on, whose error
	// handler its completion's errors go to (MPI_COMM_SELF when none).
	comm C.uintptr_t
	// done writes a one-shot request's C outputs once it completed
	// (MPIX_Comm_ishrink's communicator, MPIX_Comm_iagree's flag).
	done func()
}

// noteErr tells C that an error of q's completion goes to q's
// communicator's error handler (gompi_set_err_comm).
func (q *creq) noteErr() {
	if q != nil && q.comm != 0 {
		C.gompi_set_err_comm(q.comm)
	}
}

// current is the operation in flight, nil for an inactive persistent
// request (which, like MPI_REQUEST_NULL, completes at once, empty).
func (q *creq) current() *mpi.Request {
	if q.p != nil {
		return q.p.Request()
	}
	return q.r
}

func tagIn(t C.int) int {
	if t == anyTagABI {
		return mpi.AnyTag
	}
	return int(t)
}

// peerIn maps a C rank argument to package mpi's (MPI_PROC_NULL differs).
func peerIn(r C.int) int {
	if r == procNull {
		return mpi.ProcNull
	}
	return int(r)
}

// setStatus reports s in C's terms: package mpi's ProcNull and AnyTag
// become the ABI's values.
func setStatus(st *C.MPI_Status, s mpi.Status) {
	src, tag, cancelled := C.int(s.Source), C.int(s.Tag), C.int(0)
	if s.Source == mpi.ProcNull {
		src = procNull
	}
	if s.Tag == mpi.AnyTag {
		tag = anyTagABI
	}
	if s.Cancelled {
		cancelled = 1
	}
	C.gompi_status_set(st, src, tag, C.int64_t(s.Count), cancelled)
}

// setEmptyStatus is the status of MPI_REQUEST_NULL or an inactive
// persistent request.
func setEmptyStatus(st *C.MPI_Status) {
	C.gompi_status_set(st, C.MPI_ANY_SOURCE, anyTagABI, 0, 0)
}

// Send modes, as the C side names them (p2p.c).
const (
	modeStandard = iota
	modeSync
	modeReady
	modeBuffered
)

// isendMode starts a send of b in a mode.
func isendMode(c *mpi.Comm, b mpi.Buf, dest, tag int, mode C.int) (*mpi.Request, error) {
	switch mode {
	case modeSync:
		return c.IssendBuf(b, dest, tag)
	case modeReady:
		return c.IrsendBuf(b, dest, tag)
	case modeBuffered:
		return c.IbsendBuf(b, dest, tag)
	}
	return c.IsendBuf(b, dest, tag)
}

// gompi_go_send sends count elements of datatype dt in standard or
// buffered mode (the modes that wait for the receiver start with
// gompi_go_isend and are waited for from C).
//
//export gompi_go_send
func gompi_go_send(ch C.uintptr_t, buf unsafe.Pointer, count C.int64_t, dt C.uintptr_t, dest, tag, mode C.int) C.int {
	c, b, rc := commBuf(ch, buf, count, dt)
	if rc != 0 {
		return rc
	}
	if mode == modeBuffered {
		_, err := c.IbsendBuf(b, peerIn(dest), int(tag)) // complete at once
		return bsendCode(err)
	}
	return code(c.SendBuf(b, peerIn(dest), int(tag)))
}

// commBuf resolves the communicator and the buffer description most
// point-to-point calls take.
func commBuf(ch C.uintptr_t, buf unsafe.Pointer, count C.int64_t, dt C.uintptr_t) (*mpi.Comm, mpi.Buf, C.int) {
	c, err := comm(ch)
	if err != nil {
		return nil, mpi.Buf{}, errComm
	}
	b, rc := cbufOf(buf, count, dt)
	return c, b, rc
}

// newRequest files r and returns its handle: a creation sequence number.
func newRequest(r *mpi.Request, ch C.uintptr_t) C.uintptr_t {
	return fileRequest(&creq{r: r, comm: ch})
}

func fileRequest(q *creq) C.uintptr_t {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	lib.nextReq++
	h := handleOf(kindRequest, lib.nextReq)
	lib.reqs[h] = q
	return C.uintptr_t(h)
}

//export gompi_go_isend
func gompi_go_isend(ch C.uintptr_t, buf unsafe.Pointer, count C.int64_t, dt C.uintptr_t, dest, tag, mode C.int,
	req *C.uintptr_t) C.int {
	b, rc := cbufOf(buf, count, dt)
	if rc != 0 {
		return rc
	}
	rc = start(ch, 0, req, func(c *mpi.Comm) (*mpi.Request, error) {
		return isendMode(c, b, peerIn(dest), int(tag), mode)
	})
	if mode == modeBuffered && rc == errArg {
		return errBuffer
	}
	return rc
}

// bsendCode is a buffered send's error code: no room in the attached
// buffer (package mpi's ErrArg) is MPI_ERR_BUFFER.
func bsendCode(err error) C.int {
	if rc := code(err); rc != errArg {
		return rc
	}
	return errBuffer
}

//export gompi_go_irecv
func gompi_go_irecv(ch C.uintptr_t, buf unsafe.Pointer, count C.int64_t, dt C.uintptr_t, src, tag C.int,
	req *C.uintptr_t) C.int {
	b, rc := cbufOf(buf, count, dt)
	if rc != 0 {
		return rc
	}
	return start(ch, 0, req, func(c *mpi.Comm) (*mpi.Request, error) {
		return c.IrecvBuf(b, peerIn(src), tagIn(tag))
	})
}

// start starts a non-blocking operation with peer on communicator ch
// and files its request; one with MPI_PROC_NULL completes at once.
func start(ch C.uintptr_t, peer C.int, req *C.uintptr_t, op func(*mpi.Comm) (*mpi.Request, error)) C.int {
	if peer == procNull {
		*req = newRequest(nil, ch)
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
	*req = newRequest(r, ch)
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

// finish reports a completed request's status. MPI_Wait and MPI_Test set
// a completed one-shot request's handle to MPI_REQUEST_NULL and make a
// persistent one inactive, its handle kept.
func finish(req *C.uintptr_t, q *creq, s mpi.Status, err error, st *C.MPI_Status) C.int {
	if q.p != nil {
		q.p.Test() // complete already: this makes it inactive
	} else {
		dropRequest(*req)
		*req = requestNull
		if q.done != nil {
			q.done()
		}
	}
	if err != nil {
		q.noteErr()
	}
	switch {
	case q.current() == nil && q.p == nil:
		setStatus(st, mpi.Status{Source: mpi.ProcNull, Tag: mpi.AnyTag})
	case err == nil || s.Count > 0 || s.Cancelled:
		setStatus(st, s)
	}
	return code(err)
}

// lookup finds a live request: ok false with rc set for an unknown
// handle; r nil (and st filled) for MPI_REQUEST_NULL or an inactive
// persistent request, which complete at once with an empty status.
func lookup(h C.uintptr_t, st *C.MPI_Status) (q *creq, r *mpi.Request, rc C.int, ok bool) {
	if h == requestNull {
		setEmptyStatus(st)
		return nil, nil, 0, true
	}
	q, ok = request(h)
	if !ok {
		return nil, nil, errRequest, false
	}
	if r = q.current(); r == nil && q.p != nil {
		setEmptyStatus(st)
	}
	return q, r, 0, true
}

//export gompi_go_wait
func gompi_go_wait(req *C.uintptr_t, st *C.MPI_Status) C.int {
	q, r, rc, ok := lookup(*req, st)
	if !ok || q == nil || (r == nil && q.p != nil) {
		return rc
	}
	var s mpi.Status
	var err error
	if r != nil {
		if s, err = r.Wait(); errors.Is(err, mpi.ErrProcFailedPending) {
			q.noteErr()
			return code(err) // still active: the handle stays
		}
	}
	return finish(req, q, s, err, st)
}

//export gompi_go_test
func gompi_go_test(req *C.uintptr_t, flag *C.int, st *C.MPI_Status) C.int {
	*flag = 1
	q, r, rc, ok := lookup(*req, st)
	if !ok || q == nil || (r == nil && q.p != nil) {
		return rc
	}
	var s mpi.Status
	var err error
	if r != nil {
		var done bool
		if s, done, err = r.Test(); !done {
			// an AnySource receive with a failure unacknowledged:
			// MPIX_ERR_PROC_FAILED_PENDING, the request still active
			*flag = 0
			if err != nil {
				q.noteErr()
			}
			return code(err)
		}
	}
	return finish(req, q, s, err, st)
}

// gompi_go_request_status is MPI_Request_get_status: Test that leaves
// the request as it is.
//
//export gompi_go_request_status
func gompi_go_request_status(h C.uintptr_t, flag *C.int, st *C.MPI_Status) C.int {
	*flag = 1
	q, r, rc, ok := lookup(h, st)
	switch {
	case !ok || q == nil || (r == nil && q.p != nil):
		return rc
	case r == nil:
		setStatus(st, mpi.Status{Source: mpi.ProcNull, Tag: mpi.AnyTag})
		return 0
	}
	s, done, err := r.Test()
	if !done {
		*flag = 0
		return 0
	}
	if err == nil || s.Count > 0 || s.Cancelled {
		setStatus(st, s)
	}
	return code(err)
}

// gompi_go_active reports whether a request handle names an operation
// that can complete: not MPI_REQUEST_NULL, not an inactive persistent
// request (the calls over arrays skip those), nor unknown.
//
//export gompi_go_active
func gompi_go_active(h C.uintptr_t) C.int {
	if h == requestNull {
		return 0
	}
	q, ok := request(h)
	if !ok || (q.p != nil && q.current() == nil) {
		return 0
	}
	return 1
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
		if q.r == nil && q.p == nil { // completed at once
			*index = C.int(i)
			return finish(&hs[i], q, mpi.Status{}, nil, st)
		}
		rs[i] = q.current()
		active = active || rs[i] != nil
	}
	if !active {
		*index = undefinedABI
		setEmptyStatus(st)
		return 0
	}
	i, s, err := mpi.Waitany(rs)
	*index = C.int(i)
	q, _ := request(hs[i])
	if errors.Is(err, mpi.ErrProcFailedPending) {
		q.noteErr()
		return code(err) // still active: the handle stays
	}
	return finish(&hs[i], q, s, err, st)
}

// gompi_go_request_free frees a request's handle. The operation goes on;
// package mpi owns it until it completes.
//
//export gompi_go_request_free
func gompi_go_request_free(req *C.uintptr_t) C.int {
	if _, ok := request(*req); !ok {
		return errRequest
	}
	dropRequest(*req)
	*req = requestNull
	return 0
}

//export gompi_go_cancel
func gompi_go_cancel(h C.uintptr_t) C.int {
	q, ok := request(h)
	if !ok {
		return errRequest
	}
	if r := q.current(); r != nil {
		return code(r.Cancel())
	}
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
	if r := q.current(); r != nil {
		if _, d, _ := r.Test(); !d {
			*done = 0
		}
	}
	return 0
}
