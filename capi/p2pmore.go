package capi

/*
#include "gompi.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"gompi/mpi"
)

// Persistent requests, matched probes, buffered sends' buffer and
// Sendrecv_replace: the point-to-point calls beyond send, receive and
// completion (p2pmore.c... the C side is p2p.c).

// bsendOverhead is what each buffered message takes of the attached
// buffer beyond its bytes. gompi copies the message into memory of its
// own, so it keeps nothing in the user's buffer; it charges about what
// MPICH keeps there (its per-message header), because C programs and
// tests size their buffers by what MPICH needs. mpi.h's
// MPI_BSEND_OVERHEAD (512, fixed by the standard ABI) is the most an
// implementation may take: a program reserving it per message always
// has room.
const bsendOverhead = 96

// gompi_go_send_init makes a persistent send in a mode (p2p.go's modes).
//
//export gompi_go_send_init
func gompi_go_send_init(ch C.uintptr_t, buf unsafe.Pointer, count C.int64_t, dt C.uintptr_t, dest, tag, mode C.int,
	req *C.uintptr_t) C.int {
	c, b, rc := commBuf(ch, buf, count, dt)
	if rc != 0 {
		return rc
	}
	d, t := peerIn(dest), int(tag)
	var q *mpi.Prequest
	var err error
	switch mode {
	case modeSync:
		q, err = c.SsendBufInit(b, d, t)
	case modeReady:
		q, err = c.RsendBufInit(b, d, t)
	case modeBuffered:
		q, err = c.BsendBufInit(b, d, t)
	default:
		q, err = c.SendBufInit(b, d, t)
	}
	if err != nil {
		return code(err)
	}
	*req = fileRequest(&creq{p: q, comm: ch})
	return 0
}

//export gompi_go_recv_init
func gompi_go_recv_init(ch C.uintptr_t, buf unsafe.Pointer, count C.int64_t, dt C.uintptr_t, src, tag C.int,
	req *C.uintptr_t) C.int {
	c, b, rc := commBuf(ch, buf, count, dt)
	if rc != 0 {
		return rc
	}
	q, err := c.RecvBufInit(b, peerIn(src), tagIn(tag))
	if err != nil {
		return code(err)
	}
	*req = fileRequest(&creq{p: q, comm: ch})
	return 0
}

// gompi_go_start starts a persistent request; an active one, or one that
// is not persistent, is MPI_ERR_REQUEST.
//
//export gompi_go_start
func gompi_go_start(h C.uintptr_t) C.int {
	q, ok := request(h)
	if !ok || q.p == nil || q.p.Active() {
		return errRequest
	}
	return code(q.p.Start())
}

// messages holds the messages Mprobe/Improbe matched until Mrecv/Imrecv
// receives them, under GOMPI_HANDLE(GOMPI_KIND_MESSAGE, n).
var messages = struct {
	mu   sync.Mutex
	m    map[uintptr]*mpi.Message
	next uint64
}{m: map[uintptr]*mpi.Message{}}

const kindMessage = 8

// gompi_go_mprobe matches a message from src with tag (waiting for one
// when block, else flag says whether one was there) and files it.
//
//export gompi_go_mprobe
func gompi_go_mprobe(ch C.uintptr_t, src, tag, block C.int, flag *C.int, msg *C.uintptr_t, st *C.MPI_Status) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	var m *mpi.Message
	var s mpi.Status
	ok := true
	if block != 0 {
		m, s, err = c.Mprobe(int(src), tagIn(tag))
	} else {
		m, s, ok, err = c.Improbe(int(src), tagIn(tag))
	}
	*flag = 0
	if err != nil || !ok {
		return code(err)
	}
	*flag = 1
	setStatus(st, s)
	messages.mu.Lock()
	messages.next++
	h := handleOf(kindMessage, messages.next)
	messages.m[h] = m
	messages.mu.Unlock()
	*msg = C.uintptr_t(h)
	return 0
}

// takeMessage removes a matched message from the table: it is received
// once.
func takeMessage(h C.uintptr_t) *mpi.Message {
	messages.mu.Lock()
	defer messages.mu.Unlock()
	m := messages.m[uintptr(h)]
	delete(messages.m, uintptr(h))
	return m
}

// gompi_go_mrecv receives a matched message into count elements of dt;
// with req it is Imrecv and files the (complete) request.
//
//export gompi_go_mrecv
func gompi_go_mrecv(msg C.uintptr_t, buf unsafe.Pointer, count C.int64_t, dt C.uintptr_t, st *C.MPI_Status,
	req *C.uintptr_t) C.int {
	b, rc := cbufOf(buf, count, dt)
	if rc != 0 {
		return rc
	}
	m := takeMessage(msg)
	if m == nil {
		return errArg
	}
	if req != nil {
		r, err := m.IrecvBuf(b)
		if r != nil {
			*req = newRequest(r, commSelf)
		}
		return code(err)
	}
	s, err := m.RecvBuf(b)
	if err == nil || s.Count > 0 {
		setStatus(st, s)
	}
	return code(err)
}

// gompi_go_buffer_attach attaches size bytes for buffered sends, each
// message costing MPI_BSEND_OVERHEAD more; C keeps the address.
//
//export gompi_go_buffer_attach
func gompi_go_buffer_attach(size C.int64_t) C.int {
	p := mpi.Default()
	if p == nil {
		return errOther
	}
	p.SetBsendOverhead(bsendOverhead)
	if err := p.BufferAttach(int(size)); err != nil {
		return errBuffer
	}
	return 0
}

// gompi_go_buffer_detach waits for the buffered messages to leave and
// detaches the buffer.
//
//export gompi_go_buffer_detach
func gompi_go_buffer_detach(size *C.int64_t) C.int {
	p := mpi.Default()
	if p == nil {
		return errOther
	}
	n, err := p.BufferDetach()
	if err != nil {
		return errBuffer
	}
	*size = C.int64_t(n)
	return 0
}

// gompi_go_sendrecv_replace sends count elements of dt at buf and
// receives as many into the same place: the outgoing ones are packed (a
// copy) before the receive is posted.
//
//export gompi_go_sendrecv_replace
func gompi_go_sendrecv_replace(ch C.uintptr_t, buf unsafe.Pointer, count C.int64_t, dt C.uintptr_t, dest, stag, src,
	rtag C.int, st *C.MPI_Status) C.int {
	c, b, rc := commBuf(ch, buf, count, dt)
	if rc != 0 {
		return rc
	}
	out := make([]byte, b.Type.PackSize(b.Count))
	if _, err := mpi.Pack(b, out, 0); err != nil {
		return code(fmt.Errorf("sendrecv_replace: %w", err))
	}
	r, err := c.IrecvBuf(b, peerIn(src), tagIn(rtag))
	if err != nil {
		return code(err)
	}
	if err := c.Send(out, peerIn(dest), int(stag)); err != nil {
		return code(err)
	}
	s, err := r.Wait()
	if err == nil || s.Count > 0 {
		setStatus(st, s)
	}
	return code(err)
}
