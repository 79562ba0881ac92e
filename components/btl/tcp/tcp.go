// Package tcp is the BTL component that moves messages over TCP: any peer
// that published an address is reachable. Sockets run with TCP_NODELAY so
// small messages leave at once; buffer sizes follow the kernel's
// autotuning unless btl_tcp_sndbuf/btl_tcp_rcvbuf say otherwise. With
// btl_tcp_tls every connection is TLS 1.3 keyed from the job's data-plane
// secret (tls.go), which the module takes from its host (btl.Host).
package tcp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"gompi/frameworks/btl"
	"gompi/mca"
)

// Priority is the default priority: below uds, so peers on the same node
// use Unix sockets when both are allowed.
const Priority = 10

// readBuffer is the per-connection read buffer: frames up to this size
// arrive with one system call.
const readBuffer = 64 << 10

const (
	paramListen = "btl_tcp_listen_addr"
	paramSnd    = "btl_tcp_sndbuf"
	paramRcv    = "btl_tcp_rcvbuf"
	paramPoll   = "btl_tcp_poll"
	paramTLS    = "btl_tcp_tls"
)

// New returns the tcp BTL component.
func New() mca.Component[btl.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: btl.Name, Name: "tcp",
		Description: "TCP sockets between any two nodes",
		Priority:    Priority,
		Params: []mca.ParamSpec{
			{Name: paramListen, Type: mca.String, Level: mca.LevelTuner,
				Help: "Where ranks listen and what they publish: an IP address or host name, an interface name (eth0), or * for all interfaces publishing the first non-loopback IPv4 address; empty means 127.0.0.1 (one host)"},
			{Name: paramSnd, Type: mca.Size, Default: "0", Level: mca.LevelTuner,
				Help: "Socket send buffer size; 0 leaves the kernel's autotuning on (setting a size turns it off)"},
			{Name: paramRcv, Type: mca.Size, Default: "0", Level: mca.LevelTuner,
				Help: "Socket receive buffer size; 0 leaves the kernel's autotuning on (setting a size turns it off)"},
			{Name: paramPoll, Type: mca.Duration, Default: "50us", Level: mca.LevelTuner,
				Help: "How long a read busy-polls for data while the rank waits for a message, before sleeping; 0 never polls (saves CPU, costs latency)"},
			{Name: paramTLS, Type: mca.Bool, Default: "false", Level: mca.LevelUser,
				Help: "Wrap every connection between ranks in TLS 1.3 authenticated by the job's data-plane secret (no CA): use it when ranks talk over a network you do not trust, where others could read or alter their messages; it costs latency and bandwidth and turns off busy-polling"},
		},
	}, query)
}

func query(_ context.Context, q mca.Query) (btl.Module, int, error) {
	log := q.Logger
	if log == nil {
		log = slog.Default()
	}
	stop, cancel := context.WithCancel(context.Background())
	return &module{
		log: log, stop: stop, cancel: cancel,
		listen: q.Values.String(paramListen),
		sndbuf: int(q.Values.Size(paramSnd)),
		rcvbuf: int(q.Values.Size(paramRcv)),
		poll:   q.Values.Duration(paramPoll),
		useTLS: q.Values.Bool(paramTLS),
	}, q.Priority, nil
}

type module struct {
	listen         string
	sndbuf, rcvbuf int
	poll           time.Duration
	useTLS         bool
	tls            *tlsConfigs // set by Provision when useTLS
	log            *slog.Logger
	// stop ends the TLS handshakes of accepted connections (cancel, at
	// Close).
	stop   context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	ln       net.Listener
	lnStop   context.CancelFunc // ends the listener's TLS handshakes (Unlisten)
	closed   bool
	wg       sync.WaitGroup // the accept loop and its TLS handshakes
	refusals btl.Refusals   // failed TLS handshakes, by peer address
}

// Provision takes the job's data-plane secret, from which a module with
// btl_tcp_tls keys its TLS; without TLS the module needs nothing of it.
func (m *module) Provision(_ context.Context, h btl.Host) error {
	if !m.useTLS {
		return nil
	}
	c, err := newTLS(h.Secret, h.Job)
	if err != nil {
		return err
	}
	m.tls = c
	return nil
}

// errNoSecret is returned by Listen and Dial of a module with TLS that was
// never provisioned: it has no key to prove.
var errNoSecret = errors.New("btl/tcp: " + paramTLS + " is on but the module has no data-plane secret (not provisioned)")

// listenHost turns btl_tcp_listen_addr into the host to bind and the host
// to publish.
func listenHost(v string) (bind, publish string, err error) {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return "127.0.0.1", "127.0.0.1", nil
	case v == "*":
		return "", firstIPv4(nil), nil
	}
	if ifc, err := net.InterfaceByName(v); err == nil {
		ip := firstIPv4(ifc)
		if ip == "" {
			return "", "", fmt.Errorf("interface %s has no IPv4 address", v)
		}
		return ip, ip, nil
	}
	return v, v, nil
}

// firstIPv4 returns the first non-loopback IPv4 address of ifc (of any up
// interface when ifc is nil), or 127.0.0.1.
func firstIPv4(ifc *net.Interface) string {
	var ifcs []net.Interface
	if ifc != nil {
		ifcs = []net.Interface{*ifc}
	} else {
		ifcs, _ = net.Interfaces()
	}
	for _, i := range ifcs {
		if i.Flags&net.FlagUp == 0 || (ifc == nil && i.Flags&net.FlagLoopback != 0) {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && (ifc != nil || !n.IP.IsLoopback()) {
				return n.IP.String()
			}
		}
	}
	if ifc != nil {
		return ""
	}
	return "127.0.0.1"
}

