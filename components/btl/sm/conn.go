package sm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"gompi/frameworks/btl"
)

// A frame in a ring: a prefix (kind, header length, 6 bytes of padding,
// payload length, little endian), the header, then the payload (inline)
// or the writer's address of it (single copy).
const (
	prefixLen  = 16
	kindInline = 1
	kindCMA    = 2
	kindEnd    = 3 // CloseWrite: no frame follows
)

// Doorbell bytes on the control socket: 'd' tells the peer's reader that
// its ring has data, 'r' tells the peer's writer that its ring has room or
// its single-copy frame was read.
var (
	bellData = []byte{'d'}
	bellRoom = []byte{'r'}
)

// errPeerGone is a peer whose control socket ended: it closed the
// connection or died.
var errPeerGone = errors.New("btl/sm: peer closed the connection or died")

// conn is one connection: a segment with a ring each way, and the control
// socket that carries the segment's fd, the doorbells and the peer's end.
type conn struct {
	c        *net.UnixConn
	seg      *segment
	in, out  ring
	pid      int // the peer's process, for single copy
	cmaMin   int
	budget   time.Duration
	allowed  func() bool
	waiting  func() bool
	singleOK bool // the writer may use single copy (the parameter allows it)

	// gate: reads and writes hold it shared, Close exclusively, so the
	// segment is unmapped only when no goroutine touches it any more.
	gate      sync.RWMutex
	closeOnce sync.Once
	closed    atomic.Bool
	closedCh  chan struct{}
	dead      atomic.Bool
	deadCh    chan struct{}
	ctlDone   chan struct{}
	rbell     chan struct{} // the control goroutine's wake-ups for the reader
	wbell     chan struct{} // and for the writer

	// reader state (one read at a time)
	pre      [prefixLen]byte
	rtail    uint64
	remain   int64
	single   bool
	raddr    uint64
	eof      bool
	liov     [1]unix.Iovec
	riov     [1]unix.RemoteIovec
	dataFn   func() bool
	readAddr [8]byte

	// writer state (one write at a time)
	wpre      [prefixLen + 8]byte
	whead     uint64 // bytes written
	pubHead   uint64 // bytes published (head in the segment)
	wtail     uint64 // the consumer's tail, last seen
	sentCMA   uint64
	roomFn    func() bool
	ackFn     func() bool
	pin       runtime.Pinner
	publishAt uint64
}

func newConn(c *net.UnixConn, seg *segment, dialer bool, pid int, o options) *conn {
	k := &conn{c: c, seg: seg, pid: pid, cmaMin: o.cmaMin, budget: o.poll, singleOK: o.mode != copyNone,
		closedCh: make(chan struct{}), deadCh: make(chan struct{}), ctlDone: make(chan struct{}),
		rbell: make(chan struct{}, 1), wbell: make(chan struct{}, 1)}
	if dialer {
		k.in, k.out = seg.ring(1), seg.ring(0)
	} else {
		k.in, k.out = seg.ring(0), seg.ring(1)
	}
	// Chunks of a quarter ring are published as soon as copied, so the
	// reader copies one out while the writer copies the next in.
	k.publishAt = uint64(len(k.out.data) / 4)
	k.dataFn, k.roomFn, k.ackFn = k.hasData, k.hasRoom, k.acked
	go k.control()
	return k
}

