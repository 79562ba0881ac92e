package mpi_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"gompi/frameworks/snapc"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// pausedBoot is a rank's runtime as gompid drives a transparent
// checkpoint: requests come in on its link, Pause says ready and waits
// for the word, Refuse says why not; Remodex reports when the rank has
// its peers' new addresses (its Resume then only repoints and opens).
type pausedBoot struct {
	mpi.Bootstrap
	*link
	ready    chan uint64 // the request each Pause said ready for
	word     chan bool   // gompid's word: restarted or not
	refused  chan string // each refusal's reason
	remodexd chan struct{}
}

func newPausedBoot(b mpi.Bootstrap) pausedBoot {
	return pausedBoot{Bootstrap: b, link: newLink(), ready: make(chan uint64, 4), word: make(chan bool, 4),
		refused: make(chan string, 4), remodexd: make(chan struct{}, 4)}
}

func (b pausedBoot) Pause(ctx context.Context, id uint64) (bool, error) {
	b.ready <- id
	select {
	case w := <-b.word:
		return w, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func (b pausedBoot) Refuse(_ uint64, reason string) error {
	b.refused <- reason
	return nil
}

func (b pausedBoot) Remodex(ctx context.Context, epoch uint64, mine map[string]string) ([]map[string]string, error) {
	t, err := b.Bootstrap.(mpi.Rejoiner).Remodex(ctx, epoch, mine)
	b.remodexd <- struct{}{}
	return t, err
}

func receive[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("no %s within a minute", what)
		panic("unreachable")
	}
}

// TestQuiesceRequests: the library answers the runtime's Quiesce requests
// by itself, whatever the program does: every rank suspends (no socket
// left), says ready, goes on after the word (the last as a restored
// process would), and the program's results are those of an
// uninterrupted run. A Quiesce that cannot complete (one rank never
// asked) is withdrawn by Cancel: the others refuse and the job goes on.
func TestQuiesceRequests(t *testing.T) {
	for _, pr := range protocols {
		t.Run(pr.crcp, func(t *testing.T) { quiesceRequests(t, pr.crcp) })
	}
}

func quiesceRequests(t *testing.T, crcp string) {
	const n, quiesces = 4, 12
	tr := traffic{seed: rand.Uint64(), rounds: 160}
	if raceOn {
		tr.rounds = 60
	}
	t.Logf("seed %d", tr.seed)
	cfg := withCRCP(mpitest.Config{N: n, BTL: "tcp,uds", Nodes: []string{"a", "a", "b", "b"}}, crcp)
	want := tr.job(t, cfg, nil)
	boots := make([]pausedBoot, n)
	cfg.Wrap = func(rank int, b mpi.Bootstrap) mpi.Bootstrap {
		boots[rank] = newPausedBoot(b)
		return boots[rank]
	}
	base := socketFDs()
	got := tr.job(t, cfg, func(ps []*mpi.Proc, _ func() int) {
		r := rand.New(rand.NewPCG(tr.seed, 2))
		seq := 0
		for k := uint64(1); k <= quiesces; k++ {
			time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond) // a random moment
			if k == quiesces/2 {
				withdrawn(t, boots, k, seq)
				seq++
				continue
			}
			for _, b := range boots {
				b.reqs <- snapc.AppRequest{ID: k, Kind: snapc.Quiesce, Seq: seq}
			}
			for i, b := range boots {
				if id := receive(t, b.ready, fmt.Sprintf("rank %d ready for request %d", i, k)); id != k {
					t.Errorf("rank %d ready for request %d, asked %d", i, id, k)
				}
				if !ps[i].Suspended() {
					t.Errorf("rank %d said ready for request %d while not suspended", i, k)
				}
			}
			for s := range socketFDs() {
				if !base[s] {
					t.Errorf("request %d: %s is open while every rank is ready to be dumped", k, s)
				}
			}
			for _, b := range boots {
				b.word <- k == quiesces
			}
			for i, b := range boots {
				receive(t, b.remodexd, fmt.Sprintf("rank %d's new addresses after request %d", i, k))
			}
			seq++
			if t.Failed() {
				return
			}
		}
	})
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rank %d: checksum %x with quiesces, %x without", i, got[i], want[i])
		}
	}
}

// withdrawn asks all ranks but the last to quiesce for request k, which
// cannot complete, then withdraws it: each asked rank refuses, saying so.
func withdrawn(t *testing.T, boots []pausedBoot, k uint64, seq int) {
	t.Helper()
	asked := boots[:len(boots)-1]
	for _, b := range asked {
		b.reqs <- snapc.AppRequest{ID: k, Kind: snapc.Quiesce, Seq: seq}
	}
	for _, b := range asked {
		b.reqs <- snapc.AppRequest{ID: k, Kind: snapc.Cancel, Seq: seq}
	}
	for i, b := range asked {
		if why := receive(t, b.refused, fmt.Sprintf("rank %d's refusal of request %d", i, k)); !strings.Contains(why, "withdrawn") {
			t.Errorf("rank %d refused request %d with %q, want it withdrawn", i, k, why)
		}
	}
}
