package control

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	pb "gompi/rte/control/proto"
)

type toolServer struct {
	pb.UnimplementedToolServer
	pb.UnimplementedHNPServer
	calls chan string
}

func (s *toolServer) Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	s.calls <- "status"
	return &pb.StatusResponse{Job: "j1"}, nil
}

func (s *toolServer) Attach(st grpc.BidiStreamingServer[pb.DaemonMessage, pb.HNPMessage]) error {
	s.calls <- "attach"
	m, err := st.Recv()
	if err != nil {
		return err
	}
	return st.Send(&pb.HNPMessage{Body: &pb.HNPMessage_Welcome{Welcome: &pb.Welcome{Job: m.GetHello().GetNode()}}})
}

func serve(t *testing.T, secret Secret, l net.Listener, creds credentials.TransportCredentials) *toolServer {
	t.Helper()
	srv := NewServer(secret, creds)
	ts := &toolServer{calls: make(chan string, 10)}
	pb.RegisterToolServer(srv, ts)
	pb.RegisterHNPServer(srv, ts)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return ts
}

func mustSecret(t *testing.T) Secret {
	t.Helper()
	s, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// shortDir returns a temporary directory with a path short enough for sockets.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestAuth(t *testing.T) {
	good, other := mustSecret(t), mustSecret(t)
	sock := filepath.Join(shortDir(t), "s", "control.sock")
	l, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	ts := serve(t, good, l, nil)
	tests := []struct {
		name   string
		secret Secret
		ok     bool
	}{
		{"right secret", good, true},
		{"another job's secret", other, false},
		{"zero secret", Secret{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := DialUnix(sock, tt.secret)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err = pb.NewToolClient(conn).Status(ctx, &pb.StatusRequest{}, grpc.WaitForReady(true))
			if tt.ok != (err == nil) || (!tt.ok && !IsUnauthenticated(err)) {
				t.Fatalf("unary call: %v (want ok=%v, else Unauthenticated)", err, tt.ok)
			}
			st, err := pb.NewHNPClient(conn).Attach(ctx, grpc.WaitForReady(true))
			if err == nil {
				// io.EOF: the server ended the stream (refused it) before
				// the send; gRPC gives the status to the next Recv.
				if err = st.Send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Hello{Hello: &pb.DaemonHello{Node: "n1"}}}); errors.Is(err, io.EOF) {
					err = nil
				}
			}
			var reply *pb.HNPMessage
			if err == nil {
				reply, err = st.Recv()
			}
			if tt.ok != (err == nil) || (!tt.ok && !IsUnauthenticated(err)) {
				t.Fatalf("stream: %v (want ok=%v, else Unauthenticated)", err, tt.ok)
			}
			if tt.ok && reply.GetWelcome().GetJob() != "n1" {
				t.Fatalf("stream reply %v", reply)
			}
		})
	}
	// Refused calls never reached a handler: only the good ones did.
	close(ts.calls)
	var got []string
	for c := range ts.calls {
		got = append(got, c)
	}
	if strings.Join(got, ",") != "status,attach" {
		t.Errorf("handlers ran for %q, want only the authenticated status and attach", got)
	}
}

func TestSocketIsPrivate(t *testing.T) {
	sock := filepath.Join(shortDir(t), "p", "c.sock")
	l, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for path, want := range map[string]os.FileMode{filepath.Dir(sock): 0o700, sock: 0o600} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", path, st.Mode().Perm(), want)
		}
	}
	// A second listener replaces a stale socket.
	l.Close()
	os.WriteFile(sock, nil, 0o600)
	l2, err := ListenUnix(sock)
	if err != nil {
		t.Fatalf("listen over a stale socket: %v", err)
	}
	l2.Close()
	if _, err := ListenUnix("/" + strings.Repeat("x", 120)); err == nil || !strings.Contains(err.Error(), "shorter") {
		t.Errorf("long path: %v, want advice to choose a shorter directory", err)
	}
}

func TestPinnedTLS(t *testing.T) {
	secret := mustSecret(t)
	cert, pin, err := NewCertificate()
	if err != nil {
		t.Fatal(err)
	}
	_, otherPin, err := NewCertificate()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, secret, l, credentials.NewTLS(ServerTLS(cert)))
	contacts := []Contact{{"tcp", "127.0.0.1:1"}, {"tcp", l.Addr().String()}} // the first is refused; Dial tries the next
	tests := []struct {
		name string
		pin  []byte
		ok   bool
	}{
		{"pinned", pin, true},
		{"other certificate", otherPin, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := Dial(contacts, secret, tt.pin)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// A refused certificate makes the connection fail over and
			// over, so the failing case waits only for the first failure.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var opts []grpc.CallOption
			if tt.ok {
				opts = append(opts, grpc.WaitForReady(true))
			}
			_, err = pb.NewToolClient(conn).Status(ctx, &pb.StatusRequest{}, opts...)
			if tt.ok != (err == nil) {
				t.Fatalf("call: %v, want ok=%v", err, tt.ok)
			}
			if !tt.ok && !strings.Contains(err.Error(), "not the job's") {
				t.Errorf("error %v does not say the certificate is wrong", err)
			}
		})
	}
	if _, err := Dial(contacts, secret, nil); err == nil {
		t.Error("TCP dial without a pin succeeded")
	}
}

