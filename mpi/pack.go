package mpi

import (
	"fmt"
)

// Buf is Count elements of datatype Type in memory: element i's origin
// is at Mem[Base + i*Type.Extent()], so a type with a negative lower
// bound is addressed with Base > 0. Calls taking a Buf move its packed
// bytes (Type.Size() per element, type-map order); a dense type moves
// Mem itself, with no copy. A caller holding only an address (C) lends
// Mem over Type.Span(Count) and sets Base to -lo.
type Buf struct {
	Mem   []byte
	Base  int
	Count int
	Type  *Datatype
}

// Bytes is the Buf of a byte slice as it is (TypeByte, one per byte).
func Bytes(b []byte) Buf { return Buf{Mem: b, Count: len(b), Type: TypeByte} }

// check verifies that every element lies within Mem.
func (b Buf) check() error {
	if b.Type == nil || b.Count < 0 {
		return fmt.Errorf("mpi: %w: buffer with no datatype or a negative count", ErrArg)
	}
	lo, hi := b.Type.Span(b.Count)
	if lo != hi && (b.Base+lo < 0 || b.Base+hi > len(b.Mem)) {
		return fmt.Errorf("mpi: %w: %d elements of %s span bytes [%d,%d) of a %d-byte buffer", ErrArg, b.Count, b.Type, b.Base+lo, b.Base+hi, len(b.Mem))
	}
	return nil
}

// dense returns the memory that is the packed form of a dense Buf.
func (b Buf) dense() ([]byte, bool) {
	if !b.Type.Dense() {
		return nil, false
	}
	return b.Mem[b.Base : b.Base+b.Count*b.Type.size], true
}

// Packed returns b's packed bytes: Mem itself for a dense type,
// otherwise a new buffer.
func (b Buf) Packed() ([]byte, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	if m, ok := b.dense(); ok {
		return m, nil
	}
	out := make([]byte, b.Type.PackSize(b.Count))
	b.pack(out)
	return out, nil
}

func (b Buf) pack(out []byte) {
	ext, o := b.Type.Extent(), 0
	for i := 0; i < b.Count; i++ {
		at := b.Base + i*ext
		for _, s := range b.Type.segs {
			o += copy(out[o:], b.Mem[at+s.off:at+s.off+s.n])
		}
	}
}

// Pack writes b's packed bytes into out at position pos and returns the
// position after them (MPI_Pack).
func Pack(b Buf, out []byte, pos int) (int, error) {
	if err := b.check(); err != nil {
		return pos, err
	}
	n := b.Type.PackSize(b.Count)
	if pos < 0 || pos+n > len(out) {
		return pos, fmt.Errorf("mpi: pack: %w: %d bytes at %d of a %d-byte buffer", ErrArg, n, pos, len(out))
	}
	b.pack(out[pos : pos+n])
	return pos + n, nil
}

// Unpack reads b's packed bytes from in at position pos into b's memory
// and returns the position after them (MPI_Unpack).
func Unpack(in []byte, pos int, b Buf) (int, error) {
	if err := b.check(); err != nil {
		return pos, err
	}
	n := b.Type.PackSize(b.Count)
	if pos < 0 || pos+n > len(in) {
		return pos, fmt.Errorf("mpi: unpack: %w: %d bytes at %d of a %d-byte buffer", ErrArg, n, pos, len(in))
	}
	b.unpack(in[pos : pos+n])
	return pos + n, nil
}

// unpack spreads packed bytes over b's memory; fewer than b holds (a
// short message) fill the first runs.
func (b Buf) unpack(in []byte) {
	ext, o := b.Type.Extent(), 0
	for i := 0; i < b.Count && o < len(in); i++ {
		at := b.Base + i*ext
		for _, s := range b.Type.segs {
			if o >= len(in) {
				return
			}
			o += copy(b.Mem[at+s.off:at+s.off+s.n], in[o:])
		}
	}
}

// recvTarget is where a receive into b lands: b's memory when dense, else
// a packed buffer to unpack.
func (b Buf) recvTarget() (buf []byte, direct bool, err error) {
	if err := b.check(); err != nil {
		return nil, false, err
	}
	if m, ok := b.dense(); ok {
		return m, true, nil
	}
	return make([]byte, b.Type.PackSize(b.Count)), false, nil
}