// control is the goroutine of the control socket, owned by the conn and
// ended by Close (which closes the socket) or the peer's end: it turns
// doorbell bytes into wake-ups and the socket's end into the peer's death.
func (k *conn) control() {
	defer close(k.ctlDone)
	buf := make([]byte, 64)
	for {
		n, err := k.c.Read(buf)
		for _, b := range buf[:n] {
			switch b {
			case 'd':
				notify(k.rbell)
			case 'r':
				notify(k.wbell)
			}
		}
		if err != nil {
			k.dead.Store(true)
			close(k.deadCh)
			return
		}
	}
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// SetPoll implements btl.Poller; call it before the first read or write.
func (k *conn) SetPoll(allowed, waiting func() bool) { k.allowed, k.waiting = allowed, waiting }

func (k *conn) polls(reader bool) bool {
	if k.allowed == nil || k.budget <= 0 || !k.allowed() {
		return false
	}
	return !reader || k.waiting()
}

// await returns once ready does. It polls ready while polling is allowed
// (yielding the processor between tries, so the process's other
// goroutines run even at GOMAXPROCS=1) for up to the poll budget; then
// it raises flag, looks once more and sleeps until the peer rings (it
// lowers the flag when it does) or the connection ends.
func (k *conn) await(ready func() bool, flag *uint32, bell chan struct{}, reader bool) error {
	var deadline time.Time
	for tries := 1; ; tries++ {
		if ready() {
			return nil
		}
		if k.closed.Load() {
			return btl.ErrClosed
		}
		if k.dead.Load() {
			if ready() { // what the peer wrote before it went
				return nil
			}
			return errPeerGone
		}
		if k.polls(reader) {
			if tries%16 != 1 {
				continue
			}
			// Yield at the first empty look (the reader just completed a
			// request whose waiter should run now, at GOMAXPROCS=1 too)
			// and every 16th after, looking at the clock as rarely.
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(k.budget)
			}
			if now.Before(deadline) {
				runtime.Gosched()
				continue
			}
		}
		// Swap, not Store: each side stores one word and then loads the
		// other's (this flag, the peer's head or tail), which is only safe
		// with a full barrier between them. A normal build's Store is one,
		// but under -race sync/atomic's Store only releases, and a lost
		// wake-up hung the stress test; an exchange is a barrier in both
		// builds and costs the same as a normal build's Store.
		atomic.SwapUint32(flag, 1)
		if ready() {
			atomic.StoreUint32(flag, 0)
			return nil
		}
		select {
		case <-bell:
		case <-k.deadCh:
		case <-k.closedCh:
		}
		atomic.StoreUint32(flag, 0)
		deadline = time.Time{} // messages flow again: poll again
	}
}

// ring wakes the peer if it sleeps on flag: the one that lowers the flag
// rings, once.
func (k *conn) ring(flag *uint32, bell []byte) {
	if atomic.LoadUint32(flag) == 1 && atomic.CompareAndSwapUint32(flag, 1, 0) {
		// A peer gone shows on the control socket; the next wait sees it.
		k.c.Write(bell)
	}
}

// enter starts a read or write: it fails once the conn is closed.
func (k *conn) enter(op string) error {
	k.gate.RLock()
	if k.closed.Load() {
		k.gate.RUnlock()
		return fmt.Errorf("btl/sm: %s: %w", op, btl.ErrClosed)
	}
	return nil
}

// --- reading ---------------------------------------------------------------

func (k *conn) hasData() bool { return atomic.LoadUint64(k.in.head) != k.rtail }

// readRing takes n bytes from the in ring, into b (which holds n bytes)
// or, when b is nil, nowhere; it returns how many it took.
func (k *conn) readRing(b []byte, n int) (int, error) {
	got := 0
	for got < n {
		avail := atomic.LoadUint64(k.in.head) - k.rtail
		if avail == 0 {
			if err := k.await(k.dataFn, k.in.rsleep, k.rbell, true); err != nil {
				return got, err
			}
			continue
		}
		m := int(min(avail, uint64(n-got)))
		if b != nil {
			k.in.get(k.rtail, b[got:got+m])
		}
		k.rtail += uint64(m)
		got += m
		// Free the room at once: a writer waiting for it copies the
		// next chunk in while this reader copies this one out.
		k.consumed()
	}
	return got, nil
}

// consumed publishes the tail and wakes a writer waiting for room.
func (k *conn) consumed() {
	atomic.SwapUint64(k.in.tail, k.rtail) // a barrier before the flag's load: see await
	k.ring(k.in.wsleep, bellRoom)
}

// readErr names a read's failure: the peer's end cut a frame short, or a
// closed conn.
func readErr(op string, err error) error {
	if errors.Is(err, errPeerGone) {
		return io.ErrUnexpectedEOF
	}
	return fmt.Errorf("btl/sm: %s: %w", op, err)
}

