package tcp

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"

	"gompi/frameworks/btl"
	"gompi/frameworks/btl/btltest"
	"gompi/mca"
)

var tlsOn = mca.Setting{Name: paramTLS, Value: "1"}

func TestConformanceTLS(t *testing.T) {
	btltest.Run(t, "tcp-tls-conformance", func(t *testing.T) btl.Module { return btltest.Module(t, New(), tlsOn) })
}

// tap is a TCP proxy that records every byte it forwards from the
// dialer to the listener.
type tap struct {
	ln   net.Listener
	mu   sync.Mutex
	seen bytes.Buffer
	wg   sync.WaitGroup // the forwarding goroutines; the test's Cleanup waits
}

// newTap forwards connections made to its address to target.
func newTap(t *testing.T, target string) *tap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{ln: ln}
	tp.wg.Add(1)
	go func() {
		defer tp.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				return
			}
			tp.wg.Add(2)
			go func() { defer tp.wg.Done(); io.Copy(up, io.TeeReader(c, tp)); up.Close() }()
			go func() { defer tp.wg.Done(); io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); tp.wg.Wait() })
	return tp
}

func (tp *tap) Write(p []byte) (int, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.seen.Write(p)
}

func (tp *tap) holds(b []byte) bool {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return bytes.Contains(tp.seen.Bytes(), b)
}

// pair listens with b and dials it from a through a tap; it returns the
// two ends and the tap.
func pair(t *testing.T, a, b btl.Module) (out, in btl.Conn, tp *tap) {
	t.Helper()
	ctx := t.Context()
	accepted := make(chan btl.Conn, 1)
	epB := btl.Endpoint{Job: "btltest", Rank: 1, Node: "n"}
	addr, err := b.Listen(ctx, epB, func(c btl.Conn) { accepted <- c })
	if err != nil {
		t.Fatal(err)
	}
	tp = newTap(t, addr)
	epB.Addr = tp.ln.Addr().String()
	out, err = a.Dial(ctx, btl.Endpoint{Job: "btltest", Rank: 0, Node: "n"}, epB)
	if err != nil {
		t.Fatal(err)
	}
	in = <-accepted
	t.Cleanup(func() { out.Close(); in.Close() })
	return out, in, tp
}

// TestTLSOnTheWire: with btl_tcp_tls a frame's bytes cross the network
// encrypted: a tap between the ranks never sees a marker the frame
// carries, which it sees in the clear without TLS.
func TestTLSOnTheWire(t *testing.T) {
	marker := []byte("gompi-plaintext-marker-7f3a9c")
	for _, tt := range []struct {
		name     string
		settings []mca.Setting
		visible  bool
	}{{"plain", nil, true}, {"tls", []mca.Setting{tlsOn}, false}} {
		t.Run(tt.name, func(t *testing.T) {
			out, in, tp := pair(t, btltest.Module(t, New(), tt.settings...), btltest.Module(t, New(), tt.settings...))
			payload := bytes.Repeat(marker, 3)
			if err := out.WriteFrame(marker, payload); err != nil {
				t.Fatal(err)
			}
			hdr := make([]byte, btl.MaxHeader)
			hn, pn, err := in.ReadHeader(hdr)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, pn)
			if err := in.ReadPayload(got); err != nil || !bytes.Equal(hdr[:hn], marker) || !bytes.Equal(got, payload) {
				t.Fatalf("frame arrived as %q / %d bytes (%v)", hdr[:hn], len(got), err)
			}
			// The frame was read, so the tap forwarded every byte of it.
			if tp.holds(marker) != tt.visible {
				t.Errorf("marker visible on the wire: %v, want %v", tp.holds(marker), tt.visible)
			}
		})
	}
}

// keyedModule is a tcp module with TLS keyed from secret.
func keyedModule(t *testing.T, secret []byte) btl.Module {
	t.Helper()
	m := btltest.Module(t, New(), tlsOn)
	if _, err := mca.Provision(context.Background(), m, btl.Host{Job: "btltest", Secret: secret}); err != nil {
		t.Fatal(err)
	}
	return m
}

