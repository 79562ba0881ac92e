package mpi

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"gompi/frameworks/btl"
)

// The hello is the first three frames of every BTL connection, in which
// the rank that dials and the rank that accepts prove to each other that
// they know the job's data-plane secret (Bootstrap.Secret: gompirun makes
// one for each launch generation, apart from the control plane's job
// secret) before any message moves: the job id is public (ps shows it),
// so a hello naming the job and a rank proves nothing by itself, and
// whoever connected first as rank k would otherwise be rank k.
//
//	dialer   → acceptor  kindHello:     nonceD, job
//	acceptor → dialer    kindChallenge: nonceA, MAC(acceptor)
//	dialer   → acceptor  kindProof:     MAC(dialer)
//
// Each MAC is HMAC-SHA256 under a key derived from the secret by HKDF
// (salt: the job id), over which side computed it, the job, both ranks
// and both sides' fresh random nonces, and is compared in constant time.
// A recorded hello replayed later meets a new nonceA; a MAC one side sent
// cannot be reflected back as the other's, nor used for another pair of
// ranks or another job. The acceptor claims the source rank's slot only
// after the proof, so an impostor that fails leaves the slot to the real
// rank. Once the hello is done nothing of it remains on the message path.
//
// In a replicated job (replica.go) the ranks a hello names are the two
// processes' indices (Proc.Copy): the copy of rank k that dials is who
// it proved to be, and a connection from the other copy of rank k is a
// connection from another process, expected like the first.

// Hello frame kinds (after kindBye, wire.go).
const (
	kindChallenge = 4 // acceptor's nonce and MAC
	kindProof     = 5 // dialer's MAC
)

const (
	nonceLen = 32
	macLen   = sha256.Size
	// maxJobLen bounds the job id a hello may carry.
	maxJobLen = 1024
	// helloKeyInfo names what the derived key is for (HKDF's info).
	helloKeyInfo = "gompi btl hello v1"
	// minSecretLen is the shortest data-plane secret a Proc accepts.
	minSecretLen = 16
)

// Who computed a MAC: the direction of the proof.
const (
	macByAcceptor byte = 'A'
	macByDialer   byte = 'D'
)

// errHello is wrapped by every refusal of a hello.
var errHello = errors.New("hello refused")

// helloKeyAt is helloKey for the ranks of in-job rollback epoch (0: none
// yet): every rollback gives the job's connections a key of their own, so
// a process still in an abandoned epoch cannot connect to one restored in
// the next, even at the same address (uds and sm listen at one path per
// rank).
func helloKeyAt(secret []byte, job string, epoch uint64) ([]byte, error) {
	if epoch == 0 {
		return helloKey(secret, job)
	}
	return helloKey(secret, fmt.Sprintf("%s/rollback/%d", job, epoch))
}

// helloKey derives the key of the hello MACs from the data-plane secret.
func helloKey(secret []byte, job string) ([]byte, error) {
	if len(secret) < minSecretLen {
		return nil, fmt.Errorf("the data-plane secret has %d bytes, want at least %d", len(secret), minSecretLen)
	}
	return hkdf.Key(sha256.New, secret, []byte(job), helloKeyInfo, sha256.Size)
}

// helloMAC is the MAC side by sends on the connection from rank dialer to
// rank acceptor of job, over both nonces.
func helloMAC(key []byte, by byte, job string, dialer, acceptor int, nonceD, nonceA []byte) []byte {
	m := hmac.New(sha256.New, key)
	var b [9]byte
	b[0] = by
	binary.LittleEndian.PutUint32(b[1:5], uint32(dialer))
	binary.LittleEndian.PutUint32(b[5:9], uint32(acceptor))
	m.Write(b[:])
	m.Write(nonceD)
	m.Write(nonceA)
	m.Write([]byte(job)) // last: everything before it has a fixed size
	return m.Sum(nil)
}

