package btl

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxHeader is the largest frame header a Conn carries.
const MaxHeader = 255

// MaxPayload is the largest frame payload a stream Conn accepts; anything
// larger is taken for a corrupt stream rather than allocated.
const MaxPayload = 1 << 40

// prefixLen is the stream frame prefix: header length (1 byte, padded to 4)
// and payload length (8 bytes), little endian.
const prefixLen = 12

// smallFrame is the size under which a frame is copied into one buffer and
// written with a single write call; larger payloads go out with writev so
// they are never copied.
const smallFrame = 16 << 10

// Poller is implemented by connections that can busy-poll. While allowed
// reports true, a write facing a full socket buffer retries, yielding the
// processor between tries, for up to the connection's poll budget before
// it sleeps until the kernel signals room; and while waiting reports true
// too (the owner has someone blocked waiting for a message), so does a
// read that finds no data. Waking a sleeping thread costs several
// microseconds, more than a small message takes to cross a node, so MPI
// libraries poll while a rank waits, unless the node is oversubscribed
// (then polling steals the processor from the rank being waited for).
type Poller interface {
	SetPoll(allowed, waiting func() bool)
}

// StreamConn frames messages over a byte stream (TCP, Unix sockets). It is
// the Conn of every stream-based component.
type StreamConn struct {
	c      net.Conn
	raw    syscall.RawConn
	budget time.Duration
	// polling conditions (SetPoll); nil: never poll
	allowed, waiting func() bool
	pfd              [1]unix.PollFd
	zero             unix.Timespec

	// state of the raw read and write in progress (one of each at a time)
	readFn, writeFn func(fd uintptr) bool
	rp              []byte
	rn              int
	rerr            error
	tries           int
	drained         bool
	deadline        time.Time
	wa, wb          []byte
	werr            error
	wdeadline       time.Time
	br              *bufio.Reader
	pre             [prefixLen]byte
	remain          int64
	scratch         []byte
	vec             [2][]byte
	bufs            net.Buffers
}

// NewStreamConn wraps c; readBuf is the size of the read buffer (frames at
// most that large are read with one system call); poll is the busy-poll
// budget of each read once SetPoll is called (0: never poll).
func NewStreamConn(c net.Conn, readBuf int, poll time.Duration) *StreamConn {
	s := &StreamConn{c: c, budget: poll, scratch: make([]byte, 0, smallFrame)}
	if sc, ok := c.(syscall.Conn); ok && poll > 0 {
		s.raw, _ = sc.SyscallConn()
		s.readFn, s.writeFn = s.pollRead, s.pollWrite
	}
	s.br = bufio.NewReaderSize(pollReader{s}, readBuf)
	return s
}

// ready polls s.pfd without waiting. ppoll with a zero timeout never
// blocks, so it runs as a raw system call, and allocates nothing (unlike
// unix.Poll).
func (s *StreamConn) ready() bool {
	n, _, errno := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&s.pfd[0])), 1, uintptr(unsafe.Pointer(&s.zero)), 0, 0, 0)
	return errno == 0 && n > 0
}

// SetPoll implements Poller; call it before the first read or write.
func (s *StreamConn) SetPoll(allowed, waiting func() bool) { s.allowed, s.waiting = allowed, waiting }

// active reports whether a read should poll.
func (s *StreamConn) active() bool { return s.allowed() && s.waiting() }

type pollReader struct{ s *StreamConn }

func (r pollReader) Read(p []byte) (int, error) {
	s := r.s
	if s.raw == nil || s.allowed == nil || !s.active() {
		return s.c.Read(p)
	}
	s.rp, s.rn, s.rerr, s.tries, s.deadline = p, 0, nil, 0, time.Time{}
	err := s.raw.Read(s.readFn)
	n, rerr := s.rn, s.rerr
	s.rp = nil
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, rerr
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	return n, nil
}

