// Package sm is the BTL component that moves messages between ranks of
// one node through shared memory, as Open MPI's vader and MPICH's nemesis
// do.
//
// Each connection has a segment of its own: the dialer creates it with
// memfd_create, maps it and passes its fd to the acceptor over the
// connection's control socket (SCM_RIGHTS); both close the fd at once and
// keep only the mapping. A memfd has no name in any file system and is
// freed by the kernel when its last mapping goes, so no segment outlives
// the two ranks that use it, however the job ends (a rank, its daemon or
// gompirun killed): nothing under /dev/shm or a session folder to clean.
// The control sockets are abstract Unix sockets
// (@gompi-sm-<uid>-<hash of the job>-<rank>-<random>) for the same reason: they leave
// no file when their process dies. An abstract socket has no permission
// bits, so both ends check the other's credentials (SO_PEERCRED) and
// refuse another user's process, before package mpi's hello proves the
// peer knows the job's secret; the random part of the name keeps another
// user from taking a rank's name first.
//
// The segment holds two single-producer, single-consumer byte rings, one
// each way (mpi's hello needs both), whose head and tail counters live on
// cache lines of their own and are read and written with sync/atomic.
// Frames are streamed through a ring in chunks, wrapping around its end,
// so a payload of any size crosses a ring of a fixed size (the chunked
// path: two copies). A payload of at least btl_sm_cma_min bytes is copied
// once instead where the kernel permits: the writer puts its address in
// the ring and waits, its buffer pinned, until the reader has read it
// with process_vm_readv (CMA). That needs the writer's PID, which
// SO_PEERCRED gives unless the writer runs in a PID namespace the reader
// cannot see (every rank under crs=criu), and ptrace permission; each
// side probes it once when the connection opens and says in the segment
// whether it can, so the writer falls back to the chunked path when it
// cannot. btl_sm_single_copy forces either path.
//
// Waiting: a reader polls its ring while the rank waits for a message
// (btl.Poller), a writer facing a full ring while polling is allowed,
// both yielding between tries, for up to btl_sm_poll. Then the waiter
// raises a flag in the segment, looks once more and sleeps reading a
// channel fed by the connection's control goroutine, which reads the
// control socket through Go's netpoller (no thread blocked); the peer
// that sees the flag lowers it and writes one doorbell byte. A peer's
// death ends its control socket: waits fail, reads see io.EOF between
// frames and io.ErrUnexpectedEOF within one, writes EPIPE, as on a
// socket.
package sm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"gompi/frameworks/btl"
	"gompi/mca"
)

// Priority is the default priority: above uds (20), so peers of the same
// node use shared memory when both are allowed.
const Priority = 30

const (
	paramRing   = "btl_sm_ring"
	paramPoll   = "btl_sm_poll"
	paramSingle = "btl_sm_single_copy"
	paramCMAMin = "btl_sm_cma_min"
)

// Values of btl_sm_single_copy.
const (
	copyAuto = "auto"
	copyCMA  = "cma"
	copyNone = "none"
)

// handshakeTimeout bounds the exchange of a segment when a connection
// opens, for an accepted connection whose dialer stalls.
const handshakeTimeout = 10 * time.Second

// New returns the sm BTL component.
func New() mca.Component[btl.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: btl.Name, Name: "sm",
		Description: "Shared memory between ranks of the same node",
		Priority:    Priority,
		Params: []mca.ParamSpec{
			{Name: paramRing, Type: mca.Size, Default: "256KiB", Level: mca.LevelTuner,
				Help: "Size of each connection's ring in each direction (rounded up to a power of two, at least 4KiB): the bytes a writer can be ahead of its reader, which a loaded node needs (1 MiB messages through the ring, 2 ranks on 2 busy cores: 0.3-0.7 GB/s with 64KiB, 1.5-2.7 with 256KiB). A page costs memory once touched, so only rings that carried that much cost their size"},
			{Name: paramPoll, Type: mca.Duration, Default: "50us", Level: mca.LevelTuner,
				Help: "How long a read busy-polls its ring while the rank waits for a message (and a write a full ring), before sleeping until the peer rings; 0 never polls (saves CPU, costs latency)"},
			{Name: paramSingle, Type: mca.String, Default: copyAuto, Choices: []string{copyAuto, copyCMA, copyNone}, Level: mca.LevelTuner,
				Help: "Large payloads: auto copies them once with process_vm_readv where the kernel permits and through the ring otherwise; cma requires single copy (a connection where it is impossible fails); none always goes through the ring"},
			{Name: paramCMAMin, Type: mca.Size, Default: "32KiB", Level: mca.LevelTuner,
				Help: "Smallest payload copied once (process_vm_readv) rather than through the ring"},
		},
	}, query)
}