// listenKeyed starts a module keyed from the test secret listening and
// returns it, its endpoint and the connections it hands on.
func listenKeyed(t *testing.T) (btl.Endpoint, chan btl.Conn) {
	t.Helper()
	b := keyedModule(t, btltest.Secret)
	accepted := make(chan btl.Conn, 4)
	epB := btl.Endpoint{Job: "btltest", Rank: 1, Node: "n"}
	var err error
	if epB.Addr, err = b.Listen(t.Context(), epB, func(c btl.Conn) { accepted <- c }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for len(accepted) > 0 {
			(<-accepted).Close()
		}
	})
	return epB, accepted
}

// onlyJobPeer dials epB with a module of the job and checks that the
// first connection the listener handed on is that one: a peer that failed
// the handshake before was never handed on.
func onlyJobPeer(t *testing.T, epB btl.Endpoint, accepted chan btl.Conn) {
	t.Helper()
	good := keyedModule(t, btltest.Secret)
	out, err := good.Dial(t.Context(), btl.Endpoint{Job: "btltest", Rank: 0, Node: "n"}, epB)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := out.WriteFrame([]byte("job"), nil); err != nil {
		t.Fatal(err)
	}
	in := <-accepted
	defer in.Close()
	hdr := make([]byte, btl.MaxHeader)
	if hn, _, err := in.ReadHeader(hdr); err != nil || string(hdr[:hn]) != "job" {
		t.Errorf("the first connection handed on is not the job peer's: %q, %v", hdr[:max(hn, 0)], err)
	}
}

// TestTLSOtherSecret: a module keyed from another secret (or for another
// job) fails the handshake when it dials, and the listener hands on no
// connection of it.
func TestTLSOtherSecret(t *testing.T) {
	epB, accepted := listenKeyed(t)
	self := btl.Endpoint{Job: "btltest", Rank: 0, Node: "n"}
	for name, a := range map[string]btl.Module{
		"other secret": keyedModule(t, []byte("not the job's data-plane secret!")),
		"other job":    otherJob(t),
	} {
		if c, err := a.Dial(t.Context(), self, epB); !errors.Is(err, errNotJob) {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s: dial: %v, want the handshake refused (%v)", name, err, errNotJob)
		}
	}
	onlyJobPeer(t, epB, accepted)
}

// otherJob is a module keyed from the right secret for another job id
// (HKDF's salt).
func otherJob(t *testing.T) btl.Module {
	m := btltest.Module(t, New(), tlsOn)
	if err := m.(*module).Provision(context.Background(), btl.Host{Job: "another job", Secret: btltest.Secret}); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTLSClientWithoutSecret: a TLS client that accepts any server and
// presents a certificate of its own key (it lacks the secret) is refused
// by the listener, which closes its connection and hands nothing on.
func TestTLSClientWithoutSecret(t *testing.T) {
	epB, accepted := listenKeyed(t)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Dial("tcp", epB.Addr)
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13,
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: priv}}})
	defer c.Close()
	// TLS 1.3: the client's handshake ends before the server checks its
	// certificate, so the write may seem to succeed; the read ends when
	// the listener has refused the connection.
	if err := c.HandshakeContext(t.Context()); err == nil {
		c.Write([]byte("frame the impostor wants delivered"))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("the listener answered a client without the job's key")
		}
	}
	if len(accepted) != 0 {
		t.Error("the listener handed on a connection from a client without the job's key")
	}
	onlyJobPeer(t, epB, accepted)
}

// TestTLSNotProvisioned: a module with TLS on and no secret neither
// listens nor dials.
func TestTLSNotProvisioned(t *testing.T) {
	params := mca.NewParams()
	fw := mca.NewFramework[btl.Module](params, btl.Name, "test", mca.Stacked())
	fw.Register(New())
	vals, err := params.ResolveSettings([]mca.Setting{tlsOn})
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := New().Query(t.Context(), mca.Query{Values: vals, Role: mca.RoleApp})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Listen(t.Context(), btl.Endpoint{Job: "j"}, func(c btl.Conn) { c.Close() }); !errors.Is(err, errNoSecret) {
		t.Errorf("Listen: %v, want %v", err, errNoSecret)
	}
	if _, err := m.Dial(t.Context(), btl.Endpoint{Job: "j"}, btl.Endpoint{Job: "j", Rank: 1, Addr: "127.0.0.1:9"}); !errors.Is(err, errNoSecret) {
		t.Errorf("Dial: %v, want %v", err, errNoSecret)
	}
	if err := m.(*module).Provision(t.Context(), btl.Host{Job: "j", Secret: []byte("short")}); err == nil {
		t.Error("a 5-byte secret was taken")
	}
}