func (m *module) Listen(ctx context.Context, self btl.Endpoint, accept func(btl.Conn)) (string, error) {
	if m.useTLS && m.tls == nil {
		return "", errNoSecret
	}
	bind, publish, err := listenHost(m.listen)
	if err != nil {
		return "", fmt.Errorf("btl/tcp: %s = %q: %w", paramListen, m.listen, err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(bind, "0"))
	if err != nil {
		return "", fmt.Errorf("btl/tcp: listen on %s: %w (set %s to an address of this node)", bind, err, paramListen)
	}
	m.mu.Lock()
	if m.closed || m.ln != nil {
		m.mu.Unlock()
		ln.Close()
		return "", fmt.Errorf("btl/tcp: listen: %w or already listening", btl.ErrClosed)
	}
	m.ln = ln
	// The handshakes of this listener end with it (Unlisten) or with the
	// module (Close).
	stop, cancel := context.WithCancel(m.stop)
	m.lnStop = cancel
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed; a listener error with the module open cannot be retried usefully either
			}
			if m.tls != nil {
				// Each handshake on a goroutine of its own, so a peer
				// that stalls its handshake holds up no other accept.
				m.wg.Add(1)
				go func() { defer m.wg.Done(); m.acceptTLS(stop, c, accept) }()
				continue
			}
			sc, err := m.wrap(ctx, c, false)
			if err != nil {
				c.Close()
				continue
			}
			accept(sc)
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return net.JoinHostPort(publish, port), nil
}

// handshakeBound bounds an accepted connection's TLS handshake, as package
// mpi bounds its hello.
const handshakeBound = 30 * time.Second

// acceptTLS runs an accepted connection's TLS handshake and hands the
// connection on only when the peer proved the job's key; a failed
// handshake is logged once per peer address.
func (m *module) acceptTLS(stop context.Context, c net.Conn, accept func(btl.Conn)) {
	ctx, cancel := context.WithTimeout(stop, handshakeBound)
	defer cancel()
	sc, err := m.wrap(ctx, c, false)
	if err != nil {
		c.Close()
		if stop.Err() == nil {
			m.refusals.Log(m.log, c.RemoteAddr().String(), err)
		}
		return
	}
	accept(sc)
}

// wrap sets a new connection's socket options and frames it; with TLS
// it is a TLS client (dialed) or server (accepted) first, its handshake
// done here within ctx.
func (m *module) wrap(ctx context.Context, c net.Conn, dialed bool) (*btl.StreamConn, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil, fmt.Errorf("btl/tcp: unexpected connection type %T", c)
	}
	if err := tc.SetNoDelay(true); err != nil {
		return nil, fmt.Errorf("btl/tcp: set TCP_NODELAY: %w", err)
	}
	if m.sndbuf > 0 {
		if err := tc.SetWriteBuffer(m.sndbuf); err != nil {
			return nil, fmt.Errorf("btl/tcp: %s: %w", paramSnd, err)
		}
	}
	if m.rcvbuf > 0 {
		if err := tc.SetReadBuffer(m.rcvbuf); err != nil {
			return nil, fmt.Errorf("btl/tcp: %s: %w", paramRcv, err)
		}
	}
	if m.tls == nil {
		return btl.NewStreamConn(tc, readBuffer, m.poll), nil
	}
	var tc2 *tls.Conn
	if dialed {
		tc2 = tls.Client(tc, m.tls.client)
	} else {
		tc2 = tls.Server(tc, m.tls.server)
	}
	if err := tc2.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("btl/tcp: TLS handshake with %s: %w", c.RemoteAddr(), err)
	}
	// A tls.Conn is no syscall.Conn, so StreamConn does not busy-poll it.
	return btl.NewStreamConn(tc2, readBuffer, m.poll), nil
}

func (m *module) Reachable(_, peer btl.Endpoint) bool { return peer.Addr != "" }

func (m *module) Dial(ctx context.Context, _, peer btl.Endpoint) (btl.Conn, error) {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("btl/tcp: dial rank %d: %w", peer.Rank, btl.ErrClosed)
	}
	if m.useTLS && m.tls == nil {
		return nil, errNoSecret
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", peer.Addr)
	if err != nil {
		return nil, fmt.Errorf("btl/tcp: dial rank %d at %s: %w", peer.Rank, peer.Addr, err)
	}
	sc, err := m.wrap(ctx, c, true)
	if err != nil {
		c.Close()
		return nil, err
	}
	return sc, nil
}

// Unlisten implements btl.Relistener: the listener closes (its port is
// free), handshakes in progress end, and a later Listen binds a new port.
func (m *module) Unlisten() error {
	m.mu.Lock()
	ln, stop := m.ln, m.lnStop
	m.ln, m.lnStop = nil, nil
	m.mu.Unlock()
	if ln == nil {
		return nil
	}
	err := ln.Close()
	stop()
	m.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("btl/tcp: close listener: %w", err)
	}
	return nil
}

func (m *module) Close() error {
	m.mu.Lock()
	already := m.closed
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	if already {
		return nil
	}
	return m.Unlisten()
}

var (
	_ btl.Module                = (*module)(nil)
	_ btl.Relistener            = (*module)(nil)
	_ mca.Provisioner[btl.Host] = (*module)(nil)
)
