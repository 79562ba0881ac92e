// Package uds is the BTL component that moves messages between ranks of
// one node over Unix-domain stream sockets. Each rank listens on
// <dir>/gompi-<uid>-<job>/<rank>.sock, in a directory only the user can
// enter; a peer is reachable when it published a socket and runs on the
// same node of the same job. Both ends of every connection also check the
// other's credentials (SO_PEERCRED): a process of another user is refused
// whatever the folder's permissions, before package mpi's hello proves
// the peer knows the job's secret.
package uds

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"gompi/frameworks/btl"
	"gompi/mca"
)

// Priority is the default priority: above tcp, so same-node peers use
// Unix sockets when both are allowed.
const Priority = 20

const readBuffer = 64 << 10

// maxPath is the longest socket path the kernel takes (sun_path is 108
// bytes with the terminating NUL).
const maxPath = 107

const (
	paramDir  = "btl_uds_dir"
	paramPoll = "btl_uds_poll"
	paramSnd  = "btl_uds_sndbuf"
)

// New returns the uds BTL component.
func New() mca.Component[btl.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: btl.Name, Name: "uds",
		Description: "Unix-domain sockets between ranks of the same node",
		Priority:    Priority,
		Params: []mca.ParamSpec{
			{Name: paramDir, Type: mca.String, Level: mca.LevelTuner,
				Help: "Folder holding the per-job socket folders; empty means $TMPDIR or /tmp. Socket paths must stay under 108 bytes"},
			{Name: paramSnd, Type: mca.Size, Default: "1MiB", Level: mca.LevelTuner,
				Help: "Socket send buffer size, which bounds the bytes in flight on a Unix socket (a larger one lets a large message be copied in and out at once); 0 keeps the system default, net.core.wmem_default; the kernel caps it at net.core.wmem_max"},
			{Name: paramPoll, Type: mca.Duration, Default: "50us", Level: mca.LevelTuner,
				Help: "How long a read busy-polls for data while the rank waits for a message, before sleeping; 0 never polls (saves CPU, costs latency)"},
		},
	}, query)
}

func query(_ context.Context, q mca.Query) (btl.Module, int, error) {
	log := q.Logger
	if log == nil {
		log = slog.Default()
	}
	return &module{base: q.Values.String(paramDir), poll: q.Values.Duration(paramPoll), sndbuf: int(q.Values.Size(paramSnd)),
		uid: os.Getuid(), log: log}, q.Priority, nil
}

type module struct {
	base   string
	poll   time.Duration
	sndbuf int
	uid    int // the user a peer must run as: ours
	log    *slog.Logger

	mu       sync.Mutex
	ln       *net.UnixListener
	dir      string
	closed   bool
	wg       sync.WaitGroup
	refusals btl.Refusals
}

// jobDir returns the per-job folder for job under base, shortening the job
// id to a hash when the socket paths would be too long.
func jobDir(base, job string, rank int) (dir, sock string, err error) {
	if base == "" {
		base = os.TempDir()
	}
	uid := strconv.Itoa(os.Getuid())
	name := safeName(job)
	if name == "" || len(name) > 40 {
		sum := sha256.Sum256([]byte(job))
		name = hex.EncodeToString(sum[:8])
	}
	dir = filepath.Join(base, "gompi-"+uid+"-"+name)
	sock = filepath.Join(dir, strconv.Itoa(rank)+".sock")
	if len(sock) > maxPath {
		return "", "", fmt.Errorf("socket path %s is %d bytes, longer than the %d the kernel takes: set %s to a shorter folder", sock, len(sock), maxPath, paramDir)
	}
	return dir, sock, nil
}

func safeName(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return ""
		}
	}
	return s
}

// ensureDir creates dir for the user alone, or checks that an existing one
// belongs to the user and nobody else can enter it: another user's folder
// could hold sockets that impersonate ranks.
func ensureDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s exists but is not a folder of this user closed to others; remove it or set %s", dir, paramDir)
	}
	return nil
}

// maxBindAttempts bounds how often Listen makes the job's folder again
// after it vanished: each time another rank of the job removed it, which
// it does at most once per Unlisten.
const maxBindAttempts = 16

