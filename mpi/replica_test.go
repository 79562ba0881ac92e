package mpi_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// copies collects what each process of a replicated job saw, by rank,
// so a test can check that both copies of a rank saw the same.
type copies struct {
	mu   sync.Mutex
	seen map[int][][]byte // per rank, one entry per copy that reported
}

func newCopies() *copies { return &copies{seen: map[int][][]byte{}} }

func (c *copies) put(rank int, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[rank] = append(c.seen[rank], b)
}

// check fails t unless every rank reported want times and its copies
// agree.
func (c *copies) check(t *testing.T, ranks int, want func(rank int) int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range ranks {
		got := c.seen[k]
		if len(got) != want(k) {
			t.Errorf("rank %d: %d copies reported, want %d", k, len(got), want(k))
			continue
		}
		for i := 1; i < len(got); i++ {
			if !bytes.Equal(got[0], got[i]) {
				t.Errorf("rank %d: the copies differ: %x and %x", k, got[0], got[i])
			}
		}
	}
}

func copiesOf(m int) func(int) int {
	return func(k int) int {
		if k < m {
			return 2
		}
		return 1
	}
}

// replicaSource is, by the routing rules, the process a process of a
// launch layout receives rank s's messages from.
func replicaSource(n, m, phys, s int) int {
	primary := phys < n
	switch {
	case primary:
		return s
	case s < m:
		return n + s
	}
	return s
}

// Claim 28 of the notes: without failures every process receives
// exactly one copy of every message sent to its rank, from one process
// per source rank, as the four routing rules say; both copies of a rank
// see the same messages.
func TestReplicaRouting(t *testing.T) {
	const n, k = 3, 5
	for _, m := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("%d+%d", n, m), func(t *testing.T) {
			seen := newCopies()
			// The counts are read before any process sends more (Finalize's
			// barrier): the processes, all in this test, wait for each other
			// without a message.
			var read sync.WaitGroup
			read.Add(n + m)
			mpitest.RunWith(t, mpitest.Config{N: n, Replicas: m, BTL: "tcp"}, func(p *mpi.Proc) error {
				err := routeAndCount(p, n, m, k, seen)
				read.Done()
				read.Wait()
				return err
			})
			seen.check(t, n, copiesOf(m))
		})
	}
}

func routeAndCount(p *mpi.Proc, n, m, k int, seen *copies) error {
	w := p.World()
	me := w.Rank()
	if w.Size() != n {
		return fmt.Errorf("size %d, want %d", w.Size(), n)
	}
	var reqs []*mpi.Request
	for d := range n {
		if d == me {
			continue
		}
		for i := range k {
			r, err := w.Isend([]byte{byte(me), byte(d), byte(i)}, d, 7)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
	}
	h := sha256.New()
	for s := range n {
		if s == me {
			continue
		}
		for i := range k {
			b := make([]byte, 3)
			st, err := w.Recv(b, s, 7)
			if err != nil {
				return err
			}
			if st.Source != s || b[0] != byte(s) || b[1] != byte(me) || b[2] != byte(i) {
				return fmt.Errorf("from %d got %v (%+v)", s, b, st)
			}
			h.Write(b)
		}
	}
	if _, err := mpi.Waitall(reqs); err != nil {
		return err
	}
	stats, ok := p.ReplicaStats()
	if !ok {
		return fmt.Errorf("no replication stats in a replicated job")
	}
	for i, got := range stats.Received {
		want := uint64(0)
		if i != stats.Index {
			if s := i % n; s != me && (i == replicaSource(n, m, stats.Index, s)) {
				want = uint64(k)
			}
		}
		if got != want {
			return fmt.Errorf("process %d (rank %d) received %d messages from process %d, want %d (all: %v)", stats.Index, me, got, i, want, stats.Received)
		}
	}
	if stats.Duplicates != 0 {
		return fmt.Errorf("%d duplicates without a failure", stats.Duplicates)
	}
	seen.put(me, h.Sum(nil))
	return nil
}

// Claim 37: the copies of a rank hold the same state after floating-point
// reductions and gathers, whatever the order the values arrive in, with
// partial replication; the application sees one rank.
func TestReplicaCollectives(t *testing.T) {
	const n, m = 4, 3
	seen := newCopies()
	mpitest.RunWith(t, mpitest.Config{N: n, Replicas: m, BTL: "tcp"}, func(p *mpi.Proc) error {
		w := p.World()
		me := w.Rank()
		rng := rand.New(rand.NewPCG(uint64(me), 1))
		h := sha256.New()
		x := make([]float64, 64)
		for round := range 20 {
			for i := range x {
				x[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(30)-15))
			}
			sum := make([]float64, len(x))
			if err := mpi.Allreduce(w, x, sum, mpi.Sum); err != nil {
				return err
			}
			root := round % n
			red := make([]float64, len(x))
			if err := mpi.Reduce(w, x, red, mpi.Max, root); err != nil {
				return err
			}
			all := make([]byte, 8*n)
			if err := w.Allgather(binary.LittleEndian.AppendUint64(nil, math.Float64bits(sum[round])), all); err != nil {
				return err
			}
			b := make([]byte, 8)
			if me == root {
				binary.LittleEndian.PutUint64(b, math.Float64bits(red[0]))
			}
			if err := w.Bcast(b, root); err != nil {
				return err
			}
			if err := w.Barrier(); err != nil {
				return err
			}
			for _, v := range sum {
				h.Write(binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)))
			}
			h.Write(all)
			h.Write(b)
		}
		seen.put(me, h.Sum(nil))
		return nil
	})
	seen.check(t, n, copiesOf(m))
}

// Claim 38: an AnySource receive matches in the replica what it matched
// in the primary, whatever order the messages reach each copy in.
func TestReplicaAnySource(t *testing.T) {
	const n, m, k = 4, 4, 30
	seen := newCopies()
	mpitest.RunWith(t, mpitest.Config{N: n, Replicas: m, BTL: "tcp"}, func(p *mpi.Proc) error {
		w := p.World()
		me := w.Rank()
		if me != 0 {
			// Random pauses, different in the two copies of a sender,
			// scramble the arrival order at both copies of rank 0.
			idx, _ := p.Copy()
			rng := rand.New(rand.NewPCG(uint64(idx), 2))
			for i := range k {
				time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
				if err := w.Send([]byte{byte(me), byte(i)}, 0, 3+i%2); err != nil {
					return err
				}
			}
			return w.Barrier()
		}
		h := sha256.New()
		var pending []*mpi.Request
		bufs := make([][]byte, 0, (n-1)*k)
		for i := range (n - 1) * k {
			b := make([]byte, 2)
			if i%3 == 0 {
				// Non-blocking ones, some with a tag, waited for later.
				r, err := w.Irecv(b, mpi.AnySource, mpi.AnyTag)
				if err != nil {
					return err
				}
				pending = append(pending, r)
				bufs = append(bufs, b)
				continue
			}
			st, err := w.Recv(b, mpi.AnySource, mpi.AnyTag)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%d:%d:%x;", st.Source, st.Tag, b)
		}
		sts, err := mpi.Waitall(pending)
		if err != nil {
			return err
		}
		for i, st := range sts {
			fmt.Fprintf(h, "%d:%d:%x;", st.Source, st.Tag, bufs[i])
		}
		seen.put(me, h.Sum(nil))
		return w.Barrier()
	})
	seen.check(t, 1, copiesOf(m))
}
