package control

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// ErrContact is wrapped by errors about a malformed contact address.
var ErrContact = errors.New("control: bad contact address")

// MaxSocketPath is the longest Unix socket path Linux accepts.
const MaxSocketPath = 107

// Contact is one address a process can be reached at.
type Contact struct {
	Network string // "unix" or "tcp"
	Addr    string // a socket path, or host:port
}

func (c Contact) String() string { return c.Network + ":" + c.Addr }

// ParseContact reads "unix:/abs/path" or "tcp:host:port".
func ParseContact(s string) (Contact, error) {
	network, addr, ok := strings.Cut(s, ":")
	if !ok || addr == "" {
		return Contact{}, fmt.Errorf("%w: %q: want unix:/path or tcp:host:port", ErrContact, s)
	}
	switch network {
	case "unix":
		if !filepath.IsAbs(addr) || len(addr) > MaxSocketPath || strings.ContainsRune(addr, 0) {
			return Contact{}, fmt.Errorf("%w: %q: want an absolute socket path of at most %d bytes", ErrContact, s, MaxSocketPath)
		}
	case "tcp":
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" || port == "" {
			return Contact{}, fmt.Errorf("%w: %q: want tcp:host:port", ErrContact, s)
		}
	default:
		return Contact{}, fmt.Errorf("%w: %q: network %q is not unix or tcp", ErrContact, s, network)
	}
	return Contact{Network: network, Addr: addr}, nil
}

// ParseContacts reads a comma-separated list of contacts, all of one network.
func ParseContacts(s string) ([]Contact, error) {
	var out []Contact
	for _, part := range strings.Split(s, ",") {
		c, err := ParseContact(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		if len(out) > 0 && out[0].Network != c.Network {
			return nil, fmt.Errorf("%w: %q mixes networks", ErrContact, s)
		}
		out = append(out, c)
	}
	return out, nil
}

// Handshake is what a daemon reads as one line on its standard input
// before anything else: the job secret and, for daemons reaching the HNP
// over TCP, the pin of the HNP's TLS certificate.
type Handshake struct {
	Secret Secret
	Pin    []byte // SHA-256 of the HNP's certificate; nil over Unix sockets
	// Nodes and Radix give the shape of the job's daemon tree (package
	// rte/routed): a daemon finds its parent there. Radix 0 (or no nodes)
	// is the star: every daemon attaches to gompirun.
	Nodes []string
	Radix int
}

type handshakeJSON struct {
	Secret string   `json:"secret"`
	Pin    string   `json:"pin,omitempty"`
	Nodes  []string `json:"nodes,omitempty"`
	Radix  int      `json:"radix,omitempty"`
}

// Marshal renders the handshake line (without the newline).
func (h Handshake) Marshal() []byte {
	b, _ := json.Marshal(handshakeJSON{Secret: h.Secret.Hex(), Pin: hex.EncodeToString(h.Pin), Nodes: h.Nodes, Radix: h.Radix})
	return b
}

// ParseHandshake reads a handshake line.
func ParseHandshake(line []byte) (Handshake, error) {
	var j handshakeJSON
	if err := json.Unmarshal(line, &j); err != nil {
		return Handshake{}, fmt.Errorf("control: handshake: %w", err)
	}
	s, err := ParseSecret(j.Secret)
	if err != nil {
		return Handshake{}, fmt.Errorf("control: handshake: %w", err)
	}
	h := Handshake{Secret: s, Nodes: j.Nodes, Radix: j.Radix}
	if j.Radix < 0 {
		return Handshake{}, fmt.Errorf("control: handshake: radix %d is negative", j.Radix)
	}
	if j.Pin != "" {
		if h.Pin, err = hex.DecodeString(j.Pin); err != nil || len(h.Pin) != 32 {
			return Handshake{}, fmt.Errorf("control: handshake: certificate pin: want 64 hex digits")
		}
	}
	return h, nil
}

// PrivateDir creates dir (and its parents) and makes dir itself
// accessible to its owner only. An existing dir owned by someone else is
// refused: a socket in it would not be private.
func PrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("control: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("control: %s is not a directory", dir)
	}
	if uid, ok := ownerOf(st); ok && uid != os.Getuid() {
		return fmt.Errorf("control: %s belongs to uid %d, not to us (%d): remove it or choose another directory", dir, uid, os.Getuid())
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("control: %w", err)
	}
	return nil
}

