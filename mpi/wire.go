package mpi

import (
	"encoding/binary"
	"fmt"
)

// Frame kinds.
const (
	kindData  = 1 // a message
	kindHello = 2 // first frame of a connection: who dials whom, in which job
	kindBye   = 3 // last frame: the sender finalized, EOF follows
	// kindFlag (after the hello's kinds, hello.go): a suspension's flag,
	// behind everything the sender sent before it (flag.go); its tag is
	// the suspension's.
	kindFlag = 6
	// kindRevoke: a communicator was revoked (revoke.go); its ctx is the
	// communicator's handle. Handled by the reader, never matched.
	kindRevoke = 7
	// kindRep: the physical layer of a replicated job talking to itself
	// (replica.go): its ctx says what for. Handled by the reader.
	kindRep = 8
)

// hdrLen is the size of every header mpi sends.
const hdrLen = 32

// header is the envelope of one frame. Src is the sender's world rank; for
// a hello, Tag holds the rank dialed.
type header struct {
	kind uint8
	src  int32
	ctx  uint64
	tag  int64
	seq  uint64
}

func (h *header) put(b []byte) {
	_ = b[hdrLen-1]
	b[0] = h.kind
	b[1], b[2], b[3] = 0, 0, 0
	binary.LittleEndian.PutUint32(b[4:8], uint32(h.src))
	binary.LittleEndian.PutUint64(b[8:16], h.ctx)
	binary.LittleEndian.PutUint64(b[16:24], uint64(h.tag))
	binary.LittleEndian.PutUint64(b[24:32], h.seq)
}

func parseHeader(b []byte) (header, error) {
	if len(b) != hdrLen {
		return header{}, fmt.Errorf("header of %d bytes, want %d", len(b), hdrLen)
	}
	h := header{
		kind: b[0],
		src:  int32(binary.LittleEndian.Uint32(b[4:8])),
		ctx:  binary.LittleEndian.Uint64(b[8:16]),
		tag:  int64(binary.LittleEndian.Uint64(b[16:24])),
		seq:  binary.LittleEndian.Uint64(b[24:32]),
	}
	if h.kind < kindData || h.kind > kindRep {
		return header{}, fmt.Errorf("unknown frame kind %d", h.kind)
	}
	return h, nil
}