// options are a module's parameters.
type options struct {
	ring   int
	poll   time.Duration
	mode   string
	cmaMin int
}

func query(_ context.Context, q mca.Query) (btl.Module, int, error) {
	log := q.Logger
	if log == nil {
		log = slog.Default()
	}
	ring := max(int(q.Values.Size(paramRing)), minRing)
	if ring > maxRing {
		return nil, 0, fmt.Errorf("btl/sm: %s of %d bytes exceeds %d", paramRing, ring, maxRing)
	}
	ring = 1 << bits.Len(uint(ring-1))
	o := options{ring: ring, poll: q.Values.Duration(paramPoll), mode: q.Values.String(paramSingle),
		cmaMin: max(1, int(q.Values.Size(paramCMAMin)))}
	if o.mode == "" {
		o.mode = copyAuto
	}
	return &module{opts: o, uid: os.Getuid(), log: log}, q.Priority, nil
}

type module struct {
	opts options
	uid  int // the user a peer must run as: ours
	log  *slog.Logger

	mu       sync.Mutex
	ln       *net.UnixListener
	closed   bool
	shaking  map[*net.UnixConn]struct{} // accepted, segment not yet mapped
	wg       sync.WaitGroup
	refusals btl.Refusals
}

// address returns a new abstract socket name for rank of job.
func (m *module) address(job string, rank int) (string, error) {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(job))
	return "@gompi-sm-" + strconv.Itoa(m.uid) + "-" + hex.EncodeToString(sum[:6]) + "-" + strconv.Itoa(rank) + "-" + hex.EncodeToString(r[:]), nil
}

func (m *module) Listen(ctx context.Context, self btl.Endpoint, accept func(btl.Conn)) (string, error) {
	addr, err := m.address(self.Job, self.Rank)
	if err != nil {
		return "", fmt.Errorf("btl/sm: listen: %w", err)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "unix", addr)
	if err != nil {
		return "", fmt.Errorf("btl/sm: listen on %s: %w", addr, err)
	}
	ln := l.(*net.UnixListener)
	m.mu.Lock()
	if m.closed || m.ln != nil {
		m.mu.Unlock()
		ln.Close()
		return "", fmt.Errorf("btl/sm: listen: %w or already listening", btl.ErrClosed)
	}
	m.ln = ln
	m.mu.Unlock()
	m.wg.Add(1)
	// The accept goroutine is the module's; Unlisten ends it by closing
	// the listener and waits for it.
	go func() {
		defer m.wg.Done()
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			k, err := m.acceptSegment(c)
			if err != nil {
				m.refusals.Log(m.log, btl.PeerName(err), fmt.Errorf("btl/sm: %w", err))
				c.Close()
				continue
			}
			accept(k)
		}
	}()
	return addr, nil
}

func (m *module) Reachable(self, peer btl.Endpoint) bool {
	return peer.Addr != "" && peer.Node == self.Node && peer.Job == self.Job
}

func (m *module) Dial(ctx context.Context, _, peer btl.Endpoint) (btl.Conn, error) {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("btl/sm: dial rank %d: %w", peer.Rank, btl.ErrClosed)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", peer.Addr)
	if err != nil {
		return nil, fmt.Errorf("btl/sm: dial rank %d at %s: %w", peer.Rank, peer.Addr, err)
	}
	k, err := m.dialSegment(ctx, c.(*net.UnixConn))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("btl/sm: dial rank %d at %s: %w", peer.Rank, peer.Addr, err)
	}
	return k, nil
}

// Unlisten implements btl.Relistener: the listener closes (an abstract
// socket leaves no file), handshakes in progress are cut, and a later
// Listen listens at a new address.
func (m *module) Unlisten() error {
	m.mu.Lock()
	ln := m.ln
	m.ln = nil
	for c := range m.shaking {
		c.SetDeadline(time.Now())
	}
	m.mu.Unlock()
	if ln == nil {
		return nil
	}
	err := ln.Close()
	m.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("btl/sm: close listener: %w", err)
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
