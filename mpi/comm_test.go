package mpi_test

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		color func(r int) int
		key   func(r int) int
	}{
		{"halves by rank", 5, func(r int) int { return r % 2 }, func(r int) int { return r }},
		{"reversed keys", 4, func(r int) int { return 0 }, func(r int) int { return -r }},
		{"equal keys keep rank order", 4, func(r int) int { return r / 2 }, func(r int) int { return 7 }},
		{"extreme keys", 3, func(r int) int { return 1 }, func(r int) int { return []int{math.MaxInt, math.MinInt, 0}[r] }},
		{"undefined", 5, func(r int) int {
			if r == 2 {
				return mpi.Undefined
			}
			return r % 2
		}, func(r int) int { return 10 - r }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mpitest.Run(t, tt.n, "uds", func(p *mpi.Proc) error {
				w := p.World()
				r := w.Rank()
				c, err := w.Split(tt.color(r), tt.key(r))
				if err != nil {
					return err
				}
				if tt.color(r) < 0 {
					if c != nil {
						return fmt.Errorf("undefined color gave a communicator")
					}
					return nil
				}
				// Expected members: same color, ordered by key then rank.
				var want []int
				for q := 0; q < tt.n; q++ {
					if tt.color(q) == tt.color(r) {
						want = append(want, q)
					}
				}
				slices.SortStableFunc(want, func(a, b int) int { return cmp.Compare(tt.key(a), tt.key(b)) })
				got := make([]int, c.Size())
				for i := range got {
					got[i] = c.WorldRank(i)
				}
				if !slices.Equal(got, want) || c.WorldRank(c.Rank()) != r {
					return fmt.Errorf("members %v, want %v", got, want)
				}
				// The new communicator works, and AnySource statuses name
				// ranks of the new communicator.
				sum := []int64{int64(r)}
				if err := mpi.Allreduce(c, sum, sum, mpi.Sum); err != nil {
					return err
				}
				var wantSum int64
				for _, q := range want {
					wantSum += int64(q)
				}
				if sum[0] != wantSum {
					return fmt.Errorf("allreduce on split: %d, want %d", sum[0], wantSum)
				}
				next := (c.Rank() + 1) % c.Size()
				if err := c.Send([]byte{byte(c.Rank())}, next, 0); err != nil {
					return err
				}
				b := make([]byte, 1)
				st, err := c.Recv(b, mpi.AnySource, 0)
				if err != nil {
					return err
				}
				if prev := (c.Rank() - 1 + c.Size()) % c.Size(); st.Source != prev || int(b[0]) != prev {
					return fmt.Errorf("status source %d payload %d, want %d", st.Source, b[0], prev)
				}
				return nil
			})
		})
	}
}

func TestDupIsolationAndLog(t *testing.T) {
	handles := make([][]uint64, 3)
	mpitest.Run(t, 3, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		d, err := w.Dup()
		if err != nil {
			return err
		}
		s, err := d.Split(w.Rank()%2, 0)
		if err != nil {
			return err
		}
		handles[w.Rank()] = []uint64{d.Handle(), s.Handle()}
		if d.Rank() != w.Rank() || d.Size() != w.Size() {
			return fmt.Errorf("dup rank %d size %d", d.Rank(), d.Size())
		}
		// The same tag on world and dup: each receive gets its own
		// communicator's message whatever the arrival order.
		if w.Rank() == 0 {
			if err := d.Send([]byte("dup"), 1, 5); err != nil {
				return err
			}
			if err := w.Send([]byte("world"), 1, 5); err != nil {
				return err
			}
		}
		if w.Rank() == 1 {
			if _, err := d.Probe(0, 5); err != nil { // dup's message is here first
				return err
			}
			b := make([]byte, 8)
			st, err := w.Recv(b, mpi.AnySource, mpi.AnyTag)
			if err != nil || string(b[:st.Count]) != "world" {
				return fmt.Errorf("world receive got %q, %v", b[:st.Count], err)
			}
			st, err = d.Recv(b, mpi.AnySource, mpi.AnyTag)
			if err != nil || string(b[:st.Count]) != "dup" {
				return fmt.Errorf("dup receive got %q, %v", b[:st.Count], err)
			}
		}
		if err := s.Free(); err != nil {
			return err
		}
		if err := s.Barrier(); !errors.Is(err, mpi.ErrArg) {
			return fmt.Errorf("barrier on a freed communicator: %v", err)
		}
		if err := w.Free(); !errors.Is(err, mpi.ErrArg) {
			return fmt.Errorf("freeing the world: %v", err)
		}
		if _, ok := p.Comm(d.Handle()); !ok {
			return fmt.Errorf("dup not found by handle")
		}
		if _, ok := p.Comm(s.Handle()); ok {
			return fmt.Errorf("freed communicator found by handle")
		}
		log := p.CreationLog()
		if len(log) != 3 || log[0].Op != mpi.OpDup || log[1].Op != mpi.OpSplit || log[2].Op != mpi.OpFree ||
			log[1].Parent != d.Handle() || log[1].Color != w.Rank()%2 || log[2].Parent != s.Handle() {
			return fmt.Errorf("creation log %+v", log)
		}
		return nil
	})
	for r := 1; r < 3; r++ {
		if handles[r][0] != handles[0][0] {
			t.Errorf("dup handle differs: rank %d %d, rank 0 %d", r, handles[r][0], handles[0][0])
		}
	}
	if handles[0][1] != handles[2][1] || handles[0][0] == handles[0][1] {
		t.Errorf("split handles %v", handles)
	}
}

func TestConcurrentCreationRefused(t *testing.T) {
	mpitest.Run(t, 1, "", func(p *mpi.Proc) error {
		// With one rank Dup needs nobody, so run two at once from two
		// goroutines many times: one may be refused, never both corrupted.
		for i := 0; i < 50; i++ {
			errs := make(chan error, 2)
			for k := 0; k < 2; k++ {
				go func() { _, err := p.World().Dup(); errs <- err }()
			}
			for k := 0; k < 2; k++ {
				if err := <-errs; err != nil && !errors.Is(err, mpi.ErrArg) {
					return err
				}
			}
		}
		seen := map[uint64]bool{}
		for _, e := range p.CreationLog() {
			if seen[e.Handle] {
				return fmt.Errorf("handle %d given twice", e.Handle)
			}
			seen[e.Handle] = true
		}
		return nil
	})
}