// pollRead is the raw read of pollReader (a method value made once, so a
// read allocates nothing).
func (s *StreamConn) pollRead(fd uintptr) bool {
	s.pfd[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	for {
		// After a short read the socket is most likely empty: poll first
		// rather than fail a read.
		if !s.drained || s.ready() {
			s.rn, s.rerr = syscall.Read(int(fd), s.rp)
			switch {
			case s.rerr == syscall.EINTR:
				continue
			case s.rerr != syscall.EAGAIN:
				s.drained = s.rn < len(s.rp)
				return true
			}
		}
		s.drained = false
		// Wait for data with poll, which reads the socket's state without
		// locking it: spinning on read would take the lock the arriving
		// data needs.
		for {
			if !s.active() {
				return false
			}
			if s.ready() {
				break
			}
			// Yield at once, then now and then (the owner's other
			// goroutines must run), and look at the clock as rarely. The
			// first yield matters most: a reader that has just completed
			// a receive lets the waiter it completed run before it polls
			// on, which on one processor (GOMAXPROCS=1) it otherwise
			// would only after several polls.
			if s.tries++; s.tries%8 != 1 {
				continue
			}
			now := time.Now()
			if s.deadline.IsZero() {
				s.deadline = now.Add(s.budget)
			} else if now.After(s.deadline) {
				return false
			}
			runtime.Gosched()
		}
	}
}

// NetConn returns the underlying connection.
func (s *StreamConn) NetConn() net.Conn { return s.c }

// WriteFrame implements Conn.
func (s *StreamConn) WriteFrame(hdr, payload []byte) error {
	if len(hdr) > MaxHeader {
		return fmt.Errorf("btl: write frame: header of %d bytes exceeds %d", len(hdr), MaxHeader)
	}
	if int64(len(payload)) > MaxPayload {
		return fmt.Errorf("btl: write frame: payload of %d bytes exceeds %d", len(payload), int64(MaxPayload))
	}
	b := s.scratch[:prefixLen]
	putPrefix(b, len(hdr), len(payload))
	b = append(b, hdr...)
	if len(b)+len(payload) <= smallFrame {
		b = append(b, payload...)
		payload = nil
	}
	if s.raw != nil && s.allowed != nil && s.allowed() {
		return s.spinWrite(b, payload)
	}
	if payload == nil {
		_, err := s.c.Write(b)
		return err
	}
	s.vec[0], s.vec[1] = b, payload
	s.bufs = s.vec[:]
	_, err := s.bufs.WriteTo(s.c)
	s.vec[0], s.vec[1] = nil, nil
	return err
}

// spinWrite writes a and then b with writev, retrying a full socket
// buffer for up to the poll budget before waiting for the kernel: the
// reader on the other side drains it within microseconds, and waking a
// sleeping writer costs more than that.
func (s *StreamConn) spinWrite(a, b []byte) error {
	s.wa, s.wb, s.werr, s.wdeadline = a, b, nil, time.Time{}
	err := s.raw.Write(s.writeFn)
	werr := s.werr
	s.wa, s.wb = nil, nil
	if err != nil {
		return err
	}
	return werr
}

func (s *StreamConn) pollWrite(fd uintptr) bool {
	for len(s.wa)+len(s.wb) > 0 {
		var n int
		if len(s.wb) == 0 {
			n, s.werr = unix.Write(int(fd), s.wa)
		} else {
			s.vec[0], s.vec[1] = s.wa, s.wb
			n, s.werr = unix.Writev(int(fd), s.vec[:])
			s.vec[0], s.vec[1] = nil, nil
		}
		if n > 0 {
			k := min(n, len(s.wa))
			s.wa, s.wb = s.wa[k:], s.wb[n-k:]
			s.wdeadline = time.Time{}
			continue
		}
		switch {
		case s.werr == unix.EINTR:
			continue
		case s.werr != unix.EAGAIN:
			return true
		}
		now := time.Now()
		if s.wdeadline.IsZero() {
			s.wdeadline = now.Add(s.budget)
		} else if now.After(s.wdeadline) {
			return false
		}
		runtime.Gosched()
	}
	s.werr = nil
	return true
}

func putPrefix(b []byte, hdrLen, payloadLen int) {
	binary.LittleEndian.PutUint32(b[0:4], uint32(hdrLen))
	binary.LittleEndian.PutUint64(b[4:12], uint64(payloadLen))
}

// ParsePrefix decodes a frame prefix, checking its limits.
func ParsePrefix(b []byte) (hdrLen int, payloadLen int64, err error) {
	if len(b) < prefixLen {
		return 0, 0, fmt.Errorf("%w: prefix of %d bytes, want %d", ErrFrame, len(b), prefixLen)
	}
	h := binary.LittleEndian.Uint32(b[0:4])
	p := binary.LittleEndian.Uint64(b[4:12])
	if h > MaxHeader {
		return 0, 0, fmt.Errorf("%w: header length %d exceeds %d", ErrFrame, h, MaxHeader)
	}
	if p > MaxPayload {
		return 0, 0, fmt.Errorf("%w: payload length %d exceeds %d", ErrFrame, p, int64(MaxPayload))
	}
	return int(h), int64(p), nil
}

// ReadHeader implements Conn. A clean end of stream between frames is
// io.EOF; anything cut short is io.ErrUnexpectedEOF.
func (s *StreamConn) ReadHeader(hdr []byte) (int, int, error) {
	if s.remain != 0 {
		return 0, 0, fmt.Errorf("btl: read header: %d payload bytes of the previous frame not consumed", s.remain)
	}
	if _, err := io.ReadFull(s.br, s.pre[:]); err != nil {
		return 0, 0, err
	}
	h, p, err := ParsePrefix(s.pre[:])
	if err != nil {
		return 0, 0, err
	}
	if h > len(hdr) {
		return 0, 0, fmt.Errorf("btl: read header: buffer of %d bytes for a %d-byte header", len(hdr), h)
	}
	if _, err := io.ReadFull(s.br, hdr[:h]); err != nil {
		return 0, 0, noEOF(err)
	}
	s.remain = p
	return h, int(p), nil
}

// ReadPayload implements Conn.
func (s *StreamConn) ReadPayload(p []byte) error {
	if int64(len(p)) > s.remain {
		return fmt.Errorf("btl: read payload: %d bytes asked, %d left in the frame", len(p), s.remain)
	}
	n, err := io.ReadFull(s.br, p)
	s.remain -= int64(n)
	return noEOF(err)
}

// Discard implements Conn.
func (s *StreamConn) Discard(n int) error {
	if int64(n) > s.remain {
		return fmt.Errorf("btl: discard: %d bytes asked, %d left in the frame", n, s.remain)
	}
	d, err := s.br.Discard(n)
	s.remain -= int64(d)
	return noEOF(err)
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// CloseWrite implements Conn.
func (s *StreamConn) CloseWrite() error {
	if cw, ok := s.c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close implements Conn.
func (s *StreamConn) Close() error { return s.c.Close() }

var (
	_ Conn   = (*StreamConn)(nil)
	_ Poller = (*StreamConn)(nil)
)
