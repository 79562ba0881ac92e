package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// digestOf runs traffic with args on cfg and returns rank 0's digest and
// the whole output.
func digestOf(t *testing.T, cfg mpitest.Config, args ...string) (string, string) {
	t.Helper()
	var mu sync.Mutex
	var digest string
	var out bytes.Buffer
	mpitest.RunWith(t, cfg, func(p *mpi.Proc) error {
		var o bytes.Buffer
		d, err := run(p, args, &o)
		mu.Lock()
		defer mu.Unlock()
		if p.Rank() == 0 {
			digest = d
		}
		out.Write(o.Bytes())
		return err
	})
	return digest, out.String()
}

// TestDigest: the digest depends on the seed and the rounds, not on the
// number of nodes, the transport or the pacing; rank 0 prints it with the
// message count, and every rank its transports.
func TestDigest(t *testing.T) {
	args := []string{"-seed", "7", "-rounds", "120"}
	want, out := digestOf(t, mpitest.Config{N: 4, BTL: "tcp"}, args...)
	if len(want) != 16 || !strings.Contains(out, "traffic: rounds=120 messages=") || !strings.Contains(out, "digest="+want+"\n") {
		t.Fatalf("output %q lacks the digest line", out)
	}
	if !strings.Contains(out, "transports rank=3 tcp tcp tcp self\n") || !strings.Contains(out, "stalls rank=3 hold=0 lazy=0 fan-in=") {
		t.Errorf("output %q lacks rank 3's transports or stall counts", out)
	}
	for _, c := range []struct {
		cfg  mpitest.Config
		args []string
	}{
		{mpitest.Config{N: 4, BTL: "uds"}, args},
		{mpitest.Config{N: 4, BTL: "tcp,uds", Nodes: []string{"a", "b", "a", "b"}}, append(args, "-pace", "200us")},
	} {
		t.Run(fmt.Sprintf("%s/%v", c.cfg.BTL, c.cfg.Nodes), func(t *testing.T) {
			if got, out := digestOf(t, c.cfg, c.args...); got != want {
				t.Fatalf("digest %s, want %s\n%s", got, want, out)
			}
		})
	}
	if got, _ := digestOf(t, mpitest.Config{N: 4, BTL: "tcp"}, "-seed", "8", "-rounds", "120"); got == want {
		t.Error("seed 8 gave seed 7's digest")
	}
	if got, _ := digestOf(t, mpitest.Config{N: 4, BTL: "tcp"}, "-seed", "7", "-rounds", "119"); got == want {
		t.Error("119 rounds gave the digest of 120")
	}
}

// TestReceivedChecks: a message lost, duplicated, reordered or altered is
// refused when it arrives, naming the stream and the sender.
func TestReceivedChecks(t *testing.T) {
	books := func() (*traffic, *traffic) {
		o := options{seed: 3, rounds: 1}
		a := &traffic{o: o, me: 0, n: 2}
		b := &traffic{o: o, me: 1, n: 2}
		for _, x := range []*traffic{a, b} {
			x.initBooks()
		}
		return a, b
	}
	a, b := books()
	m0, m1, m2 := a.message(streamLazy, 1, 10), a.message(streamLazy, 1, 0), a.message(streamLazy, 1, 5000)
	if err := b.received(streamLazy, 0, m0); err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string][]byte{"duplicated": m0, "reordered (one lost)": m2} {
		if err := b.received(streamLazy, 0, m); err == nil || !strings.Contains(err.Error(), "stream lazy: message") || !strings.Contains(err.Error(), "from 0") {
			t.Errorf("%s message: %v", name, err)
		}
	}
	bad := bytes.Clone(m2)
	bad[len(bad)-1] ^= 1
	if err := b.received(streamLazy, 0, m1); err != nil {
		t.Fatal(err)
	}
	if err := b.received(streamLazy, 0, bad); err == nil || !strings.Contains(err.Error(), "wrong content") {
		t.Errorf("altered message: %v", err)
	}
	if err := b.received(streamLazy, 0, m2[:8]); err == nil {
		t.Error("a message shorter than its header was taken")
	}
	if b.recvd[streamLazy][0].n != 2 || a.sent[streamLazy][1].n != 3 {
		t.Errorf("books: %d received, %d sent", b.recvd[streamLazy][0].n, a.sent[streamLazy][1].n)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-rounds", "0"}, {"-pace", "-1s"}, {"-every", "-1"}, {"extra"}, {"-bogus"}} {
		if _, err := parse(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestOutFiles: -out's files hold a line per round and the same bytes for
// the same seed over another transport and pacing.
func TestOutFiles(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	digestOf(t, mpitest.Config{N: 3, BTL: "tcp"}, "-seed", "5", "-rounds", "40", "-out", a)
	digestOf(t, mpitest.Config{N: 3, BTL: "uds"}, "-seed", "5", "-rounds", "40", "-out", b, "-pace", "100us")
	for r := range 3 {
		x, err := os.ReadFile(fmt.Sprintf("%s.%d", a, r))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(fmt.Sprintf("%s.%d", b, r))
		if err != nil {
			t.Fatal(err)
		}
		if lines := strings.Split(string(x), "\n"); len(lines) != 41 || !strings.HasPrefix(lines[39], "round 40 coll ") || !bytes.Equal(x, y) {
			t.Errorf("rank %d's files differ or lack a line per round:\n%s\n%s", r, x, y)
		}
	}
}
