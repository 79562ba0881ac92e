package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// shrunk is what one survivor got from Shrink.
type shrunk struct {
	handle  uint64
	members []int // world ranks
}

// results collects each survivor's communicator, by world rank.
type results struct {
	mu  sync.Mutex
	got map[int]shrunk
}

func (r *results) put(rank int, c *mpi.Comm) {
	s := shrunk{handle: c.Handle()}
	for i := range c.Size() {
		s.members = append(s.members, c.WorldRank(i))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[int]shrunk{}
	}
	r.got[rank] = s
}

// agreed checks that every rank of want got the same communicator, and
// returns it.
func (r *results) agreed(t *testing.T, want []int) shrunk {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var first *shrunk
	for _, w := range want {
		s, ok := r.got[w]
		if !ok {
			t.Fatalf("survivor %d got no communicator (got %v)", w, r.got)
		}
		if first == nil {
			first = &s
			continue
		}
		if s.handle != first.handle || !slices.Equal(s.members, first.members) {
			t.Fatalf("survivors disagree: %v", r.got)
		}
	}
	return *first
}

// TestShrink kills ranks before the survivors shrink the world, telling
// only some survivors which ranks died (as a runtime's notices arrive at
// different times); the others find out during the agreement. Every
// survivor must get the same communicator of exactly the survivors, in
// world order, usable for collectives.
func TestShrink(t *testing.T) {
	tests := []struct {
		n    int
		dead []int
		told map[int][]int // survivor -> dead ranks it is told of before Shrink
		btl  string
	}{
		{n: 1, btl: "uds"},
		{n: 3, btl: "uds"},
		{n: 2, dead: []int{1}, btl: "uds"},
		{n: 2, dead: []int{0}, told: map[int][]int{1: {0}}, btl: "tcp"},
		{n: 4, dead: []int{0}, told: map[int][]int{1: {0}, 2: {0}, 3: {0}}, btl: "uds"},
		{n: 4, dead: []int{3}, told: map[int][]int{0: {3}}, btl: "tcp"},
		{n: 5, dead: []int{1, 3}, btl: "uds"},
		{n: 5, dead: []int{0, 4}, told: map[int][]int{2: {4}}, btl: "tcp"},
		{n: 8, dead: []int{2, 5}, told: map[int][]int{7: {2}, 0: {5}}, btl: "uds"},
		{n: 8, dead: []int{0, 1, 2, 3, 4, 5, 6}, btl: "uds"},
		{n: 8, dead: []int{1, 2, 3, 4, 5, 6, 7}, told: map[int][]int{0: {7}}, btl: "tcp"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("n=%d/dead=%v/told=%v/%s", tt.n, tt.dead, tt.told, tt.btl), func(t *testing.T) {
			var survivors []int
			for r := range tt.n {
				if !slices.Contains(tt.dead, r) {
					survivors = append(survivors, r)
				}
			}
			hold := holdAll(tt.n)
			var res results
			errs := mpitest.Start(mpitest.Config{N: tt.n, BTL: tt.btl, AllowFailures: true}, func(p *mpi.Proc) error {
				w := p.World()
				if slices.Contains(tt.dead, w.Rank()) {
					mpi.Kill(p)
					hold()
					return nil
				}
				hold() // every dead rank is dead
				for _, d := range tt.told[w.Rank()] {
					p.MarkFailed(d, errors.New("the test says it died"))
				}
				nc, err := w.Shrink()
				if err != nil {
					return fmt.Errorf("shrink: %w", err)
				}
				res.put(w.Rank(), nc)
				// The result works: ranks and a collective over it.
				if nc.Size() != len(survivors) || nc.WorldRank(nc.Rank()) != w.Rank() {
					return fmt.Errorf("rank %d of %d in the shrunk communicator, want %d survivors", nc.Rank(), nc.Size(), len(survivors))
				}
				sum := []int64{int64(w.Rank())}
				if err := mpi.Allreduce(nc, sum, sum, mpi.Sum); err != nil {
					return fmt.Errorf("allreduce over the survivors: %w", err)
				}
				want := int64(0)
				for _, s := range survivors {
					want += int64(s)
				}
				if sum[0] != want {
					return fmt.Errorf("allreduce over the survivors gave %d, want %d", sum[0], want)
				}
				// Every dead rank is known failed here now, told or not.
				for _, d := range tt.dead {
					if _, err := w.Recv(nil, d, 99); !errors.Is(err, mpi.ErrProcFailed) {
						return fmt.Errorf("receive from dead rank %d after Shrink: %v, want ErrProcFailed", d, err)
					}
				}
				log := p.CreationLog()
				if e := log[len(log)-1]; e.Op != mpi.OpShrink || e.Parent != w.Handle() || e.Handle != nc.Handle() || !slices.Equal(e.Members, survivors) {
					return fmt.Errorf("creation log ends with %+v, want the shrink of %d into %d with members %v", e, w.Handle(), nc.Handle(), survivors)
				}
				return nil
			})
			for _, err := range errs {
				t.Error(err)
			}
			if t.Failed() {
				return
			}
			got := res.agreed(t, survivors)
			if !slices.Equal(got.members, survivors) {
				t.Errorf("members %v, want the survivors %v", got.members, survivors)
			}
			if got.handle == 0 || got.handle%2 != 0 {
				t.Errorf("handle %d: want a fresh even context id", got.handle)
			}
		})
	}
}

