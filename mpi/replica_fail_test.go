package mpi_test

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// A replicated job goes on when a copy of a rank dies: the application
// sees no error and no failure event, and every survivor ends with the
// checksum of the run without failures (claims 25, 26, 29, 30, 31 of
// the notes, in process: the process dies with mpi.Kill).

// stencil is the workload of the tests: a ring exchange of a vector and
// an Allreduce per iteration, with AnySource receives every third one.
// kill is called at the top of each iteration with it; a true answer
// kills the process there.
func stencil(p *mpi.Proc, iters int, kill func(it int) bool) ([]byte, error) {
	return stencilWith(p, stencilOpts{iters: iters, kill: kill})
}

// stencilOpts vary the workload: delay runs before each iteration (a
// copy made to lag), big makes the Allreduce a vector of that many
// elements.
type stencilOpts struct {
	iters int
	kill  func(it int) bool
	delay func(it int)
	big   int
}

func stencilWith(p *mpi.Proc, o stencilOpts) ([]byte, error) {
	iters, kill := o.iters, o.kill
	w := p.World()
	me, n := w.Rank(), w.Size()
	x := make([]float64, 256)
	for i := range x {
		x[i] = float64(me*len(x) + i)
	}
	got := make([]float64, len(x))
	var any []byte
	for it := range iters {
		if kill != nil && kill(it) {
			mpi.Kill(p)
			return nil, errKilled
		}
		if o.delay != nil {
			o.delay(it)
		}
		right, left := (me+1)%n, (me-1+n)%n
		if _, err := mpi.SendrecvT(w, x, right, 1, got, left, 1); err != nil {
			return nil, err
		}
		for i := range x {
			x[i] = 0.5*x[i] + 0.25*got[i] + 1/float64(it+1)
		}
		sum := []float64{0}
		for _, v := range x {
			sum[0] += v
		}
		if err := mpi.Allreduce(w, sum, sum, mpi.Sum); err != nil {
			return nil, err
		}
		if o.big > 0 {
			v := make([]float64, o.big)
			for i := range v {
				v[i] = x[i%len(x)] * float64(i+1)
			}
			if err := mpi.Allreduce(w, v, v, mpi.Sum); err != nil {
				return nil, err
			}
			x[0] += v[it%len(v)] * 1e-12
		}
		x[it%len(x)] += sum[0] * 1e-9
		if os.Getenv("REPTRACE") != "" {
			idx, _ := p.Copy()
			hh := sha256.New()
			for _, v := range x {
				hh.Write(binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)))
			}
			fmt.Printf("TRACE %d %d %d %x %x\n", me, idx, it, math.Float64bits(sum[0]), hh.Sum(nil)[:6])
		}
		if it%3 == 0 {
			// Every rank sends one message to rank 0, which takes them
			// in arrival order.
			if me != 0 {
				if err := w.Send(binary.LittleEndian.AppendUint64(nil, math.Float64bits(x[0])), 0, 2); err != nil {
					return nil, err
				}
			} else {
				// Arrival order differs between runs; the values are
				// added in rank order, so the result does not.
				vals := make([]float64, n)
				for range n - 1 {
					b := make([]byte, 8)
					st, err := w.Recv(b, mpi.AnySource, 2)
					if err != nil {
						return nil, err
					}
					any = fmt.Appendf(any, "%d;", st.Source)
					vals[st.Source] = math.Float64frombits(binary.LittleEndian.Uint64(b))
				}
				for _, v := range vals {
					x[1] += v * 1e-12
				}
			}
		}
	}
	h := sha256.New()
	for _, v := range x {
		h.Write(binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)))
	}
	_ = any // the order differs between runs; its effect on x is in the sum
	return h.Sum(nil), nil
}

var errKilled = errors.New("killed by the test")

// reference runs the workload without replication and failures and
// returns each rank's checksum.
func reference(t *testing.T, n, iters int) [][]byte {
	t.Helper()
	out := make([][]byte, n)
	mpitest.RunWith(t, mpitest.Config{N: n, BTL: "tcp"}, func(p *mpi.Proc) error {
		sum, err := stencil(p, iters, nil)
		out[p.Rank()] = sum
		return err
	})
	return out
}

// killRun runs the workload on n ranks, m replicated, killing process
// victim(index) where kill says, and checks that every other process ends
// without an error, with the reference checksum of its rank.
func killRun(t *testing.T, n, m, iters int, ref [][]byte, kill func(index, it int) bool) {
	t.Helper()
	killJob(t, n, m, ref, func(p *mpi.Proc, idx int) ([]byte, error) {
		return stencil(p, iters, func(it int) bool { return kill(idx, it) })
	})
}

