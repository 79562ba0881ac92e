package mpi

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Point-to-point beyond Send and Recv: ProcNull, synchronous, ready and
// buffered sends, matched-message probes (Mprobe) and receive
// cancellation.
//
// A synchronous send completes only once a receive matched it. Its
// message travels like any other, on the communicator's point-to-point
// context, with syncBit set in its wire tag (user tags stay below it,
// TagUB); matching ignores the bit. The receive that matches it (posted,
// from the unexpected queue, or an Mprobe) answers with an empty ack
// message on the communicator's collective context under a negative tag
// derived from the user's (ackTag: collectives use positive tags), which
// the sender posted a receive for before sending. Both messages are
// ordinary ones: counted, sequenced, drained and saved by the C/R
// protocols like every other. Acks of one tag between two ranks arrive in
// the order their messages were matched, which is the order they were
// sent (non-overtaking), so the n-th ack completes the n-th send.

// syncBit marks a synchronous send's wire tag.
const syncBit = 1 << 62

// plainTag is the tag a message matches with: without the mark of a
// synchronous send (negative internal tags carry none).
func plainTag(tag int) int {
	if tag > 0 {
		return tag &^ syncBit
	}
	return tag
}

func ackTag(tag int) int { return -2 - tag }

var nullStatus = Status{Source: ProcNull, Tag: AnyTag}

// nullRequest is a request to or from ProcNull: complete at once.
func (c *Comm) nullRequest() (*Request, error) {
	if err := c.usable(); err != nil {
		return nil, err
	}
	r := newRequest(c.p, reqSend)
	r.complete(nullStatus, nil)
	return r, nil
}

// matchedSync acks a synchronous send from world rank src whose message
// (wire tag tag) a receive on c just matched. The ack goes from a
// goroutine of its own, which ends once the transport took it (or the
// Proc stopped): the match may happen on a reader goroutine, which must
// never wait for a connection's writer.
func (c *Comm) matchedSync(src, tag int) {
	if tag <= 0 || tag&syncBit == 0 {
		return
	}
	go func() {
		if err := c.p.send(c.co, src, ackTag(plainTag(tag)), nil, nil); err != nil {
			c.p.log.Debug("synchronous send's ack not sent", "to", src, "tag", plainTag(tag), "err", err)
		}
	}()
}

// Ssend sends buf to dst and returns once a receive matched it.
func (c *Comm) Ssend(buf []byte, dst, tag int) error {
	r, err := c.Issend(buf, dst, tag)
	if err != nil {
		return err
	}
	_, err = r.Wait()
	return err
}

// Issend starts a synchronous send: the request completes once buf may
// be reused and a receive matched the message.
func (c *Comm) Issend(buf []byte, dst, tag int) (*Request, error) {
	if dst == ProcNull {
		return c.nullRequest()
	}
	w, err := c.dest(dst, tag)
	if err != nil {
		return nil, err
	}
	ack := c.irecvOn(c.co, nil, w, ackTag(tag))
	sr := newRequest(c.p, reqSend)
	if err := c.p.send(c.pt, w, tag|syncBit, buf, sr); err != nil {
		if c.p.cancelRecv(ack) {
			ack.complete(Status{}, err)
		}
		return nil, err
	}
	return c.p.joined(sr, ack), nil
}

// joined is a request that completes when both a and b have, with a's
// status and both errors; a goroutine waits for them and ends with them
// (Wait returns when the Proc stops).
func (p *Proc) joined(a, b *Request) *Request {
	out := newRequest(p, reqColl)
	go func() {
		st, errA := a.await()
		_, errB := b.await()
		out.complete(st, errors.Join(errA, errB))
	}()
	return out
}

// Rsend is a ready send: MPI lets it assume the receive is posted, which
// gompi does not need, so it is Send.
func (c *Comm) Rsend(buf []byte, dst, tag int) error { return c.Send(buf, dst, tag) }

// Irsend is Isend (see Rsend).
func (c *Comm) Irsend(buf []byte, dst, tag int) (*Request, error) { return c.Isend(buf, dst, tag) }