// helloMsg is a parsed first frame.
type helloMsg struct {
	src, dst int
	nonce    []byte
	job      string
}

// parseHello checks a first frame's shape: a hello header, a nonce and a
// bounded job id. Who may send it is the caller's to check.
func parseHello(hdr, payload []byte) (helloMsg, error) {
	h, err := parseHeader(hdr)
	if err != nil || h.kind != kindHello {
		return helloMsg{}, fmt.Errorf("first frame is not a hello (%v)", err)
	}
	if len(payload) < nonceLen || len(payload) > nonceLen+maxJobLen {
		return helloMsg{}, fmt.Errorf("hello of %d bytes, want %d to %d", len(payload), nonceLen, nonceLen+maxJobLen)
	}
	return helloMsg{src: int(h.src), dst: int(h.tag), nonce: payload[:nonceLen], job: string(payload[nonceLen:])}, nil
}

// readHelloFrame reads one frame of the hello whose payload may have at
// most max bytes.
func readHelloFrame(c btl.Conn, hb []byte, max int) ([]byte, []byte, error) {
	hn, pn, err := c.ReadHeader(hb)
	if err != nil {
		return nil, nil, err
	}
	if pn > max {
		return nil, nil, fmt.Errorf("hello frame of %d bytes, want at most %d", pn, max)
	}
	payload := make([]byte, pn)
	if err := c.ReadPayload(payload); err != nil {
		return nil, nil, err
	}
	return hb[:hn], payload, nil
}

// writeHelloFrame sends one frame of the hello.
func writeHelloFrame(c btl.Conn, kind uint8, src, dst int, payload ...[]byte) error {
	var hb [hdrLen]byte
	h := header{kind: kind, src: int32(src), tag: int64(dst)}
	h.put(hb[:])
	var p []byte
	for _, b := range payload {
		p = append(p, b...)
	}
	return c.WriteFrame(hb[:], p)
}

// expectFrame reads one frame of kind from rank src to rank dst whose
// payload has exactly n bytes.
func expectFrame(c btl.Conn, hb []byte, kind uint8, src, dst, n int) ([]byte, error) {
	hdr, payload, err := readHelloFrame(c, hb, n)
	if err != nil {
		return nil, err
	}
	h, err := parseHeader(hdr)
	switch {
	case err != nil:
		return nil, err
	case h.kind != kind || int(h.src) != src || int(h.tag) != dst || len(payload) != n:
		return nil, fmt.Errorf("frame kind %d from rank %d to %d with %d bytes, want kind %d from %d to %d with %d",
			h.kind, h.src, h.tag, len(payload), kind, src, dst, n)
	}
	return payload, nil
}

// nonce returns fresh random bytes (crypto/rand does not fail).
func nonce() []byte {
	b := make([]byte, nonceLen)
	rand.Read(b)
	return b
}

// closeOnDone closes c if ctx ends before the returned stop is called, so
// a peer that stalls in the hello cannot hold the connection's goroutine;
// stop reports false when it came too late (c is closed).
func closeOnDone(ctx context.Context, c btl.Conn) (stop func() bool) {
	return context.AfterFunc(ctx, func() { c.Close() })
}

// helloCtx bounds one hello: it ends after dialTimeout or when p stops.
// cancel releases it and the goroutine that watches p.
func (p *Proc) helloCtx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	// Owned by the hello: it ends when the hello's caller cancels ctx.
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// dialHello runs the dialer's side of the hello on c, a new connection to
// rank peer, within ctx.
func (p *Proc) dialHello(ctx context.Context, c btl.Conn, peer int) error {
	stop := closeOnDone(ctx, c)
	err := p.dialerProof(c, peer)
	if !stop() && err == nil {
		err = fmt.Errorf("%w", context.Cause(ctx))
	}
	if err != nil {
		return fmt.Errorf("hello to rank %d: %w", peer, err)
	}
	return nil
}

