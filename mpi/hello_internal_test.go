package mpi

import (
	"bytes"
	"crypto/rand"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"gompi/frameworks/btl"
)

// helloPair returns the two ends of a fresh loopback TCP connection, framed
// as the tcp BTL frames them.
func helloPair(t *testing.T) (dialer, acceptor *btl.StreamConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	dc, ac := btl.NewStreamConn(d, 4096, 0), btl.NewStreamConn(a, 4096, 0)
	t.Cleanup(func() { dc.Close(); ac.Close() })
	return dc, ac
}

// helloProc returns rank of a job of size whose secret is secret.
func helloProc(t testing.TB, rank, size int, job string, secret []byte) *Proc {
	t.Helper()
	p, err := newProc(fakeBoot{rank, size}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p.job = job
	key, err := helloKey(secret, job)
	if err != nil {
		t.Fatal(err)
	}
	p.helloKey.Store(&key)
	return p
}

var (
	secretA = []byte("the job's secret, thirty-two b.!")
	secretB = []byte("another job's secret, 32 bytes!!")
)

// runHello runs the dialer's side of the hello on a goroutine and the
// acceptor's here, and returns both results.
func runHello(t *testing.T, d, a *Proc, peer int) (dialErr error, src int, acceptErr error) {
	t.Helper()
	dc, ac := helloPair(t)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := d.helloCtx()
		defer cancel()
		err := d.dialHello(ctx, dc, peer)
		if err != nil {
			dc.Close() // as dial does: the acceptor then reads EOF
		}
		done <- err
	}()
	src, acceptErr = a.hello(ac, make([]byte, btl.MaxHeader))
	if acceptErr != nil {
		ac.Close()
	}
	select {
	case dialErr = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the dialer's hello did not end")
	}
	return dialErr, src, acceptErr
}

func TestHello(t *testing.T) {
	tests := []struct {
		name               string
		dialer, acceptor   *Proc
		peer               int  // the rank the dialer dials
		dialOK, acceptOK   bool // which side accepts the other
		acceptErrSubstring string
	}{
		{name: "same job and secret", dialer: helloProc(t, 0, 3, "j", secretA), acceptor: helloProc(t, 2, 3, "j", secretA), peer: 2, dialOK: true, acceptOK: true},
		{name: "wrong secret", dialer: helloProc(t, 0, 3, "j", secretB), acceptor: helloProc(t, 2, 3, "j", secretA), peer: 2,
			acceptErrSubstring: "hello from rank 0"},
		{name: "other job", dialer: helloProc(t, 0, 3, "k", secretA), acceptor: helloProc(t, 2, 3, "j", secretA), peer: 2,
			acceptErrSubstring: `hello from job "k"`},
		{name: "wrong rank dialed", dialer: helloProc(t, 0, 3, "j", secretA), acceptor: helloProc(t, 2, 3, "j", secretA), peer: 1,
			acceptErrSubstring: "hello for rank 1 reached rank 2"},
		{name: "rank out of range", dialer: helloProc(t, 3, 4, "j", secretA), acceptor: helloProc(t, 2, 3, "j", secretA), peer: 2,
			acceptErrSubstring: "hello from rank 3 of 3"},
		{name: "itself", dialer: helloProc(t, 2, 3, "j", secretA), acceptor: helloProc(t, 2, 3, "j", secretA), peer: 2,
			acceptErrSubstring: "hello from rank 2 of 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dialErr, src, acceptErr := runHello(t, tt.dialer, tt.acceptor, tt.peer)
			if (dialErr == nil) != tt.dialOK {
				t.Errorf("dialer: %v, want ok=%v", dialErr, tt.dialOK)
			}
			if (acceptErr == nil) != tt.acceptOK {
				t.Errorf("acceptor: %v, want ok=%v", acceptErr, tt.acceptOK)
			}
			if tt.acceptOK && src != tt.dialer.rank {
				t.Errorf("acceptor took the connection as rank %d's, want %d's", src, tt.dialer.rank)
			}
			if tt.acceptErrSubstring != "" && (acceptErr == nil || !bytes.Contains([]byte(acceptErr.Error()), []byte(tt.acceptErrSubstring))) {
				t.Errorf("acceptor: %v, want it to say %q", acceptErr, tt.acceptErrSubstring)
			}
			slot := tt.acceptor.inFrom[tt.dialer.rank%tt.acceptor.size]
			if !tt.acceptOK && slot != nil {
				t.Error("a refused hello occupies the slot of the rank it claimed")
			}
		})
	}
}

// TestHelloAcceptorImpostor: a process that answers at a rank's address
// without the secret is refused by the dialer, so no message goes to it.
func TestHelloAcceptorImpostor(t *testing.T) {
	dialErr, _, _ := runHello(t, helloProc(t, 0, 2, "j", secretA), helloProc(t, 1, 2, "j", secretB), 1)
	if !errors.Is(dialErr, errHello) {
		t.Errorf("dialer: %v, want a refusal", dialErr)
	}
}

