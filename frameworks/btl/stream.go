package btl

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
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

// StreamConn frames messages over a byte stream (TCP, Unix sockets). It is
// the Conn of every stream-based component.
type StreamConn struct {
	c       net.Conn
	br      *bufio.Reader
	pre     [prefixLen]byte
	remain  int64
	scratch []byte
	vec     [2][]byte
	bufs    net.Buffers
}

// NewStreamConn wraps c; readBuf is the size of the read buffer (frames at
// most that large are read with one system call).
func NewStreamConn(c net.Conn, readBuf int) *StreamConn {
	return &StreamConn{c: c, br: bufio.NewReaderSize(c, readBuf), scratch: make([]byte, 0, smallFrame)}
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
		_, err := s.c.Write(b)
		return err
	}
	s.vec[0], s.vec[1] = b, payload
	s.bufs = s.vec[:]
	_, err := s.bufs.WriteTo(s.c)
	s.vec[0], s.vec[1] = nil, nil
	return err
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

var _ Conn = (*StreamConn)(nil)