// bsendState is the buffer a program attached for buffered sends: only
// its size matters (messages are copied into memory of the library's);
// used counts the bytes of buffered sends not yet handed to the transport.
type bsendState struct {
	mu       sync.Mutex
	attached bool
	size     int
	used     int
	// overhead is what each buffered message costs beyond its bytes
	// (SetBsendOverhead: MPI_BSEND_OVERHEAD in C).
	overhead int
	pending  sync.WaitGroup
}

func (p *Proc) bsendState() *bsendState { return &p.bsend }

// BufferAttach gives buffered sends size bytes to hold their messages
// until the transport takes them (MPI_Buffer_attach). One buffer at a
// time.
func (p *Proc) BufferAttach(size int) error {
	b := p.bsendState()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.attached || size < 0 {
		return fmt.Errorf("mpi: buffer attach: %w: a buffer is attached already, or size %d", ErrArg, size)
	}
	b.attached, b.size = true, size
	return nil
}

// SetBsendOverhead makes each buffered message take n bytes of the
// attached buffer beyond its own, the bookkeeping an MPI implementation
// keeps there: C programs size their buffer with MPI_BSEND_OVERHEAD per
// message, and gompi's C interface holds them to it. 0 by default.
func (p *Proc) SetBsendOverhead(n int) {
	b := p.bsendState()
	b.mu.Lock()
	b.overhead = max(0, n)
	b.mu.Unlock()
}

// BufferDetach waits until every buffered send has been handed to the
// transport and returns the size attached (MPI_Buffer_detach).
func (p *Proc) BufferDetach() (int, error) {
	b := p.bsendState()
	b.mu.Lock()
	if !b.attached {
		b.mu.Unlock()
		return 0, fmt.Errorf("mpi: buffer detach: %w: no buffer attached", ErrArg)
	}
	b.attached = false
	size := b.size
	b.mu.Unlock()
	b.pending.Wait()
	return size, nil
}

// Bsend copies buf into the attached buffer's room and sends the copy: it
// returns at once. A message the room cannot hold is an error (MPI's
// MPI_ERR_BUFFER) wrapping ErrArg.
func (c *Comm) Bsend(buf []byte, dst, tag int) error {
	_, err := c.Ibsend(buf, dst, tag)
	return err
}

// Ibsend is Bsend returning a request that is already complete.
func (c *Comm) Ibsend(buf []byte, dst, tag int) (*Request, error) {
	if dst == ProcNull {
		return c.nullRequest()
	}
	b := c.p.bsendState()
	b.mu.Lock()
	room := len(buf) + b.overhead
	if !b.attached || b.used+room > b.size {
		b.mu.Unlock()
		return nil, fmt.Errorf("mpi: bsend: %w: %d bytes (and %d of overhead) do not fit the attached buffer (%d of %d used)", ErrArg, len(buf), b.overhead, b.used, b.size)
	}
	b.used += room
	b.pending.Add(1)
	b.mu.Unlock()
	cp := append([]byte(nil), buf...)
	r, err := c.Isend(cp, dst, tag)
	if err != nil {
		b.release(room)
		return nil, err
	}
	// The copy's room is freed once the transport took it; the goroutine
	// ends with the send (or the Proc's stop).
	go func() {
		if _, err := r.Wait(); err != nil {
			c.p.log.Debug("buffered send failed", "to", dst, "tag", tag, "err", err)
		}
		b.release(room)
	}()
	done := newRequest(c.p, reqSend)
	done.complete(Status{}, nil)
	return done, nil
}

func (b *bsendState) release(n int) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	b.pending.Done()
}

// Message is a message an Mprobe matched: it left the matching queues
// and only its Recv or Irecv receives it (MPI_Message). The Message of a
// probe of ProcNull receives nothing (MPI_MESSAGE_NO_PROC).
type Message struct {
	c  *Comm
	m  *message
	st Status
}

// Mprobe waits for a message from src with tag and matches it: no other
// receive can take it.
func (c *Comm) Mprobe(src, tag int) (*Message, Status, error) {
	st, m, _, err := c.probeTake(context.Background(), src, tag, true, true)
	if err != nil {
		return nil, st, err
	}
	return &Message{c: c, m: m, st: st}, st, nil
}