// killJob runs body in every process of a job of n ranks, m replicated:
// a process body kills returns errKilled, every other one must end with
// its rank's reference checksum, with no error and no failure event.
func killJob(t *testing.T, n, m int, ref [][]byte, body func(p *mpi.Proc, index int) ([]byte, error)) {
	t.Helper()
	var mu sync.Mutex
	done := map[int][]byte{}
	var events []mpi.Failure
	cfg := mpitest.Config{N: n, Replicas: m, BTL: "tcp", AllowFailures: true}
	if os.Getenv("REPDEBUG") != "" {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	procs := make([]*mpi.Proc, n+m)
	var started sync.WaitGroup
	started.Add(n + m)
	errs := mpitest.Start(cfg, func(p *mpi.Proc) error {
		idx, _ := p.Copy()
		ch := make(chan mpi.Failure, 16)
		p.NotifyFailures(ch)
		mu.Lock()
		procs[idx] = p
		mu.Unlock()
		started.Done()
		started.Wait()
		sum, err := body(p, idx)
		if errors.Is(err, errKilled) {
			// The runtime sees the process end and tells the others, as
			// gompirun does (a process nobody had a connection to is
			// found so).
			for i, q := range procs {
				if i != idx {
					q.MarkFailed(idx, errors.New("killed by the test"))
				}
			}
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Errorf("process %d (rank %d): the application saw an error: %v", idx, p.Rank(), err)
			return nil
		}
		done[idx] = sum
		select {
		case f := <-ch:
			events = append(events, f)
		default:
		}
		return nil
	})
	for _, err := range errs {
		if !errors.Is(err, mpi.ErrStopped) {
			t.Error(err)
		}
	}
	for idx, sum := range done {
		k := idx % n
		if string(sum) != string(ref[k]) {
			t.Errorf("process %d (rank %d): checksum %x, want the failure-free %x", idx, k, sum, ref[k])
		}
	}
	if len(events) > 0 {
		t.Errorf("the application heard of failures: %v", events)
	}
}

// TestReplicaKillCopy kills one copy of a rank mid-run: its primary
// (claim 25: the replica is promoted in place), its replica (claim 26),
// a copy of rank 0 which takes AnySource receives, and the primary of a
// rank whose neighbours are not replicated (partial replication).
func TestReplicaKillCopy(t *testing.T) {
	const n, iters = 4, 60
	ref := reference(t, n, iters)
	cases := []struct {
		name   string
		m      int
		victim int
		at     int
	}{
		{"primary", 4, 1, 20},
		{"replica", 4, 5, 20},
		{"primary-of-0", 4, 0, 31},
		{"replica-of-0", 4, 4, 7},
		{"partial-primary", 2, 1, 13},
		{"partial-replica", 2, 4, 13},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			killRun(t, n, c.m, iters, ref, func(idx, it int) bool { return idx == c.victim && it == c.at })
		})
	}
}