// TestShrinkDuringFailure kills a rank while the others shrink, then
// reports it to them as a runtime would: whether the victim dies before
// or during the agreement, the survivors agree; when it is left in, a
// second Shrink removes it.
func TestShrinkDuringFailure(t *testing.T) {
	const n, victim = 5, 2
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			procs := make([]*mpi.Proc, n)
			hold := holdAll(n)
			var first, second results
			errs := mpitest.Start(mpitest.Config{N: n, BTL: "uds", AllowFailures: true}, func(p *mpi.Proc) error {
				w := p.World()
				procs[w.Rank()] = p
				hold()
				if w.Rank() == victim {
					go func() {
						mpi.Kill(p)
						for r, q := range procs {
							if r != victim {
								q.MarkFailed(victim, errors.New("the runtime saw it die"))
							}
						}
					}()
					_, err := w.Shrink()
					return err // whatever it got, it is dead
				}
				nc, err := w.Shrink()
				if err != nil {
					return fmt.Errorf("shrink: %w", err)
				}
				first.put(w.Rank(), nc)
				if slices.Contains(members(nc), victim) {
					// Left in: collectives over it fail everywhere, and
					// shrinking again leaves it out.
					if err := nc.Barrier(); !errors.Is(err, mpi.ErrProcFailed) {
						return fmt.Errorf("barrier with the dead rank in: %v, want ErrProcFailed", err)
					}
					if nc, err = nc.Shrink(); err != nil {
						return fmt.Errorf("second shrink: %w", err)
					}
				}
				second.put(w.Rank(), nc)
				return nc.Barrier()
			})
			for _, err := range errs {
				t.Error(err)
			}
			if t.Failed() {
				return
			}
			survivors := []int{0, 1, 3, 4}
			got := first.agreed(t, survivors)
			if !slices.Equal(got.members, survivors) && !slices.Equal(got.members, []int{0, 1, 2, 3, 4}) {
				t.Errorf("first shrink gave %v: want the survivors, with or without the victim", got.members)
			}
			if got := second.agreed(t, survivors); !slices.Equal(got.members, survivors) {
				t.Errorf("final communicator %v, want %v", got.members, survivors)
			}
		})
	}
}

