package plugin

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// File descriptors cannot cross gRPC: a call that passes some (a CRS's
// Restore: crs.RestoreRequest's pipes and Files) sends them on a unix
// socket pair the host makes when it starts the plugin, whose plugin end
// is the plugin's descriptor fdSocket (exec.Cmd.ExtraFiles) and named by
// envFDs. Each batch is one message: its id (8 bytes, big-endian) and
// count (4 bytes), with the descriptors as SCM_RIGHTS; the call names the
// batch by id, and the plugin waits for it (the socket and the gRPC
// connection are not ordered with each other).

const (
	// envFDs tells a plugin that its descriptor fdSocket is the socket.
	envFDs   = "GOMPI_PLUGIN_FD_SOCKET"
	fdSocket = 3
	// maxFDs bounds one batch (a rank inherits a handful).
	maxFDs = 64
)

// fdSender is the host's end.
type fdSender struct {
	mu   sync.Mutex
	conn *net.UnixConn
	next uint64
}

// newFDPair makes the socket pair: the host's sender and the plugin's end,
// to pass as the child's descriptor fdSocket and close after the start.
func newFDPair() (*fdSender, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("plugin: descriptor socket: %w", err)
	}
	mine := os.NewFile(uintptr(fds[0]), "plugin-fds-host")
	theirs := os.NewFile(uintptr(fds[1]), "plugin-fds")
	c, err := net.FileConn(mine)
	mine.Close() // FileConn made its own copy
	if err != nil {
		theirs.Close()
		return nil, nil, fmt.Errorf("plugin: descriptor socket: %w", err)
	}
	return &fdSender{conn: c.(*net.UnixConn)}, theirs, nil
}

// send sends files as one batch and returns its id (0 for none).
func (s *fdSender) send(files []*os.File) (uint64, error) {
	if len(files) == 0 {
		return 0, nil
	}
	if len(files) > maxFDs {
		return 0, fmt.Errorf("plugin: %d descriptors to pass, at most %d", len(files), maxFDs)
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	msg := binary.BigEndian.AppendUint64(nil, s.next)
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(files)))
	if _, _, err := s.conn.WriteMsgUnix(msg, unix.UnixRights(fds...), nil); err != nil {
		return 0, fmt.Errorf("plugin: pass descriptors: %w", err)
	}
	return s.next, nil
}

func (s *fdSender) close() { s.conn.Close() }

// fdReceiver is the plugin's end: batches received, by id, until taken.
type fdReceiver struct {
	mu      sync.Mutex
	batches map[uint64][]*os.File
	more    chan struct{} // closed and replaced when a batch arrives
	err     error         // why receiving ended
}

// newFDReceiver starts receiving on the plugin's end, when the host gave
// one. Its goroutine is owned by the plugin process: it ends when the
// host's end closes (the host closed or died).
func newFDReceiver() *fdReceiver {
	r := &fdReceiver{batches: map[uint64][]*os.File{}, more: make(chan struct{})}
	if os.Getenv(envFDs) == "" {
		r.err = errors.New("the host passed no descriptor socket")
		return r
	}
	f := os.NewFile(fdSocket, "plugin-fds")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		r.err = fmt.Errorf("descriptor socket: %w", err)
		return r
	}
	go r.run(c.(*net.UnixConn))
	return r
}

func (r *fdReceiver) run(c *net.UnixConn) {
	defer c.Close()
	buf := make([]byte, 12)
	oob := make([]byte, unix.CmsgSpace(maxFDs*4))
	for {
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err == nil && n != len(buf) {
			err = fmt.Errorf("short message (%d bytes)", n)
		}
		var files []*os.File
		if err == nil {
			files, err = parseRights(oob[:oobn])
		}
		r.mu.Lock()
		if err != nil {
			r.err = fmt.Errorf("descriptor socket: %w", err)
			close(r.more)
			r.mu.Unlock()
			return
		}
		r.batches[binary.BigEndian.Uint64(buf)] = files
		close(r.more)
		r.more = make(chan struct{})
		r.mu.Unlock()
	}
}

func parseRights(oob []byte) ([]*os.File, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			return nil, err
		}
		for _, fd := range fds {
			unix.CloseOnExec(fd)
			files = append(files, os.NewFile(uintptr(fd), fmt.Sprintf("fd%d", fd)))
		}
	}
	return files, nil
}

// take waits for batch id (none for 0) and hands its files to the caller.
func (r *fdReceiver) take(ctx context.Context, id uint64, n int) ([]*os.File, error) {
	if id == 0 {
		return nil, nil
	}
	for {
		r.mu.Lock()
		files, ok := r.batches[id]
		delete(r.batches, id)
		more, rerr := r.more, r.err
		r.mu.Unlock()
		switch {
		case ok && len(files) != n:
			closeFiles(files)
			return nil, fmt.Errorf("plugin: descriptor batch %d has %d descriptors, want %d", id, len(files), n)
		case ok:
			return files, nil
		case rerr != nil:
			return nil, fmt.Errorf("plugin: descriptor batch %d: %w", id, rerr)
		}
		select {
		case <-more:
		case <-ctx.Done():
			return nil, fmt.Errorf("plugin: wait for descriptor batch %d: %w", id, ctx.Err())
		}
	}
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