// bindIn makes (or checks) the job's folder dir and listens on sock in it.
func bindIn(ctx context.Context, dir, sock string) (net.Listener, error) {
	if err := ensureDir(dir); err != nil {
		return nil, fmt.Errorf("btl/uds: socket folder: %w", err)
	}
	// A socket left by a killed run of the same job and rank would make
	// the bind fail; nobody else can own it in our private folder.
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("btl/uds: remove stale socket: %w", err)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "unix", sock)
	if err != nil {
		return nil, fmt.Errorf("btl/uds: listen on %s: %w", sock, err)
	}
	return l, nil
}

func (m *module) Listen(ctx context.Context, self btl.Endpoint, accept func(btl.Conn)) (string, error) {
	dir, sock, err := jobDir(m.base, self.Job, self.Rank)
	if err != nil {
		return "", fmt.Errorf("btl/uds: %w", err)
	}
	// The folder goes when the job's last socket on this node closes
	// (Unlisten), so a rank listening anew while another rank of the job
	// stops listening (a rollback, a suspension) can see it vanish before
	// its socket is bound in it: make it again.
	var l net.Listener
	for attempt := 1; ; attempt++ {
		l, err = bindIn(ctx, dir, sock)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt == maxBindAttempts {
			return "", err
		}
	}
	ln := l.(*net.UnixListener)
	m.mu.Lock()
	if m.closed || m.ln != nil {
		m.mu.Unlock()
		ln.Close()
		return "", fmt.Errorf("btl/uds: listen: %w or already listening", btl.ErrClosed)
	}
	m.ln, m.dir = ln, dir
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			if err := m.checkPeer(c); err != nil {
				m.refusals.Log(m.log, btl.PeerName(err), fmt.Errorf("btl/uds: %w", err))
				c.Close()
				continue
			}
			accept(m.wrap(c))
		}
	}()
	return sock, nil
}

func (m *module) Reachable(self, peer btl.Endpoint) bool {
	return peer.Addr != "" && peer.Node == self.Node && peer.Job == self.Job
}

func (m *module) Dial(ctx context.Context, _, peer btl.Endpoint) (btl.Conn, error) {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("btl/uds: dial rank %d: %w", peer.Rank, btl.ErrClosed)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", peer.Addr)
	if err != nil {
		return nil, fmt.Errorf("btl/uds: dial rank %d at %s: %w", peer.Rank, peer.Addr, err)
	}
	uc := c.(*net.UnixConn)
	if err := m.checkPeer(uc); err != nil {
		uc.Close()
		return nil, fmt.Errorf("btl/uds: dial rank %d at %s: %w", peer.Rank, peer.Addr, err)
	}
	return m.wrap(uc), nil
}

// checkPeer refuses another user's process (btl.CheckPeer).
func (m *module) checkPeer(c *net.UnixConn) error {
	_, err := btl.CheckPeer(c, m.uid)
	return err
}

func (m *module) wrap(c *net.UnixConn) *btl.StreamConn {
	if m.sndbuf > 0 {
		// Best effort: the kernel caps it at net.core.wmem_max.
		c.SetWriteBuffer(m.sndbuf)
	}
	return btl.NewStreamConn(c, readBuffer, m.poll)
}

// Unlisten implements btl.Relistener: the listener closes, its socket
// file goes (and the job's folder when no other rank's socket is left in
// it), and a later Listen makes them again.
func (m *module) Unlisten() error {
	m.mu.Lock()
	ln, dir := m.ln, m.dir
	m.ln = nil
	m.mu.Unlock()
	if ln == nil {
		return nil
	}
	err := ln.Close() // removes the socket file
	m.wg.Wait()
	// The last rank of the job on this node removes the folder; the others
	// find it not empty.
	os.Remove(dir)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("btl/uds: close listener: %w", err)
	}
	return nil
}

func (m *module) Close() error {
	m.mu.Lock()
	already := m.closed
	m.closed = true
	m.mu.Unlock()
	if already {
		return nil
	}
	return m.Unlisten()
}

var (
	_ btl.Module     = (*module)(nil)
	_ btl.Relistener = (*module)(nil)
)