func TestParseContact(t *testing.T) {
	tests := []struct {
		in   string
		want Contact
		err  bool
	}{
		{in: "unix:/tmp/x.sock", want: Contact{"unix", "/tmp/x.sock"}},
		{in: "tcp:10.0.0.1:4000", want: Contact{"tcp", "10.0.0.1:4000"}},
		{in: "tcp:[::1]:4000", want: Contact{"tcp", "[::1]:4000"}},
		{in: "unix:relative.sock", err: true},
		{in: "tcp:host", err: true},
		{in: "tcp::4000", err: true},
		{in: "udp:1.2.3.4:5", err: true},
		{in: "nothing", err: true},
		{in: "unix:/" + strings.Repeat("a", 200), err: true},
	}
	for _, tt := range tests {
		got, err := ParseContact(tt.in)
		if tt.err {
			if !errors.Is(err, ErrContact) {
				t.Errorf("ParseContact(%q) = %v, %v; want ErrContact", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want || got.String() != tt.in {
			t.Errorf("ParseContact(%q) = %v, %v", tt.in, got, err)
		}
	}
	if _, err := ParseContacts("unix:/a,tcp:h:1"); err == nil {
		t.Error("mixed networks accepted")
	}
	if cs, err := ParseContacts("tcp:a:1, tcp:b:2"); err != nil || len(cs) != 2 {
		t.Errorf("ParseContacts: %v %v", cs, err)
	}
}

func FuzzParseContacts(f *testing.F) {
	for _, s := range []string{"unix:/a/b", "tcp:h:1,tcp:[::1]:2", "tcp:", ":", "unix:/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := ParseContacts(s)
		if err != nil {
			if !errors.Is(err, ErrContact) {
				t.Fatalf("error %v does not wrap ErrContact", err)
			}
			return
		}
		for _, c := range cs {
			again, err := ParseContact(c.String())
			if err != nil || again != c {
				t.Fatalf("%v does not round-trip: %v %v", c, again, err)
			}
		}
	})
}

func TestHandshake(t *testing.T) {
	s := mustSecret(t)
	_, pin, _ := NewCertificate()
	for _, h := range []Handshake{{Secret: s}, {Secret: s, Pin: pin}, {Secret: s, Nodes: []string{"n1", "n2"}, Radix: 2}} {
		got, err := ParseHandshake(h.Marshal())
		if err != nil || got.Secret != h.Secret || !bytes.Equal(got.Pin, h.Pin) || !slices.Equal(got.Nodes, h.Nodes) || got.Radix != h.Radix {
			t.Errorf("round trip of %v: %v, %v", h, got, err)
		}
	}
	if strings.Contains(s.String(), s.Hex()[:8]) || strings.Contains(Handshake{Secret: s}.Secret.String(), s.Hex()) {
		t.Error("Secret.String leaks the secret")
	}
	for _, bad := range []string{"", "{}", `{"secret":"00"}`, `{"secret":"` + s.Hex() + `","pin":"zz"}`, `{"secret":"` + s.Hex() + `","radix":-1}`, "not json"} {
		if _, err := ParseHandshake([]byte(bad)); err == nil {
			t.Errorf("ParseHandshake(%q) succeeded", bad)
		}
	}
}

func FuzzParseHandshake(f *testing.F) {
	s, _ := NewSecret()
	_, pin, _ := NewCertificate()
	f.Add(Handshake{Secret: s}.Marshal())
	f.Add(Handshake{Secret: s, Pin: pin}.Marshal())
	f.Add(Handshake{Secret: s, Nodes: []string{"n1"}, Radix: 8}.Marshal())
	f.Add([]byte(`{"secret":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		h, err := ParseHandshake(line)
		if err != nil {
			return
		}
		again, err := ParseHandshake(h.Marshal())
		if err != nil || again.Secret != h.Secret || !bytes.Equal(again.Pin, h.Pin) || !slices.Equal(again.Nodes, h.Nodes) || again.Radix != h.Radix {
			t.Fatalf("%q does not round-trip: %v", line, err)
		}
	})
}
