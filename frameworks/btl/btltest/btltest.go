// Package btltest is the conformance kit every BTL component must pass:
// two modules of one component listen, dial each other and exchange frames
// of every size class, in order, with a clean end of stream.
package btltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"gompi/frameworks/btl"
	"gompi/mca"
)

// Run checks a component through two fresh modules made by newModule. The
// endpoints given to Listen share job and node, so components restricted
// to one node must reach each other.
func Run(t *testing.T, job string, newModule func(t *testing.T) btl.Module) {
	t.Helper()
	ctx := context.Background()
	a, b := newModule(t), newModule(t)
	accepted := make(chan btl.Conn, 4)
	epA := btl.Endpoint{Job: job, Rank: 0, Node: "n0"}
	epB := btl.Endpoint{Job: job, Rank: 1, Node: "n0"}
	var err error
	if epA.Addr, err = a.Listen(ctx, epA, func(c btl.Conn) { c.Close() }); err != nil {
		t.Fatalf("listen a: %v", err)
	}
	if epB.Addr, err = b.Listen(ctx, epB, func(c btl.Conn) { accepted <- c }); err != nil {
		t.Fatalf("listen b: %v", err)
	}
	if epA.Addr == "" || epB.Addr == "" {
		t.Fatalf("listen returned an empty address (a %q, b %q)", epA.Addr, epB.Addr)
	}
	if !a.Reachable(epA, epB) {
		t.Fatalf("a cannot reach b at %q on the same node", epB.Addr)
	}
	if a.Reachable(epA, btl.Endpoint{Job: job, Rank: 2, Node: "n0"}) {
		t.Errorf("a reaches a peer that published no address")
	}
	out, err := a.Dial(ctx, epA, epB)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	in := <-accepted
	always := func() bool { return true }
	if pc, ok := in.(btl.Poller); ok {
		// Someone always waits: every read that finds nothing polls.
		pc.SetPoll(always, always)
	}
	if pc, ok := out.(btl.Poller); ok {
		pc.SetPoll(always, always)
	}

	sizes := []int{0, 1, 7, 100, 4096, 16 << 10, 64<<10 + 3, 1 << 20, 3<<20 + 17}
	done := make(chan error, 1)
	go func() {
		for i, n := range sizes {
			hdr := []byte(fmt.Sprintf("frame-%d", i))
			if err := out.WriteFrame(hdr, pattern(n, byte(i))); err != nil {
				done <- fmt.Errorf("write frame %d: %w", i, err)
				return
			}
		}
		done <- out.CloseWrite()
	}()
	hdr := make([]byte, btl.MaxHeader)
	for i, n := range sizes {
		hn, pn, err := in.ReadHeader(hdr)
		if err != nil {
			t.Fatalf("frame %d: read header: %v", i, err)
		}
		if got, want := string(hdr[:hn]), fmt.Sprintf("frame-%d", i); got != want {
			t.Fatalf("frame %d: header %q, want %q", i, got, want)
		}
		if pn != n {
			t.Fatalf("frame %d: payload length %d, want %d", i, pn, n)
		}
		// Read the first half, discard a little, read the rest: the
		// three ways mpi consumes a payload.
		got := make([]byte, n)
		half := n / 2
		skip := min(3, n-half)
		if err := in.ReadPayload(got[:half]); err != nil {
			t.Fatalf("frame %d: read payload: %v", i, err)
		}
		if err := in.Discard(skip); err != nil {
			t.Fatalf("frame %d: discard: %v", i, err)
		}
		if err := in.ReadPayload(got[half+skip:]); err != nil {
			t.Fatalf("frame %d: read payload rest: %v", i, err)
		}
		want := pattern(n, byte(i))
		copy(got[half:half+skip], want[half:half+skip])
		if !bytes.Equal(got, want) {
			t.Fatalf("frame %d: payload differs", i)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, _, err := in.ReadHeader(hdr); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame and CloseWrite: %v, want io.EOF", err)
	}
	in.Close()
	out.Close()
	if err := b.Close(); err != nil {
		t.Fatalf("close b: %v", err)
	}
	if _, err := a.Dial(ctx, epA, epB); err == nil {
		t.Fatalf("dial to a closed module succeeded")
	}
	if err := a.Close(); err != nil {
		t.Fatalf("close a: %v", err)
	}
}

func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*31) ^ seed
	}
	return p
}

