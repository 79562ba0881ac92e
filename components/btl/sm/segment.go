package sm

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Layout of a segment: a page of control words, then the data of the two
// rings. Ring 0 carries the dialer's frames to the acceptor, ring 1 the
// acceptor's to the dialer. Every counter written by one side sits on a
// cache line of its own (two lines: adjacent-line prefetch), so the
// producer and the consumer never write the same line.
const (
	line       = 128
	ctlSize    = 4096
	segMagic   = 0x67_6f_6d_70_69_73_6d_01 // "gompism" and the layout's version
	offMagic   = 0
	offRing    = 8  // ring size, a power of two
	offProbe   = 16 // two words: the dialer's and the acceptor's probe address
	ringCtl    = 1024
	ctlBase    = 1024 // ring r's control block at ctlBase + r*ringCtl
	offHead    = 0 * line
	offTail    = 1 * line
	offRSleep  = 2 * line // the consumer sleeps (waits for a doorbell)
	offWSleep  = 3 * line // the producer sleeps
	offAck     = 4 * line // single-copy frames the consumer has finished
	offCMA     = 5 * line // the consumer can read the producer's memory
	minRing    = 4096
	maxRing    = 1 << 30
	memfdName  = "gompi-sm"
	segMapsTag = "/memfd:" + memfdName // how the mapping shows in /proc/PID/maps
)

// segment is one mapped shared segment.
type segment struct {
	mem  []byte
	size int // ring size
}

func segmentBytes(ring int) int { return ctlSize + 2*ring }

// createSegment makes a segment with rings of size ring in a new memfd and
// maps it. The caller sends the fd to the peer and closes it: the memory
// lives as long as a mapping or an fd refers to it, in any process, so
// nothing outlives the last of the two ranks that use it.
func createSegment(ring int) (*segment, int, error) {
	fd, err := unix.MemfdCreate(memfdName, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, -1, fmt.Errorf("memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(segmentBytes(ring))); err != nil {
		unix.Close(fd)
		return nil, -1, fmt.Errorf("size the segment: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, segmentBytes(ring), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, -1, fmt.Errorf("map the segment: %w", err)
	}
	s := &segment{mem: mem, size: ring}
	binary.LittleEndian.PutUint64(mem[offRing:], uint64(ring))
	atomic.StoreUint64(s.word(offMagic), segMagic)
	return s, fd, nil
}

// mapSegment maps a segment received from a dialer, checking its layout.
// It does not close fd.
func mapSegment(fd int) (*segment, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat the segment: %w", err)
	}
	if st.Size < ctlSize {
		return nil, fmt.Errorf("segment of %d bytes", st.Size)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map the segment: %w", err)
	}
	s := &segment{mem: mem}
	ring := binary.LittleEndian.Uint64(mem[offRing:])
	if atomic.LoadUint64(s.word(offMagic)) != segMagic || ring < minRing || ring > maxRing || ring&(ring-1) != 0 || int64(segmentBytes(int(ring))) != st.Size {
		unix.Munmap(mem)
		return nil, fmt.Errorf("segment of %d bytes is not a gompi-sm segment of this version", st.Size)
	}
	s.size = int(ring)
	return s, nil
}

func (s *segment) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&s.mem[off])) }

func (s *segment) flag(off int) *uint32 { return (*uint32)(unsafe.Pointer(&s.mem[off])) }

// ring returns the view of ring r.
func (s *segment) ring(r int) ring {
	c := ctlBase + r*ringCtl
	return ring{
		head: s.word(c + offHead), tail: s.word(c + offTail),
		rsleep: s.flag(c + offRSleep), wsleep: s.flag(c + offWSleep),
		ack: s.word(c + offAck), cma: s.flag(c + offCMA),
		data: s.mem[ctlSize+r*s.size : ctlSize+(r+1)*s.size : ctlSize+(r+1)*s.size],
		mask: uint64(s.size - 1),
	}
}

func (s *segment) unmap() error { return unix.Munmap(s.mem) }

// ring is a single-producer, single-consumer byte ring in a segment.
// head counts the bytes ever written, tail the bytes ever read: the
// producer alone stores head, the consumer alone tail, each after copying
// the bytes, so the other side's atomic load of it orders the copies.
type ring struct {
	head, tail     *uint64
	rsleep, wsleep *uint32
	ack            *uint64
	cma            *uint32
	data           []byte
	mask           uint64
}

// put copies b into the ring at position pos (which must have room).
func (r *ring) put(pos uint64, b []byte) {
	i := int(pos & r.mask)
	n := copy(r.data[i:], b)
	copy(r.data, b[n:])
}

// get copies the ring's bytes at position pos into b.
func (r *ring) get(pos uint64, b []byte) {
	i := int(pos & r.mask)
	n := copy(b, r.data[i:])
	copy(b[n:], r.data)
}
