package mpi_test

import (
	"errors"
	"fmt"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// TestGroups checks the group operations on a world of 6 against
// hand-computed member lists (world ranks).
func TestGroups(t *testing.T) {
	mpitest.Run(t, 6, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		g := w.Group()
		if w.Rank() != 2 {
			return nil // one rank checks the tables; the answers are local
		}
		inc := func(r []int) mpi.Group { x, err := g.Incl(r); must0(err); return x }
		a := inc([]int{5, 1, 2})
		b := inc([]int{2, 3, 5})
		exc, err := g.Excl([]int{0, 4})
		must0(err)
		ri, err := g.RangeIncl([]mpi.Range{{5, 1, -2}, {0, 0, 1}})
		must0(err)
		re, err := g.RangeExcl([]mpi.Range{{0, 4, 2}})
		must0(err)
		cases := []struct {
			name string
			g    mpi.Group
			want []int
			rank int
		}{
			{"world", g, []int{0, 1, 2, 3, 4, 5}, 2},
			{"incl", a, []int{5, 1, 2}, 2},
			{"excl", exc, []int{1, 2, 3, 5}, 1},
			{"range incl", ri, []int{5, 3, 1, 0}, mpi.Undefined},
			{"range excl", re, []int{1, 3, 5}, mpi.Undefined},
			{"union", a.Union(b), []int{5, 1, 2, 3}, 2},
			{"intersection", a.Intersection(b), []int{5, 2}, 1},
			{"difference", a.Difference(b), []int{1}, mpi.Undefined},
		}
		for _, c := range cases {
			if fmt.Sprint(c.g.Members()) != fmt.Sprint(c.want) || c.g.Rank() != c.rank || c.g.Size() != len(c.want) {
				return fmt.Errorf("%s: members %v rank %d, want %v rank %d", c.name, c.g.Members(), c.g.Rank(), c.want, c.rank)
			}
		}
		tr, err := a.TranslateRanks([]int{0, 1, 2, mpi.ProcNull}, b)
		if err != nil || fmt.Sprint(tr) != fmt.Sprint([]int{2, mpi.Undefined, 0, mpi.ProcNull}) {
			return fmt.Errorf("translate: %v %v", tr, err)
		}
		b2 := inc([]int{5, 2, 1})
		if a.Compare(a) != mpi.Ident || a.Compare(b2) != mpi.Similar || a.Compare(b) != mpi.Unequal {
			return fmt.Errorf("compare: %d %d %d", a.Compare(a), a.Compare(b2), a.Compare(b))
		}
		for _, bad := range [][]int{{6}, {1, 1}, {-1}} {
			if _, err := g.Incl(bad); !errors.Is(err, mpi.ErrArg) {
				return fmt.Errorf("incl %v: %v", bad, err)
			}
		}
		return nil
	})
}

func must0(err error) {
	if err != nil {
		panic(err)
	}
}

// TestCommCreate makes a communicator of the even ranks in reverse order,
// uses it, compares communicators, and finds Create in the creation log
// as a Split.
func TestCommCreate(t *testing.T) {
	for n := 1; n <= 5; n++ {
		mpitest.Run(t, n, "tcp", func(p *mpi.Proc) error {
			w := p.World()
			var evens []int
			for r := (n - 1) / 2 * 2; r >= 0; r -= 2 {
				evens = append(evens, r)
			}
			g, err := w.Group().Incl(evens)
			if err != nil {
				return err
			}
			c, err := w.Create(g)
			if err != nil {
				return err
			}
			if (c == nil) != (w.Rank()%2 == 1) {
				return fmt.Errorf("rank %d: communicator %v", w.Rank(), c)
			}
			if c != nil {
				if c.Size() != len(evens) || evens[c.Rank()] != w.Rank() || c.WorldRank(0) != evens[0] {
					return fmt.Errorf("create: size %d rank %d", c.Size(), c.Rank())
				}
				sum := []int64{int64(w.Rank())}
				if err := mpi.Allreduce(c, sum, sum, mpi.Sum); err != nil {
					return err
				}
				if want := int64((n - 1) / 2 * ((n-1)/2 + 1)); sum[0] != want {
					return fmt.Errorf("allreduce on the created communicator: %d, want %d", sum[0], want)
				}
			}
			d, err := w.Dup()
			if err != nil {
				return err
			}
			shared, err := w.SplitShared(-w.Rank())
			if err != nil {
				return err
			}
			if w.Compare(w) != mpi.Ident || w.Compare(d) != mpi.Congruent || (n > 1 && w.Compare(shared) != mpi.Similar) {
				return fmt.Errorf("compare: %d %d %d", w.Compare(w), w.Compare(d), w.Compare(shared))
			}
			log := p.CreationLog()
			if e := log[0]; e.Op != mpi.OpSplit || (c != nil && fmt.Sprint(e.Members) != fmt.Sprint(evens)) {
				return fmt.Errorf("creation log: %+v", e)
			}
			return nil
		})
	}
}
