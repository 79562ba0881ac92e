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
}

type handshakeJSON struct {
	Secret string `json:"secret"`
	Pin    string `json:"pin,omitempty"`
}

// Marshal renders the handshake line (without the newline).
func (h Handshake) Marshal() []byte {
	b, _ := json.Marshal(handshakeJSON{Secret: h.Secret.Hex(), Pin: hex.EncodeToString(h.Pin)})
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
	h := Handshake{Secret: s}
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
	conn, err := grpc.NewClient("passthrough:///gompi",
		grpc.WithTransportCredentials(transport),
		grpc.WithPerRPCCredentials(secretCreds{hex: secret.Hex()}),
		grpc.WithContextDialer(dialer),
	)
	if err != nil {
		return nil, fmt.Errorf("control: dial %s: %w", contacts[0], err)
	}
	return conn, nil
}

// DialUnix connects to a Unix socket.
func DialUnix(path string, secret Secret) (*grpc.ClientConn, error) {
	return Dial([]Contact{{Network: "unix", Addr: path}}, secret, nil)
}