// ListenUnix listens on a Unix socket at path, in a private directory,
// replacing a stale socket left there. The socket itself is owner-only.
func ListenUnix(path string) (net.Listener, error) {
	if len(path) > MaxSocketPath {
		return nil, fmt.Errorf("control: socket path %s is %d bytes, more than the %d Linux allows: choose a shorter directory (TMPDIR, XDG_RUNTIME_DIR or plm_base_session_dir)", path, len(path), MaxSocketPath)
	}
	if err := PrivateDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("control: remove stale socket: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("control: %w", err)
	}
	return l, nil
}

// NewServer returns a gRPC server demanding secret on every call; tlsCert
// non-nil makes it serve TLS (for TCP listeners).
func NewServer(secret Secret, creds credentials.TransportCredentials) *grpc.Server {
	opts := ServerOptions(secret)
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	return grpc.NewServer(opts...)
}

// Dial returns a client connection to the first reachable contact. Over
// TCP, pin must be the HNP certificate's SHA-256 (the connection is TLS,
// and only that certificate is accepted); over Unix sockets it is unused.
// Like any gRPC connection it connects lazily: calls made with
// grpc.WaitForReady(true) wait for it within their context.
func Dial(contacts []Contact, secret Secret, pin []byte) (*grpc.ClientConn, error) {
	return dial(contacts, secret, pin)
}

// DialParent is Dial for a daemon reaching its parent in the daemon tree,
// which may not listen yet when the daemon starts (they start together):
// failed attempts are retried within 20ms to 1s, not gRPC's default of
// 1s to 2 minutes, so a tree of several levels starts without seconds of
// back-off at each.
func DialParent(contacts []Contact, secret Secret, pin []byte) (*grpc.ClientConn, error) {
	return dial(contacts, secret, pin, grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
		MinConnectTimeout: 5 * time.Second,
	}))
}

func dial(contacts []Contact, secret Secret, pin []byte, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	if len(contacts) == 0 {
		return nil, fmt.Errorf("%w: none given", ErrContact)
	}
	transport := insecure.NewCredentials()
	if contacts[0].Network == "tcp" {
		if len(pin) == 0 {
			return nil, fmt.Errorf("control: dial %s: TCP needs the HNP's certificate pin", contacts[0])
		}
		transport = credentials.NewTLS(PinnedTLS(pin))
	}
	dialer := func(ctx context.Context, _ string) (net.Conn, error) {
		var errs []error
		for _, c := range contacts {
			d := net.Dialer{Timeout: 5 * time.Second}
			conn, err := d.DialContext(ctx, c.Network, c.Addr)
			if err == nil {
				return conn, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(transport),
		grpc.WithPerRPCCredentials(secretCreds{hex: secret.Hex()}),
		grpc.WithContextDialer(dialer),
	}, extra...)
	conn, err := grpc.NewClient("passthrough:///gompi", opts...)
	if err != nil {
		return nil, fmt.Errorf("control: dial %s: %w", contacts[0], err)
	}
	return conn, nil
}

// DialUnix connects to a Unix socket.
func DialUnix(path string, secret Secret) (*grpc.ClientConn, error) {
	return Dial([]Contact{{Network: "unix", Addr: path}}, secret, nil)
}

// ListenTCP opens the listener that daemons on other machines dial (the
// HNP's, or a daemon's for its children in the daemon tree) and returns
// the contacts to give them: the configured host[:port], or every address
// of this machine's interfaces (non-loopback first), all on one port.
func ListenTCP(setting string) (net.Listener, []string, error) {
	addr := setting
	if addr == "" {
		addr = ":0"
	} else if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "0")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("control: listen on %s: %w", addr, err)
	}
	tcp := l.Addr().(*net.TCPAddr)
	port := fmt.Sprint(tcp.Port)
	if !tcp.IP.IsUnspecified() {
		return l, []string{"tcp:" + net.JoinHostPort(tcp.IP.String(), port)}, nil
	}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("control: list this machine's addresses: %w", err)
	}
	var outer, loop []string
	for _, a := range ifaddrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		c := "tcp:" + net.JoinHostPort(ipn.IP.String(), port)
		if ipn.IP.IsLoopback() {
			loop = append(loop, c)
		} else {
			outer = append(outer, c)
		}
	}
	all := append(outer, loop...)
	if len(all) == 0 {
		all = []string{"tcp:" + net.JoinHostPort("127.0.0.1", port)}
	}
	return l, all, nil
}