// ReadHeader implements btl.Conn. A peer that ended between frames is
// io.EOF, as on a socket; anything cut short is io.ErrUnexpectedEOF.
func (k *conn) ReadHeader(hdr []byte) (int, int, error) {
	if k.remain != 0 {
		return 0, 0, fmt.Errorf("btl/sm: read header: %d payload bytes of the previous frame not consumed", k.remain)
	}
	if k.eof {
		return 0, 0, io.EOF
	}
	if err := k.enter("read header"); err != nil {
		return 0, 0, err
	}
	defer k.gate.RUnlock()
	if n, err := k.readRing(k.pre[:], prefixLen); err != nil {
		if n == 0 && errors.Is(err, errPeerGone) {
			k.eof = true
			return 0, 0, io.EOF
		}
		return 0, 0, readErr("read header", err)
	}
	kind, h, p := k.pre[0], int(k.pre[1]), binary.LittleEndian.Uint64(k.pre[8:])
	switch {
	case kind == kindEnd:
		k.eof = true
		return 0, 0, io.EOF
	case kind != kindInline && kind != kindCMA, p > btl.MaxPayload:
		return 0, 0, fmt.Errorf("%w: kind %d, payload length %d", btl.ErrFrame, kind, p)
	case h > len(hdr):
		return 0, 0, fmt.Errorf("btl/sm: read header: buffer of %d bytes for a %d-byte header", len(hdr), h)
	}
	if _, err := k.readRing(hdr[:h], h); err != nil {
		return 0, 0, readErr("read header", err)
	}
	k.single = kind == kindCMA
	if k.single {
		if _, err := k.readRing(k.readAddr[:], 8); err != nil {
			return 0, 0, readErr("read header", err)
		}
		k.raddr = binary.LittleEndian.Uint64(k.readAddr[:])
		if p == 0 {
			return 0, 0, fmt.Errorf("%w: empty single-copy payload", btl.ErrFrame)
		}
	}
	k.remain = int64(p)
	return h, int(p), nil
}

// ReadPayload implements btl.Conn.
func (k *conn) ReadPayload(p []byte) error { return k.payload("read payload", p, len(p)) }

// Discard implements btl.Conn.
func (k *conn) Discard(n int) error { return k.payload("discard", nil, n) }

// payload reads n payload bytes into p, or skips them when p is nil.
func (k *conn) payload(op string, p []byte, n int) error {
	if n < 0 || int64(n) > k.remain {
		return fmt.Errorf("btl/sm: %s: %d bytes asked, %d left in the frame", op, n, k.remain)
	}
	if n == 0 {
		return nil
	}
	if err := k.enter(op); err != nil {
		return err
	}
	defer k.gate.RUnlock()
	if !k.single {
		got, err := k.readRing(p, n)
		k.remain -= int64(got)
		if err != nil {
			return readErr(op, err)
		}
		return nil
	}
	if p != nil {
		if err := k.copyFrom(p); err != nil {
			return err
		}
	}
	k.raddr += uint64(n)
	k.remain -= int64(n)
	if k.remain == 0 {
		// The writer may reuse its buffer from now on.
		atomic.AddUint64(k.in.ack, 1)
		k.ring(k.in.wsleep, bellRoom)
	}
	return nil
}

// copyFrom reads len(p) bytes at the writer's address raddr straight
// into p (process_vm_readv: one copy).
func (k *conn) copyFrom(p []byte) error {
	for done := 0; done < len(p); {
		k.liov[0] = unix.Iovec{Base: &p[done]}
		k.liov[0].SetLen(len(p) - done)
		k.riov[0] = unix.RemoteIovec{Base: uintptr(k.raddr) + uintptr(done), Len: len(p) - done}
		n, err := unix.ProcessVMReadv(k.pid, k.liov[:], k.riov[:], 0)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("btl/sm: single copy from process %d: %w", k.pid, err)
		case n == 0:
			return fmt.Errorf("btl/sm: single copy from process %d: %w", k.pid, io.ErrUnexpectedEOF)
		}
		done += n
	}
	k.liov[0].Base = nil
	return nil
}

// --- writing ---------------------------------------------------------------

func (k *conn) hasRoom() bool {
	k.wtail = atomic.LoadUint64(k.out.tail)
	return k.whead-k.wtail < uint64(len(k.out.data))
}

func (k *conn) acked() bool { return atomic.LoadUint64(k.out.ack) >= k.sentCMA }