// Improbe is Mprobe that does not wait: ok says whether a message was
// matched.
func (c *Comm) Improbe(src, tag int) (*Message, Status, bool, error) {
	st, m, ok, err := c.probeTake(context.Background(), src, tag, false, true)
	if err != nil || !ok {
		return nil, st, false, err
	}
	return &Message{c: c, m: m, st: st}, st, true, nil
}

// Recv receives the matched message into buf (ErrTruncate when longer).
// A Message is received once.
func (msg *Message) Recv(buf []byte) (Status, error) {
	if msg == nil {
		return Status{}, fmt.Errorf("mpi: mrecv: %w: no message", ErrArg)
	}
	if msg.m == nil {
		if msg.c == nil {
			return Status{}, fmt.Errorf("mpi: mrecv: %w: message received already", ErrArg)
		}
		msg.c = nil
		return msg.st, nil
	}
	m, st := msg.m, msg.st
	msg.m, msg.c = nil, nil
	n := copy(buf, m.data)
	putMsg(m)
	if n < st.Count {
		return st, fmt.Errorf("mpi: mrecv from rank %d tag %d: %w: %d-byte message into a %d-byte buffer", st.Source, st.Tag, ErrTruncate, st.Count, len(buf))
	}
	return st, nil
}

// Irecv is Recv as a request; the message is there already, so it is
// complete.
func (msg *Message) Irecv(buf []byte) (*Request, error) {
	var p *Proc
	if msg != nil && msg.c != nil {
		p = msg.c.p
	}
	st, err := msg.Recv(buf)
	if p == nil {
		return nil, err
	}
	r := newRequest(p, reqRecv)
	r.complete(st, err)
	return r, nil
}

// Cancel withdraws a posted receive that nothing matched yet: it
// completes with Status.Cancelled set. A receive that matched already,
// and any other request, is not affected (MPI deprecates cancelling
// sends; gompi's complete on their own).
func (r *Request) Cancel() error {
	if r == nil {
		return nil
	}
	if in := r.inner; in != nil {
		return in.Cancel()
	}
	if r.kind != reqRecv || r.pooled || r.cs == nil {
		return nil
	}
	if r.p.cancelRecv(r) {
		r.complete(Status{Source: AnySource, Tag: AnyTag, Cancelled: true}, nil)
	}
	return nil
}

// Testany reports the first complete request, by index, with its status
// and error; ok is false when none is (then an AnySource receive whose
// failure is pending, see Wait, is reported by index with that error).
// With every request nil it reports ok with index -1 (MPI_UNDEFINED).
func Testany(reqs []*Request) (int, Status, bool, error) {
	none := true
	pending, perr := -1, error(nil)
	for i, r := range reqs {
		if r == nil {
			continue
		}
		none = false
		st, ok, err := r.Test()
		if ok {
			return i, st, true, err
		}
		if err != nil && perr == nil {
			pending, perr = i, err
		}
	}
	if perr != nil {
		return pending, Status{}, false, perr
	}
	return -1, Status{}, none, nil
}

// Testsome returns the indices of the complete requests, their statuses
// and their errors joined, with the pending failures of AnySource
// receives (see Wait); nil indices when every request is nil.
func Testsome(reqs []*Request) ([]int, []Status, error) {
	var idx []int
	var sts []Status
	var errs []error
	none := true
	for i, r := range reqs {
		if r == nil {
			continue
		}
		none = false
		st, ok, err := r.Test()
		if ok {
			idx, sts = append(idx, i), append(sts, st)
		}
		if err != nil {
			// A complete request's error, or a pending failure's.
			errs = append(errs, fmt.Errorf("request %d: %w", i, err))
		}
	}
	if !none && idx == nil {
		idx = []int{}
	}
	return idx, sts, errors.Join(errs...)
}

// Waitsome waits until at least one request is complete and returns them
// all as Testsome does.
func Waitsome(reqs []*Request) ([]int, []Status, error) {
	i, _, err := Waitany(reqs)
	if i < 0 {
		return nil, nil, err
	}
	return Testsome(reqs)
}