// TestHelloAcrossGenerations (issue 31 item 2): a recovery relaunches
// the job's ranks under a new data-plane secret (gompirun makes one for
// each launch generation), so a rank of the generation before, same job
// and same rank numbers, can neither connect to a rank of the new one nor
// be taken by one as its peer.
func TestHelloAcrossGenerations(t *testing.T) {
	gen := func() []byte {
		b := make([]byte, 32)
		rand.Read(b)
		return b
	}
	before, now := gen(), gen()
	// The dialer checks the acceptor's proof first: the old rank finds
	// the new one's wrong and hangs up; the new one takes nothing.
	acceptor := helloProc(t, 1, 2, "j", now)
	oldDialErr, _, newAcceptErr := runHello(t, helloProc(t, 0, 2, "j", before), acceptor, 1)
	if !errors.Is(oldDialErr, errHello) || newAcceptErr == nil || acceptor.inFrom[0] != nil {
		t.Errorf("a rank of the generation before dialed a rank of the new one: acceptor %v, dialer %v; want both refused", newAcceptErr, oldDialErr)
	}
	newDialErr, _, _ := runHello(t, helloProc(t, 0, 2, "j", now), helloProc(t, 1, 2, "j", before), 1)
	if !errors.Is(newDialErr, errHello) {
		t.Errorf("a rank of the new generation took one of the generation before as its peer: %v", newDialErr)
	}
	if d, _, a := runHello(t, helloProc(t, 0, 2, "j", now), helloProc(t, 1, 2, "j", now), 1); d != nil || a != nil {
		t.Errorf("two ranks of the new generation: dialer %v, acceptor %v", d, a)
	}
}

// frame is one hello frame as the wire carries it.
type frame struct {
	kind     uint8
	src, dst int
	payload  []byte
}

