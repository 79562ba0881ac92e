// Package membtl is a BTL for jobs whose ranks all run in one process
// (package mpitest's): a connection is two queues of frames in memory, one
// per direction, with no socket, descriptor or reader thread of the
// kernel's, so a test can run a thousand ranks where real sockets would
// need a million descriptors. A Network is one such memory: the modules of
// its Component reach each other, and nothing outside it. A test can also
// hold the frames of one direction (Network.Hold), to keep messages in
// flight for as long as it likes.
//
// It is test support, not a transport of real jobs: ranks in separate
// processes cannot share it, so no process selects it by itself.
package membtl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"gompi/frameworks/btl"
	"gompi/mca"
)

// Name of the component.
const Name = "mem"

// Network is one memory that modules connect through.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*listener
	seq       int
	holds     []*hold
	frames    atomic.Uint64
}

// NewNetwork returns an empty network.
func NewNetwork() *Network { return &Network{listeners: map[string]*listener{}} }

// Component returns the BTL component whose modules live in n.
func (n *Network) Component() mca.Component[btl.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: btl.Name, Name: Name,
		Description: "Frames through memory between ranks of one process (tests)",
		Version:     "1.0.0",
		Priority:    1,
	}, func(_ context.Context, q mca.Query) (btl.Module, int, error) {
		return &module{net: n}, q.Priority, nil
	})
}

// Frames is the number of frames written on n's connections so far.
func (n *Network) Frames() uint64 { return n.frames.Load() }

// hold keeps the frames from rank src to rank dst from being read, from
// the first with a payload of at least min bytes on, until released.
type hold struct {
	src, dst, min int
	released      chan struct{}
}

// Hold keeps every frame from rank src to rank dst unread, from the first
// whose payload has at least min bytes on (the hello that opens a
// connection stays below 100 bytes and passes, so connections still
// open), until release is called: messages stay in flight, in order. It
// covers connections open now and later ones.
func (n *Network) Hold(src, dst, min int) (release func()) {
	h := &hold{src: src, dst: dst, min: min, released: make(chan struct{})}
	n.mu.Lock()
	n.holds = append(n.holds, h)
	n.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			n.mu.Lock()
			for i, x := range n.holds {
				if x == h {
					n.holds = append(n.holds[:i], n.holds[i+1:]...)
					break
				}
			}
			n.mu.Unlock()
			close(h.released)
		})
	}
}

// holdFor returns the hold of frames from src to dst, nil when none.
func (n *Network) holdFor(src, dst int) *hold {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, h := range n.holds {
		if h.src == src && h.dst == dst {
			return h
		}
	}
	return nil
}

type listener struct {
	self   btl.Endpoint
	accept func(btl.Conn)
	wg     sync.WaitGroup // accept calls under way
}

type module struct {
	net *Network

	mu     sync.Mutex
	addr   string // the listener's, "" when not listening
	closed bool
}

func (m *module) Listen(_ context.Context, self btl.Endpoint, accept func(btl.Conn)) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return "", fmt.Errorf("btl/mem: listen: %w", btl.ErrClosed)
	}
	if m.addr != "" {
		return "", errors.New("btl/mem: listen: already listening")
	}
	n := m.net
	n.mu.Lock()
	n.seq++
	m.addr = "mem-" + strconv.Itoa(n.seq)
	n.listeners[m.addr] = &listener{self: self, accept: accept}
	n.mu.Unlock()
	return m.addr, nil
}

func (m *module) Reachable(_, peer btl.Endpoint) bool {
	if peer.Addr == "" {
		return false
	}
	m.net.mu.Lock()
	defer m.net.mu.Unlock()
	_, ok := m.net.listeners[peer.Addr]
	return ok
}

func (m *module) Dial(_ context.Context, self, peer btl.Endpoint) (btl.Conn, error) {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("btl/mem: dial: %w", btl.ErrClosed)
	}
	n := m.net
	n.mu.Lock()
	l := n.listeners[peer.Addr]
	if l != nil {
		l.wg.Add(1)
	}
	n.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("btl/mem: dial rank %d at %q: nobody listens there", peer.Rank, peer.Addr)
	}
	there, back := newPipe(n, self.Rank, l.self.Rank), newPipe(n, l.self.Rank, self.Rank)
	out := &conn{w: there, r: back}
	in := &conn{w: back, r: there}
	// On a goroutine of the module's, as the socket components hand
	// over what they accept.
	go func() {
		defer l.wg.Done()
		l.accept(in)
	}()
	return out, nil
}

// unlisten removes the module's listener and waits for its accept calls.
func (m *module) unlisten() {
	m.mu.Lock()
	addr := m.addr
	m.addr = ""
	m.mu.Unlock()
	if addr == "" {
		return
	}
	n := m.net
	n.mu.Lock()
	l := n.listeners[addr]
	delete(n.listeners, addr)
	n.mu.Unlock()
	if l != nil {
		l.wg.Wait()
	}
}