// CountOf is a status's count in elements of dt; Undefined when the
// message is not a whole number of them (MPI_Get_count).
func (s Status) CountOf(dt *Datatype) int {
	if dt.size == 0 {
		if s.Count == 0 {
			return 0
		}
		return Undefined
	}
	if s.Count%dt.size != 0 {
		return Undefined
	}
	return s.Count / dt.size
}

// SendBuf sends b's elements to dst with tag.
func (c *Comm) SendBuf(b Buf, dst, tag int) error {
	data, err := b.Packed()
	if err != nil {
		return err
	}
	return c.Send(data, dst, tag)
}

// IsendBuf starts sending b's elements; a dense b must not change until
// the request completes (another is packed at once).
func (c *Comm) IsendBuf(b Buf, dst, tag int) (*Request, error) {
	data, err := b.Packed()
	if err != nil {
		return nil, err
	}
	return c.Isend(data, dst, tag)
}

// IssendBuf, IrsendBuf and IbsendBuf are IsendBuf in the synchronous,
// ready and buffered modes (Issend, Irsend, Ibsend of b's packed bytes).
func (c *Comm) IssendBuf(b Buf, dst, tag int) (*Request, error) {
	return sendPacked(b, dst, tag, c.Issend)
}

// IrsendBuf is IsendBuf in ready mode.
func (c *Comm) IrsendBuf(b Buf, dst, tag int) (*Request, error) {
	return sendPacked(b, dst, tag, c.Irsend)
}

// IbsendBuf is IsendBuf in buffered mode.
func (c *Comm) IbsendBuf(b Buf, dst, tag int) (*Request, error) {
	return sendPacked(b, dst, tag, c.Ibsend)
}

func sendPacked(b Buf, dst, tag int, send func([]byte, int, int) (*Request, error)) (*Request, error) {
	data, err := b.Packed()
	if err != nil {
		return nil, err
	}
	return send(data, dst, tag)
}

// RecvBuf receives into b's elements; Status.CountOf(b.Type) is how
// many arrived.
func (c *Comm) RecvBuf(b Buf, src, tag int) (Status, error) {
	buf, direct, err := b.recvTarget()
	if err != nil {
		return Status{}, err
	}
	st, err := c.Recv(buf, src, tag)
	if !direct {
		b.unpack(buf[:min(st.Count, len(buf))])
	}
	return st, err
}

// IrecvBuf starts a receive into b's elements. For a type that is not
// dense the message lands in a packed buffer and a goroutine, which ends
// when the receive completes (or the Proc stops), unpacks it before the
// returned request completes.
func (c *Comm) IrecvBuf(b Buf, src, tag int) (*Request, error) {
	buf, direct, err := b.recvTarget()
	if err != nil {
		return nil, err
	}
	in, err := c.Irecv(buf, src, tag)
	if err != nil || direct {
		return in, err
	}
	out := newRequest(c.p, reqColl)
	out.inner = in
	go func() {
		st, err := in.await()
		b.unpack(buf[:min(st.Count, len(buf))])
		out.complete(st, err)
	}()
	return out, nil
}

// RecvBuf receives the matched message into b's elements (MPI_Mrecv with
// a datatype): ErrTruncate when it is longer than b packs into.
func (msg *Message) RecvBuf(b Buf) (Status, error) {
	buf, direct, err := b.recvTarget()
	if err != nil {
		return Status{}, err
	}
	st, err := msg.Recv(buf)
	if !direct {
		b.unpack(buf[:min(st.Count, len(buf))])
	}
	return st, err
}

// IrecvBuf is RecvBuf as a request, complete at once (as Irecv).
func (msg *Message) IrecvBuf(b Buf) (*Request, error) {
	buf, direct, err := b.recvTarget()
	if err != nil {
		return nil, err
	}
	r, err := msg.Irecv(buf)
	if !direct && r != nil {
		st, _ := r.Wait() // complete already
		b.unpack(buf[:min(st.Count, len(buf))])
	}
	return r, err
}