func writeFrames(t *testing.T, c btl.Conn, fs ...frame) {
	t.Helper()
	for _, f := range fs {
		if err := writeHelloFrame(c, f.kind, f.src, f.dst, f.payload); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHelloReplay: the frames of a good hello, recorded and replayed on a
// new connection, are refused: the acceptor's nonce is new.
func TestHelloReplay(t *testing.T) {
	d, a := helloProc(t, 0, 2, "j", secretA), helloProc(t, 1, 2, "j", secretA)
	// Record a good hello by playing the dialer by hand.
	dc, ac := helloPair(t)
	nd := nonce()
	got := make(chan error, 1)
	go func() { _, err := a.hello(ac, make([]byte, btl.MaxHeader)); got <- err }()
	writeFrames(t, dc, frame{kindHello, 0, 1, append(append([]byte(nil), nd...), "j"...)})
	ch, err := expectFrame(dc, make([]byte, btl.MaxHeader), kindChallenge, 1, 0, nonceLen+macLen)
	if err != nil {
		t.Fatal(err)
	}
	proof := helloMAC(*d.helloKey.Load(), macByDialer, "j", 0, 1, nd, ch[:nonceLen])
	writeFrames(t, dc, frame{kindProof, 0, 1, proof})
	if err := <-got; err != nil {
		t.Fatalf("the recorded hello itself was refused: %v", err)
	}
	// Replay it to a fresh acceptor (a restarted rank 1 of the same job).
	a2 := helloProc(t, 1, 2, "j", secretA)
	dc2, ac2 := helloPair(t)
	go func() { _, err := a2.hello(ac2, make([]byte, btl.MaxHeader)); ac2.Close(); got <- err }()
	writeFrames(t, dc2, frame{kindHello, 0, 1, append(append([]byte(nil), nd...), "j"...)})
	if _, err := expectFrame(dc2, make([]byte, btl.MaxHeader), kindChallenge, 1, 0, nonceLen+macLen); err != nil {
		t.Fatal(err)
	}
	writeFrames(t, dc2, frame{kindProof, 0, 1, proof})
	if err := <-got; !errors.Is(err, errHello) {
		t.Errorf("replayed hello: %v, want a refusal", err)
	}
	if a2.inFrom[0] != nil {
		t.Error("the replayed hello took rank 0's slot")
	}
}

// TestHelloReflection: the acceptor's own MAC sent back as the proof, or
// a MAC made for another pair of ranks, is refused.
func TestHelloReflection(t *testing.T) {
	a := helloProc(t, 1, 3, "j", secretA)
	for _, tt := range []struct {
		name  string
		proof func(nd, na, macA []byte) []byte
	}{
		{"acceptor's MAC reflected", func(_, _, macA []byte) []byte { return macA }},
		{"dialer's MAC for another pair", func(nd, na, _ []byte) []byte { return helloMAC(*a.helloKey.Load(), macByDialer, "j", 2, 1, nd, na) }},
		{"dialer's MAC for the reverse direction", func(nd, na, _ []byte) []byte { return helloMAC(*a.helloKey.Load(), macByDialer, "j", 1, 0, nd, na) }},
		{"acceptor-side MAC computed by the dialer", func(nd, na, _ []byte) []byte { return helloMAC(*a.helloKey.Load(), macByAcceptor, "j", 0, 1, nd, na) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dc, ac := helloPair(t)
			got := make(chan error, 1)
			go func() { _, err := a.hello(ac, make([]byte, btl.MaxHeader)); ac.Close(); got <- err }()
			nd := nonce()
			writeFrames(t, dc, frame{kindHello, 0, 1, append(append([]byte(nil), nd...), "j"...)})
			ch, err := expectFrame(dc, make([]byte, btl.MaxHeader), kindChallenge, 1, 0, nonceLen+macLen)
			if err != nil {
				t.Fatal(err)
			}
			writeFrames(t, dc, frame{kindProof, 0, 1, tt.proof(nd, ch[:nonceLen], ch[nonceLen:])})
			if err := <-got; !errors.Is(err, errHello) {
				t.Errorf("%v, want a refusal", err)
			}
		})
	}
}

// TestHelloStalledImpostor: a connection that says hello as rank 0 and then
// stays silent does not keep rank 0 out: the real rank 0's hello is
// accepted meanwhile, and the stalled one ends when the Proc closes its
// incoming connections.
func TestHelloStalledImpostor(t *testing.T) {
	d, a := helloProc(t, 0, 2, "j", secretA), helloProc(t, 1, 2, "j", secretA)
	sc, sa := helloPair(t)
	a.inMu.Lock()
	a.pending[sa] = struct{}{}
	a.inMu.Unlock()
	stalled := make(chan error, 1)
	go func() { _, err := a.hello(sa, make([]byte, btl.MaxHeader)); stalled <- err }()
	writeFrames(t, sc, frame{kindHello, 0, 1, append(nonce(), "j"...)})
	if _, err := expectFrame(sc, make([]byte, btl.MaxHeader), kindChallenge, 1, 0, nonceLen+macLen); err != nil {
		t.Fatal(err)
	}
	if dialErr, src, acceptErr := runHello(t, d, a, 1); dialErr != nil || acceptErr != nil || src != 0 {
		t.Fatalf("the real rank 0 beside a stalled impostor: dial %v, accept %v (src %d)", dialErr, acceptErr, src)
	}
	a.closeIn()
	select {
	case err := <-stalled:
		if err == nil {
			t.Error("the stalled hello was accepted")
		}
	case <-time.After(time.Minute):
		t.Fatal("closeIn left a stalled hello running")
	}
}

func TestHelloKey(t *testing.T) {
	k1, err1 := helloKey(secretA, "j")
	k2, err2 := helloKey(secretA, "k")
	k3, err3 := helloKey(secretB, "j")
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(k1, k2) || bytes.Equal(k1, k3) || bytes.Equal(k1, secretA) || len(k1) != 32 {
		t.Error("the hello key does not depend on both the secret and the job, or is the secret itself")
	}
	if _, err := helloKey(nil, "j"); err == nil {
		t.Error("an empty secret was accepted")
	}
	if _, err := helloKey(secretA[:15], "j"); err == nil {
		t.Error("a 15-byte secret was accepted")
	}
}

// FuzzParseHello: parseHello never panics, and what it accepts has a
// nonce of the right size and a bounded job id.
func FuzzParseHello(f *testing.F) {
	var hb [hdrLen]byte
	h := header{kind: kindHello, src: 1, tag: 2}
	h.put(hb[:])
	f.Add(hb[:], append(nonce(), "job"...))
	f.Add(hb[:], []byte{})
	f.Add(hb[:4], []byte("short"))
	h.kind = kindData
	h.put(hb[:])
	f.Add(hb[:], make([]byte, nonceLen))
	f.Fuzz(func(t *testing.T, hdr, payload []byte) {
		m, err := parseHello(hdr, payload)
		if err != nil {
			return
		}
		if len(m.nonce) != nonceLen || len(m.job) > maxJobLen || len(hdr) != hdrLen || hdr[0] != kindHello {
			t.Errorf("accepted %x / %x as %+v", hdr, payload, m)
		}
	})
}

// BenchmarkHello is the cost of the hello itself, once per connection:
// both sides' work and the extra round trip over loopback TCP (the
// connection is made outside the timed part).
func BenchmarkHello(b *testing.B) {
	d, a := helloProc(b, 0, 2, "j", secretA), helloProc(b, 1, 2, "j", secretA)
	hb := make([]byte, btl.MaxHeader)
	for b.Loop() {
		b.StopTimer()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		nd, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		na, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		ln.Close()
		dc, ac := btl.NewStreamConn(nd, 4096, 0), btl.NewStreamConn(na, 4096, 0)
		a.inFrom[0] = nil
		b.StartTimer()
		done := make(chan error, 1)
		go func() { done <- d.dialerProof(dc, 1) }()
		if _, err := a.hello(ac, hb); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		dc.Close()
		ac.Close()
		b.StartTimer()
	}
}