func (p *Proc) dialerProof(c btl.Conn, peer int) error {
	nd := nonce()
	if err := writeHelloFrame(c, kindHello, p.phys, peer, nd, []byte(p.job)); err != nil {
		return err
	}
	hb := make([]byte, btl.MaxHeader)
	ch, err := expectFrame(c, hb, kindChallenge, peer, p.phys, nonceLen+macLen)
	if err != nil {
		return err
	}
	na, mac := ch[:nonceLen], ch[nonceLen:]
	if !hmac.Equal(mac, helloMAC(*p.helloKey.Load(), macByAcceptor, p.job, p.phys, peer, nd, na)) {
		return fmt.Errorf("%w: the process at rank %d's address did not prove it belongs to the job", errHello, peer)
	}
	return writeHelloFrame(c, kindProof, p.phys, peer, helloMAC(*p.helloKey.Load(), macByDialer, p.job, p.phys, peer, nd, na))
}

// hello runs the acceptor's side of the hello on c and, once the dialer
// proved it is rank src of the job, makes c the connection from src.
func (p *Proc) hello(c btl.Conn, hb []byte) (int, error) {
	ctx, cancel := p.helloCtx()
	defer cancel()
	stop := closeOnDone(ctx, c)
	src, err := p.acceptorProof(c, hb)
	if !stop() && err == nil {
		err = fmt.Errorf("hello: %w", context.Cause(ctx))
	}
	if err != nil {
		return 0, err
	}
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if old := p.inFrom[src]; old != nil {
		if !p.link(src).moving.Load() {
			return 0, fmt.Errorf("second connection from rank %d", src)
		}
		// The moved rank's new process, before the old one's end was
		// read: the old connection is done.
		old.Close()
	}
	p.inFrom[src] = c
	return src, nil
}

func (p *Proc) acceptorProof(c btl.Conn, hb []byte) (int, error) {
	hdr, payload, err := readHelloFrame(c, hb, nonceLen+maxJobLen)
	if err != nil {
		return 0, fmt.Errorf("hello: %w", err)
	}
	m, err := parseHello(hdr, payload)
	if err != nil {
		return 0, fmt.Errorf("hello: %w", err)
	}
	switch {
	case m.job != p.job:
		return 0, fmt.Errorf("hello from job %q, this is job %q", m.job, p.job)
	case m.dst != p.phys:
		return 0, fmt.Errorf("hello for rank %d reached rank %d", m.dst, p.phys)
	case m.src < 0 || m.src >= p.physN || m.src == p.phys:
		return 0, fmt.Errorf("hello from rank %d of %d", m.src, p.physN)
	}
	na := nonce()
	if err := writeHelloFrame(c, kindChallenge, p.phys, m.src, na, helloMAC(*p.helloKey.Load(), macByAcceptor, p.job, m.src, p.phys, m.nonce, na)); err != nil {
		return 0, fmt.Errorf("hello from rank %d: %w", m.src, err)
	}
	proof, err := expectFrame(c, hb, kindProof, m.src, p.phys, macLen)
	if err != nil {
		return 0, fmt.Errorf("hello from rank %d: %w", m.src, err)
	}
	if !hmac.Equal(proof, helloMAC(*p.helloKey.Load(), macByDialer, p.job, m.src, p.phys, m.nonce, na)) {
		return 0, fmt.Errorf("%w: a connection claiming rank %d did not prove it belongs to the job", errHello, m.src)
	}
	return m.src, nil
}

// peerAddr is the remote address of c where its transport has one (a TCP
// peer's host; a Unix-domain peer is the same node and shows as "local").
func peerAddr(c btl.Conn) string {
	nc, ok := c.(interface{ NetConn() net.Conn })
	if !ok {
		return "unknown"
	}
	a := nc.NetConn().RemoteAddr()
	if a == nil || a.String() == "" || a.Network() == "unix" {
		return "local"
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}