// Shrinking a shrunk communicator, and shrinking with nothing failed.
func TestShrinkTwice(t *testing.T) {
	const n = 6
	hold1, hold2 := holdAll(n), holdAll(n-1)
	var a, b results
	errs := mpitest.Start(mpitest.Config{N: n, BTL: "uds", AllowFailures: true}, func(p *mpi.Proc) error {
		w := p.World()
		if w.Rank() == 4 {
			mpi.Kill(p)
			hold1()
			return nil
		}
		hold1()
		c1, err := w.Shrink()
		if err != nil {
			return err
		}
		a.put(w.Rank(), c1)
		// Nothing failed since: a Shrink is a Dup with a new handle.
		c2, err := c1.Shrink()
		if err != nil {
			return err
		}
		if c2.Handle() == c1.Handle() || !slices.Equal(members(c2), members(c1)) {
			return fmt.Errorf("shrink without failures: handle %d members %v from %d %v", c2.Handle(), members(c2), c1.Handle(), members(c1))
		}
		if c1.Rank() == 0 {
			mpi.Kill(p) // world rank 0 dies too
			hold2()
			return nil
		}
		hold2()
		p.MarkFailed(0, errors.New("the test says it died"))
		c3, err := c2.Shrink()
		if err != nil {
			return err
		}
		b.put(w.Rank(), c3)
		// Messages on the old communicators do not reach the new one.
		if c3.Rank() == 0 {
			return c3.Send([]byte{7}, 1, 0)
		}
		if c3.Rank() == 1 {
			buf := make([]byte, 1)
			if _, err := c3.Recv(buf, 0, 0); err != nil || buf[0] != 7 {
				return fmt.Errorf("receive on the twice-shrunk communicator: %v %v", buf, err)
			}
		}
		return nil
	})
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if got := a.agreed(t, []int{0, 1, 2, 3, 5}); !slices.Equal(got.members, []int{0, 1, 2, 3, 5}) {
		t.Errorf("first shrink %v", got.members)
	}
	if got := b.agreed(t, []int{1, 2, 3, 5}); !slices.Equal(got.members, []int{1, 2, 3, 5}) {
		t.Errorf("second shrink %v", got.members)
	}
}

// A Shrink whose context ends returns an error and leaves nothing
// posted; the process goes on.
func TestShrinkCanceled(t *testing.T) {
	mpitest.Run(t, 2, "uds", func(p *mpi.Proc) error {
		w := p.World()
		if w.Rank() == 0 {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if nc, err := w.ShrinkCtx(ctx); err == nil || nc != nil {
				return fmt.Errorf("ShrinkCtx with an ended context: %v, %v; want an error", nc, err)
			}
		}
		return w.Barrier()
	})
}

func members(c *mpi.Comm) []int {
	out := make([]int, c.Size())
	for i := range out {
		out[i] = c.WorldRank(i)
	}
	return out
}

// deadAtStart is the bootstrap of a runtime that declared rank dead
// failed before it published its addresses.
type deadAtStart struct {
	mpi.Bootstrap
	dead int
}

func (b deadAtStart) Modex(ctx context.Context, mine map[string]string) ([]map[string]string, error) {
	all, err := b.Bootstrap.Modex(ctx, mine)
	if err == nil {
		all[b.dead] = nil
	}
	return all, err
}

// A rank that fails before the job starts is failed from the start in
// the others, which shrink without it.
func TestFailedBeforeStart(t *testing.T) {
	const n, dead = 4, 1
	var res results
	cfg := mpitest.Config{N: n, BTL: "uds", AllowFailures: true,
		Wrap: func(rank int, b mpi.Bootstrap) mpi.Bootstrap {
			if rank == dead {
				return b
			}
			return deadAtStart{b, dead}
		}}
	errs := mpitest.Start(cfg, func(p *mpi.Proc) error {
		w := p.World()
		if w.Rank() == dead {
			mpi.Kill(p)
			return nil
		}
		if err := w.Send(nil, dead, 0); !errors.Is(err, mpi.ErrProcFailed) {
			return fmt.Errorf("send to the rank dead at start: %v, want ErrProcFailed", err)
		}
		nc, err := w.Shrink()
		if err != nil {
			return err
		}
		res.put(w.Rank(), nc)
		return nc.Barrier()
	})
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if got := res.agreed(t, []int{0, 2, 3}); !slices.Equal(got.members, []int{0, 2, 3}) {
		t.Errorf("members %v, want 0 2 3", got.members)
	}
}