// TestReplicaKillBoth loses both copies of a rank, one after the other:
// the second loss is the rank's failure, which the others see as in a
// job without replication: one failure event naming it, and operations
// that involve it fail with mpi.ErrProcFailed. The survivors revoke the
// world when they hear of it, as a ULFM program does, so that none waits
// for a message a failed peer's neighbour will never send.
func TestReplicaKillBoth(t *testing.T) {
	const n, m = 3, 3
	var mu sync.Mutex
	saw := map[int]error{}
	heard := map[int][]mpi.Failure{}
	var met sync.WaitGroup
	met.Add(4)
	errs := mpitest.Start(mpitest.Config{N: n, Replicas: m, BTL: "tcp", AllowFailures: true}, func(p *mpi.Proc) error {
		idx, _ := p.Copy()
		events := make(chan mpi.Failure, 4)
		p.NotifyFailures(events)
		got := make(chan struct{})
		go func() {
			f := <-events
			mu.Lock()
			heard[idx] = append(heard[idx], f)
			mu.Unlock()
			p.World().Revoke()
			close(got)
		}()
		_, err := stencil(p, 1000000, func(it int) bool {
			return (idx == 2 && it == 10) || (idx == 5 && it == 30)
		})
		if errors.Is(err, errKilled) {
			return nil
		}
		mu.Lock()
		saw[idx] = err
		mu.Unlock()
		select {
		case <-got:
		case <-time.After(time.Minute):
		}
		// Nobody finalizes before every survivor met the failure.
		met.Done()
		met.Wait()
		return nil
	})
	for _, err := range errs {
		if !errors.Is(err, mpi.ErrStopped) && !errors.Is(err, mpi.ErrProcFailed) {
			t.Error(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, idx := range []int{0, 1, 3, 4} {
		err := saw[idx]
		r, ok := mpi.RankOf(err)
		if !errors.Is(err, mpi.ErrRevoked) && !(errors.Is(err, mpi.ErrProcFailed) && ok && r == 2) {
			t.Errorf("process %d: %v, want rank 2's failure or the revocation it caused", idx, err)
		}
		if h := heard[idx]; len(h) != 1 || h[0].Rank != 2 {
			t.Errorf("process %d heard of failures %v, want rank 2's alone", idx, h)
		}
	}
}

// Claim 30: kills between the primary's and the replica's receive of the
// same messages. One copy of every rank is made to lag (it pauses each
// iteration); killing a primary then promotes a replica that is behind
// (the messages the primary had are resent from the senders' logs), and
// killing a lagging replica's ahead-running primary the other way round
// (the promoted copy holds messages its new sources send again later,
// which it drops by their send ids).
func TestReplicaKillBetweenReceives(t *testing.T) {
	const n, iters = 3, 40
	ref := reference(t, n, iters)
	lag := func(idx int, replicas bool) func(int) {
		return func(int) {
			if (idx >= n) == replicas {
				time.Sleep(300 * time.Microsecond)
			}
		}
	}
	for _, c := range []struct {
		name         string
		victim       int
		replicasSlow bool
		at           int
	}{
		{"primary-ahead", 1, true, 25},
		{"primary-behind", 1, false, 25},
		{"replica-ahead", 4, false, 25},
		{"sender-primary-behind", 0, false, 12},
	} {
		t.Run(c.name, func(t *testing.T) {
			killJob(t, n, n, ref, func(p *mpi.Proc, idx int) ([]byte, error) {
				return stencilWith(p, stencilOpts{iters: iters, delay: lag(idx, c.replicasSlow),
					kill: func(it int) bool { return idx == c.victim && it == c.at }})
			})
		})
	}
}

// Claim 31: a copy killed in the middle of a collective (a long ring
// Allreduce, the kill from a timer) lets every survivor finish it with
// the right result.
func TestReplicaKillInCollective(t *testing.T) {
	const n, iters, big = 3, 12, 1 << 15
	ref := make([][]byte, n)
	mpitest.RunWith(t, mpitest.Config{N: n, BTL: "tcp"}, func(p *mpi.Proc) error {
		sum, err := stencilWith(p, stencilOpts{iters: iters, big: big})
		ref[p.Rank()] = sum
		return err
	})
	for _, victim := range []int{1, 3} {
		t.Run(fmt.Sprint("process-", victim), func(t *testing.T) {
			killJob(t, n, n, ref, func(p *mpi.Proc, idx int) ([]byte, error) {
				if idx != victim {
					return stencilWith(p, stencilOpts{iters: iters, big: big})
				}
				var killed sync.WaitGroup
				killed.Add(1)
				// Killed from outside while the application is inside a
				// collective: the big Allreduces take most of the time.
				go func() {
					defer killed.Done()
					time.Sleep(3 * time.Millisecond)
					mpi.Kill(p)
				}()
				_, err := stencilWith(p, stencilOpts{iters: iters, big: big})
				killed.Wait()
				if err == nil {
					return nil, fmt.Errorf("the victim finished before it was killed: make the workload longer")
				}
				return nil, errKilled
			})
		})
	}
}

// Claim 32: repair runs on the library's goroutine. Rank 2's copies
// compute for a long time without calling the library when rank 1's
// primary dies; every process, rank 2's included, has repaired before
// rank 2 calls the library again.
func TestReplicaRepairWhileComputing(t *testing.T) {
	const n, iters = 3, 20
	ref := reference(t, n, iters)
	procs := make([]*mpi.Proc, 2*n)
	var mu sync.Mutex
	repairedAll := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i, p := range procs {
			if i == 1 {
				continue
			}
			if st, ok := p.ReplicaStats(); !ok || st.Epoch < 1 {
				return false
			}
		}
		return true
	}
	var started sync.WaitGroup
	started.Add(2 * n)
	killJob(t, n, n, ref, func(p *mpi.Proc, idx int) ([]byte, error) {
		mu.Lock()
		procs[idx] = p
		mu.Unlock()
		started.Done()
		started.Wait()
		var stuck error
		sum, err := stencilWith(p, stencilOpts{iters: iters,
			kill: func(it int) bool { return idx == 1 && it == 10 },
			delay: func(it int) {
				if p.Rank() != 2 || it != 10 {
					return
				}
				// Compute: no library call until every survivor repaired.
				deadline := time.Now().Add(30 * time.Second)
				for !repairedAll() {
					if time.Now().After(deadline) {
						stuck = fmt.Errorf("process %d: the others did not repair while this rank computed", idx)
						return
					}
					time.Sleep(time.Millisecond)
				}
			}})
		if stuck != nil {
			return nil, stuck
		}
		return sum, err
	})
}

// Claim 39 (repair): a second copy lost while the repair of the first
// runs: the agreement takes it, or the next repair does; the job ends with
// the reference checksums.
func TestReplicaSecondFailure(t *testing.T) {
	const n, iters = 4, 40
	ref := reference(t, n, iters)
	for _, c := range []struct {
		name string
		a, b int
		gap  time.Duration
	}{
		{"together", 1, 6, 0},
		{"during-repair", 1, 6, 200 * time.Microsecond},
		{"promoted-then-other", 5, 2, time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			killJob(t, n, n, ref, func(p *mpi.Proc, idx int) ([]byte, error) {
				return stencilWith(p, stencilOpts{iters: iters, kill: func(it int) bool {
					switch {
					case idx == c.a && it == 15:
						return true
					case idx == c.b && it == 15:
						time.Sleep(c.gap)
						return true
					}
					return false
				}})
			})
		})
	}
}
