package sm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"gompi/frameworks/btl"
)

// probeWord is what a peer reads in this process, at the address this
// process wrote in the segment, to learn whether it may read its memory.
var probeWord uint64 = segMagic

// dialSegment makes the segment of a dialed connection and hands it over:
// it sends the fd, waits for the acceptor's answer (it mapped the segment
// and wrote its probe address), then probes single copy from the acceptor.
func (m *module) dialSegment(ctx context.Context, c *net.UnixConn) (*conn, error) {
	pid, err := btl.CheckPeer(c, m.uid)
	if err != nil {
		return nil, err
	}
	seg, fd, err := createSegment(m.opts.ring)
	if err != nil {
		return nil, err
	}
	atomic.StoreUint64(seg.word(offProbe), uint64(uintptr(unsafe.Pointer(&probeWord))))
	_, _, err = c.WriteMsgUnix([]byte{'s'}, unix.UnixRights(fd), nil)
	unix.Close(fd) // the mapping keeps the memory; the message holds its own reference
	if err == nil {
		err = m.answer(ctx, c)
	}
	if err == nil {
		err = m.probe(pid, seg.word(offProbe+8), seg.ring(1).cma)
	}
	if err != nil {
		seg.unmap()
		return nil, err
	}
	return newConn(c, seg, true, pid, m.opts), nil
}

// answer reads the acceptor's one-byte answer.
func (m *module) answer(ctx context.Context, c *net.UnixConn) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(handshakeTimeout)
	}
	c.SetReadDeadline(deadline)
	defer c.SetReadDeadline(time.Time{})
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		return fmt.Errorf("segment handshake: %w", err)
	}
	if b[0] != 'k' {
		return fmt.Errorf("%w: segment handshake answer %q", btl.ErrFrame, b[0])
	}
	return nil
}

// acceptSegment receives and maps the segment of an accepted connection,
// probes single copy from the dialer and answers.
func (m *module) acceptSegment(c *net.UnixConn) (*conn, error) {
	m.mu.Lock()
	if m.shaking == nil {
		m.shaking = map[*net.UnixConn]struct{}{}
	}
	m.shaking[c] = struct{}{}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.shaking, c)
		m.mu.Unlock()
	}()
	pid, err := btl.CheckPeer(c, m.uid)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	seg, err := receiveSegment(c)
	if err != nil {
		return nil, err
	}
	atomic.StoreUint64(seg.word(offProbe+8), uint64(uintptr(unsafe.Pointer(&probeWord))))
	err = m.probe(pid, seg.word(offProbe), seg.ring(0).cma)
	if err == nil {
		_, err = c.Write([]byte{'k'})
	}
	if err == nil {
		err = c.SetDeadline(time.Time{})
	}
	if err != nil {
		seg.unmap()
		return nil, fmt.Errorf("segment handshake: %w", err)
	}
	return newConn(c, seg, false, pid, m.opts), nil
}

// receiveSegment reads the dialer's message carrying the segment's fd and
// maps it.
func receiveSegment(c *net.UnixConn) (*segment, error) {
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := c.ReadMsgUnix(b[:], oob)
	if err != nil {
		return nil, fmt.Errorf("segment handshake: %w", err)
	}
	var fds []int
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	for _, msg := range msgs {
		got, rerr := unix.ParseUnixRights(&msg)
		if rerr == nil {
			fds = append(fds, got...)
		}
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if err != nil || n != 1 || b[0] != 's' || len(fds) != 1 {
		return nil, fmt.Errorf("%w: segment handshake: %d bytes, %d fds (%v)", btl.ErrFrame, n, len(fds), err)
	}
	return mapSegment(fds[0])
}

// probe tries once to read the peer's probe word, whose address the peer
// wrote at addr, from process pid; when that works it raises flag (the
// peer may send single-copy frames). The single-copy parameter decides
// whether to try, and whether failing fails the connection.
func (m *module) probe(pid int, addr *uint64, flag *uint32) error {
	if m.opts.mode == copyNone {
		return nil
	}
	err := errNoPID
	if pid != 0 {
		var got [8]byte
		local := []unix.Iovec{{Base: &got[0]}}
		local[0].SetLen(len(got))
		remote := []unix.RemoteIovec{{Base: uintptr(atomic.LoadUint64(addr)), Len: len(got)}}
		var n int
		n, err = unix.ProcessVMReadv(pid, local, remote, 0)
		if err == nil && (n != len(got) || binary.NativeEndian.Uint64(got[:]) != segMagic) {
			err = fmt.Errorf("read %d bytes that are not the probe word", n)
		}
	}
	if err == nil {
		atomic.StoreUint32(flag, 1)
		return nil
	}
	if m.opts.mode == copyCMA {
		return fmt.Errorf("single copy from process %d is impossible and %s is %s: %w", pid, paramSingle, copyCMA, err)
	}
	return nil
}

var errNoPID = errors.New("the peer runs in a PID namespace this process cannot see")