// Module returns a fresh module of component c, queried with the
// component's parameters resolved from settings (defaults otherwise) and
// provisioned as package mpi provisions it, with Host{Job: "btltest",
// Secret: Secret}.
func Module(t *testing.T, c mca.Component[btl.Module], settings ...mca.Setting) btl.Module {
	t.Helper()
	m, err := NewModule(c, settings...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// NewModule is Module for a process that is not a test: a child a test
// re-executes as the other end of a connection. The caller closes it.
func NewModule(c mca.Component[btl.Module], settings ...mca.Setting) (btl.Module, error) {
	params := mca.NewParams()
	fw := mca.NewFramework[btl.Module](params, btl.Name, "test", mca.Stacked())
	fw.Register(c)
	vals, err := params.ResolveSettings(settings)
	if err != nil {
		return nil, fmt.Errorf("resolve: %w", err)
	}
	m, _, err := c.Query(context.Background(), mca.Query{Values: vals, Role: mca.RoleApp, Priority: c.Info().Priority})
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", c.Info().Name, err)
	}
	if _, err := mca.Provision(context.Background(), m, btl.Host{Job: "btltest", Secret: Secret}); err != nil {
		m.Close()
		return nil, fmt.Errorf("provision %s: %w", c.Info().Name, err)
	}
	return m, nil
}

// Secret is the data-plane secret Module provisions its modules with.
var Secret = []byte("btltest data-plane secret, 32 B!")

// Relisten checks a component whose modules implement btl.Relistener: a
// module that stopped listening (Unlisten) accepts no connection at its
// old address, listens again, and is reached at the new one, where a
// frame crosses.
func Relisten(t *testing.T, job string, newModule func(t *testing.T) btl.Module) {
	t.Helper()
	ctx := context.Background()
	a, b := newModule(t), newModule(t)
	defer a.Close()
	defer b.Close()
	rb, ok := b.(btl.Relistener)
	if !ok {
		t.Fatalf("%T is no btl.Relistener", b)
	}
	accepted := make(chan btl.Conn, 4)
	epA := btl.Endpoint{Job: job, Rank: 0, Node: "n0"}
	epB := btl.Endpoint{Job: job, Rank: 1, Node: "n0"}
	var err error
	if epB.Addr, err = b.Listen(ctx, epB, func(c btl.Conn) { accepted <- c }); err != nil {
		t.Fatalf("listen: %v", err)
	}
	for round := 0; round < 2; round++ {
		out, err := a.Dial(ctx, epA, epB)
		if err != nil {
			t.Fatalf("round %d: dial: %v", round, err)
		}
		in := <-accepted
		if err := out.WriteFrame([]byte("h"), pattern(100, byte(round))); err != nil {
			t.Fatalf("round %d: write: %v", round, err)
		}
		hdr := make([]byte, btl.MaxHeader)
		if _, pn, err := in.ReadHeader(hdr); err != nil || pn != 100 {
			t.Fatalf("round %d: read header: %d bytes, %v", round, pn, err)
		}
		got := make([]byte, 100)
		if err := in.ReadPayload(got); err != nil || !bytes.Equal(got, pattern(100, byte(round))) {
			t.Fatalf("round %d: payload differs (%v)", round, err)
		}
		in.Close()
		out.Close()
		if err := rb.Unlisten(); err != nil {
			t.Fatalf("round %d: unlisten: %v", round, err)
		}
		if err := rb.Unlisten(); err != nil {
			t.Fatalf("round %d: a second unlisten: %v", round, err)
		}
		if c, err := a.Dial(ctx, epA, epB); err == nil {
			c.Close()
			t.Fatalf("round %d: dial after unlisten succeeded", round)
		}
		if epB.Addr, err = b.Listen(ctx, epB, func(c btl.Conn) { accepted <- c }); err != nil {
			t.Fatalf("round %d: listen again: %v", round, err)
		}
	}
}