// Unlisten implements btl.Relistener.
func (m *module) Unlisten() error {
	m.unlisten()
	return nil
}

func (m *module) Close() error {
	m.unlisten()
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

// pipe is one direction of a connection: frames in the order written.
type pipe struct {
	net      *Network
	src, dst int

	mu      sync.Mutex
	frames  [][]byte // each: header length (1 byte), header, payload
	held    *hold    // frames from the first held one on wait for it
	heldAt  int      // index in frames of the first held frame
	wclosed bool     // the writer is done: io.EOF after the last frame
	rclosed bool     // the reader closed: reads and writes fail
	wake    chan struct{}
	done    chan struct{} // closed with rclosed
}

func newPipe(n *Network, src, dst int) *pipe {
	return &pipe{net: n, src: src, dst: dst, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (p *pipe) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *pipe) write(hdr, payload []byte) error {
	if len(hdr) > btl.MaxHeader {
		return fmt.Errorf("btl/mem: %w: %d-byte header", btl.ErrFrame, len(hdr))
	}
	f := make([]byte, 1+len(hdr)+len(payload))
	f[0] = byte(len(hdr))
	copy(f[1:], hdr)
	copy(f[1+len(hdr):], payload)
	var h *hold
	if len(payload) > 0 {
		h = p.net.holdFor(p.src, p.dst)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rclosed || p.wclosed {
		return fmt.Errorf("btl/mem: write to rank %d: %w", p.dst, btl.ErrClosed)
	}
	if p.held == nil && h != nil && len(payload) >= h.min {
		p.held, p.heldAt = h, len(p.frames)
		// Owned by the pipe: it ends at the release or the close.
		go p.release(h)
	}
	p.frames = append(p.frames, f)
	p.net.frames.Add(1)
	p.signal()
	return nil
}

// release lets the reader past a hold once it is released.
func (p *pipe) release(h *hold) {
	select {
	case <-h.released:
	case <-p.done:
		return
	}
	p.mu.Lock()
	if p.held == h {
		p.held = nil
	}
	p.mu.Unlock()
	p.signal()
}

// next waits for the next frame the reader may take.
func (p *pipe) next() ([]byte, error) {
	for {
		p.mu.Lock()
		switch {
		case p.rclosed:
			p.mu.Unlock()
			return nil, fmt.Errorf("btl/mem: read from rank %d: %w", p.src, btl.ErrClosed)
		case len(p.frames) > 0 && (p.held == nil || p.heldAt > 0):
			f := p.frames[0]
			p.frames[0] = nil
			p.frames = p.frames[1:]
			if p.held != nil {
				p.heldAt--
			}
			p.mu.Unlock()
			return f, nil
		case len(p.frames) == 0 && p.wclosed:
			p.mu.Unlock()
			return nil, io.EOF
		}
		p.mu.Unlock()
		<-p.wake
	}
}

func (p *pipe) closeWrite() {
	p.mu.Lock()
	p.wclosed = true
	p.mu.Unlock()
	p.signal()
}

func (p *pipe) closeRead() {
	p.mu.Lock()
	if !p.rclosed {
		p.rclosed = true
		p.frames = nil
		close(p.done)
	}
	p.mu.Unlock()
	p.signal()
}

// conn is one end of a connection: it writes w and reads r.
type conn struct {
	w, r *pipe
	cur  []byte // the payload of the frame being read
}

func (c *conn) WriteFrame(hdr, payload []byte) error { return c.w.write(hdr, payload) }

func (c *conn) ReadHeader(hdr []byte) (int, int, error) {
	if len(c.cur) > 0 {
		return 0, 0, fmt.Errorf("btl/mem: %w: read a header with %d payload bytes unread", btl.ErrFrame, len(c.cur))
	}
	f, err := c.r.next()
	if err != nil {
		return 0, 0, err
	}
	hn := int(f[0])
	copy(hdr, f[1:1+hn])
	c.cur = f[1+hn:]
	return hn, len(c.cur), nil
}

func (c *conn) ReadPayload(p []byte) error {
	if len(p) > len(c.cur) {
		return fmt.Errorf("btl/mem: %w: %d bytes wanted of a payload's %d", btl.ErrFrame, len(p), len(c.cur))
	}
	copy(p, c.cur)
	c.cur = c.cur[len(p):]
	return nil
}

func (c *conn) Discard(n int) error {
	if n > len(c.cur) {
		return fmt.Errorf("btl/mem: %w: discard %d bytes of a payload's %d", btl.ErrFrame, n, len(c.cur))
	}
	c.cur = c.cur[n:]
	return nil
}

func (c *conn) CloseWrite() error {
	c.w.closeWrite()
	return nil
}

// Close ends both directions: the peer reads what was written, then
// io.EOF; this end's reads and the peer's writes fail.
func (c *conn) Close() error {
	c.w.closeWrite()
	c.r.closeRead()
	return nil
}

var (
	_ btl.Module     = (*module)(nil)
	_ btl.Relistener = (*module)(nil)
	_ btl.Conn       = (*conn)(nil)
)
