package btl

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
)

// readerConn lets a StreamConn read a fixed byte string.
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func frame(hdr, payload []byte) []byte {
	b := make([]byte, prefixLen)
	putPrefix(b, len(hdr), len(payload))
	return append(append(b, hdr...), payload...)
}

func TestReadFrames(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		wantErr error
	}{
		{"clean end", nil, io.EOF},
		{"one frame then end", frame([]byte("h"), []byte("payload")), io.EOF},
		{"cut in prefix", frame([]byte("h"), nil)[:5], io.ErrUnexpectedEOF},
		{"cut in header", frame([]byte("hdr"), nil)[:prefixLen+1], io.ErrUnexpectedEOF},
		{"header too long", func() []byte { b := frame(nil, nil); b[0] = 0xff; b[1] = 1; return b }(), ErrFrame},
		{"payload too long", func() []byte { b := frame(nil, nil); b[11] = 0x7f; return b }(), ErrFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStreamConn(readerConn{r: bytes.NewReader(tt.in)}, 64, 0)
			hdr := make([]byte, MaxHeader)
			var err error
			for err == nil {
				var pn int
				if _, pn, err = s.ReadHeader(hdr); err == nil {
					err = s.Discard(pn)
				}
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// FuzzReadFrames feeds arbitrary bytes to the frame reader: it must fail
// cleanly and never panic, whatever lengths a prefix claims.
func FuzzReadFrames(f *testing.F) {
	f.Add(frame([]byte("hdr"), []byte("payload")))
	f.Add(append(frame(nil, nil), frame([]byte{1, 2}, make([]byte, 100))...))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		s := &StreamConn{br: bufio.NewReaderSize(bytes.NewReader(in), 16)}
		_ = s
		hdr := make([]byte, MaxHeader)
		buf := make([]byte, 64)
		for {
			_, pn, err := s.ReadHeader(hdr)
			if err != nil {
				return
			}
			if pn < 0 || pn > MaxPayload {
				t.Fatalf("payload length %d outside 0..%d accepted", pn, int64(MaxPayload))
			}
			n := min(pn, len(buf))
			if err := s.ReadPayload(buf[:n]); err != nil {
				return
			}
			if err := s.Discard(pn - n); err != nil {
				return
			}
		}
	})
}
