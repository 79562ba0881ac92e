package membtl_test

import (
	"context"
	"errors"
	"testing"

	"gompi/frameworks/btl"
	"gompi/frameworks/btl/btltest"
	"gompi/mpi/mpitest/membtl"
)

func TestConformance(t *testing.T) {
	n := membtl.NewNetwork()
	newModule := func(t *testing.T) btl.Module { return btltest.Module(t, n.Component()) }
	btltest.Run(t, "membtl", newModule)
	btltest.Relisten(t, "membtl", newModule)
}

// TestHold: frames from the held direction wait, in order, from the
// first large enough one on; small ones before it and the other
// direction pass; the release lets them through.
func TestHold(t *testing.T) {
	n := membtl.NewNetwork()
	a, b := btltest.Module(t, n.Component()), btltest.Module(t, n.Component())
	ctx := context.Background()
	accepted := make(chan btl.Conn, 1)
	epA := btl.Endpoint{Job: "j", Rank: 0}
	epB := btl.Endpoint{Job: "j", Rank: 1}
	var err error
	if epB.Addr, err = b.Listen(ctx, epB, func(c btl.Conn) { accepted <- c }); err != nil {
		t.Fatal(err)
	}
	release := n.Hold(0, 1, 10)
	out, err := a.Dial(ctx, epA, epB)
	if err != nil {
		t.Fatal(err)
	}
	in := <-accepted
	for _, p := range []string{"small", "large enough", "x"} {
		if err := out.WriteFrame([]byte("h"), []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.WriteFrame([]byte("back"), []byte("the other way is not held")); err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, btl.MaxHeader)
	read := func(c btl.Conn) string {
		_, pn, err := c.ReadHeader(hdr)
		if err != nil {
			t.Fatal(err)
		}
		p := make([]byte, pn)
		if err := c.ReadPayload(p); err != nil {
			t.Fatal(err)
		}
		return string(p)
	}
	if got := read(in); got != "small" {
		t.Fatalf("first frame %q", got)
	}
	if got := read(out); got != "the other way is not held" {
		t.Fatalf("other direction: %q", got)
	}
	got := make(chan string, 2)
	go func() {
		got <- read(in)
		got <- read(in)
	}()
	select {
	case s := <-got:
		t.Fatalf("a held frame was read: %q", s)
	default:
	}
	release()
	if s1, s2 := <-got, <-got; s1 != "large enough" || s2 != "x" {
		t.Fatalf("after the release: %q, %q", s1, s2)
	}
	out.Close()
	if _, _, err := in.ReadHeader(hdr); err == nil {
		t.Fatal("read after the peer closed")
	}
	if err := in.WriteFrame(nil, nil); !errors.Is(err, btl.ErrClosed) {
		t.Fatalf("write to a closed peer: %v", err)
	}
}