// writeRing copies a, b and c into the out ring, publishing as it goes
// and waiting for room when the ring is full.
func (k *conn) writeRing(parts [3][]byte) error {
	size := uint64(len(k.out.data))
	for i := 0; i < len(parts); {
		p := parts[i]
		if len(p) == 0 {
			i++
			continue
		}
		free := size - (k.whead - k.wtail)
		if free == 0 && !k.hasRoom() {
			k.publish()
			if err := k.await(k.roomFn, k.out.wsleep, k.wbell, false); err != nil {
				return err
			}
			continue
		}
		free = size - (k.whead - k.wtail)
		n := int(min(free, uint64(len(p)), k.publishAt))
		k.out.put(k.whead, p[:n])
		k.whead += uint64(n)
		parts[i] = p[n:]
		if k.whead-k.pubHead >= k.publishAt {
			k.publish()
		}
	}
	k.publish()
	return nil
}

// publish makes the bytes written so far visible and wakes a sleeping
// reader.
func (k *conn) publish() {
	if k.whead == k.pubHead {
		return
	}
	atomic.SwapUint64(k.out.head, k.whead) // a barrier before the flag's load: see await
	k.pubHead = k.whead
	k.ring(k.out.rsleep, bellData)
}

func writeErr(op string, err error) error {
	if errors.Is(err, errPeerGone) {
		return fmt.Errorf("btl/sm: %s: %w (%w)", op, syscall.EPIPE, err)
	}
	return fmt.Errorf("btl/sm: %s: %w", op, err)
}

// WriteFrame implements btl.Conn. A payload of at least the single-copy
// threshold, toward a reader that can read this process's memory, is not
// copied into the ring: its address goes, and WriteFrame returns once
// the reader has copied it.
func (k *conn) WriteFrame(hdr, payload []byte) error {
	if len(hdr) > btl.MaxHeader {
		return fmt.Errorf("btl/sm: write frame: header of %d bytes exceeds %d", len(hdr), btl.MaxHeader)
	}
	if int64(len(payload)) > btl.MaxPayload {
		return fmt.Errorf("btl/sm: write frame: payload of %d bytes exceeds %d", len(payload), int64(btl.MaxPayload))
	}
	if err := k.enter("write frame"); err != nil {
		return err
	}
	defer k.gate.RUnlock()
	single := k.singleOK && len(payload) >= k.cmaMin && atomic.LoadUint32(k.out.cma) == 1
	k.wpre = [prefixLen + 8]byte{0: kindInline, 1: byte(len(hdr))}
	binary.LittleEndian.PutUint64(k.wpre[8:], uint64(len(payload)))
	if !single {
		if err := k.writeRing([3][]byte{k.wpre[:prefixLen], hdr, payload}); err != nil {
			return writeErr("write frame", err)
		}
		return nil
	}
	// The reader copies from payload's address until it acknowledges:
	// the buffer must not move (a heap object never does; pinning says
	// so) nor be reused before.
	k.pin.Pin(&payload[0])
	defer k.pin.Unpin()
	k.wpre[0] = kindCMA
	addr := k.wpre[prefixLen:]
	binary.LittleEndian.PutUint64(addr, uint64(uintptr(unsafe.Pointer(&payload[0]))))
	k.sentCMA++
	err := k.writeRing([3][]byte{k.wpre[:prefixLen], hdr, addr})
	if err == nil {
		err = k.await(k.ackFn, k.out.wsleep, k.wbell, false)
	}
	runtime.KeepAlive(payload)
	if err != nil {
		return writeErr("write frame", err)
	}
	return nil
}

// CloseWrite implements btl.Conn: the reader gets io.EOF after the last
// frame.
func (k *conn) CloseWrite() error {
	if err := k.enter("close write"); err != nil {
		return err
	}
	defer k.gate.RUnlock()
	k.wpre = [prefixLen + 8]byte{0: kindEnd}
	if err := k.writeRing([3][]byte{k.wpre[:prefixLen]}); err != nil {
		return writeErr("close write", err)
	}
	return nil
}

// Close implements btl.Conn. Pending reads and writes are woken and fail;
// once none touches the segment it is unmapped, so no mapping of it is
// left in this process.
func (k *conn) Close() error {
	var err error
	k.closeOnce.Do(func() {
		k.closed.Store(true)
		close(k.closedCh)
		err = k.c.Close()
		<-k.ctlDone
		k.gate.Lock()
		if uerr := k.seg.unmap(); uerr != nil && err == nil {
			err = uerr
		}
		k.seg = nil
		k.gate.Unlock()
		if err != nil {
			err = fmt.Errorf("btl/sm: close: %w", err)
		}
	})
	return err
}

var (
	_ btl.Conn   = (*conn)(nil)
	_ btl.Poller = (*conn)(nil)
)
