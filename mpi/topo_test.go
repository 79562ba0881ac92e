package mpi_test

import (
	"fmt"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

func TestDimsCreate(t *testing.T) {
	cases := []struct {
		n          int
		dims, want []int
	}{
		{12, []int{0, 0}, []int{4, 3}},
		{16, []int{0, 0}, []int{4, 4}},
		{7, []int{0, 0}, []int{7, 1}},
		{24, []int{0, 3, 0}, []int{4, 3, 2}},
		{6, []int{2, 3}, []int{2, 3}},
		{1, []int{0, 0, 0}, []int{1, 1, 1}},
		// as even as possible, where dealing prime factors is not
		{72, []int{0, 0}, []int{9, 8}},
		{420, []int{0, 0}, []int{21, 20}},
		{140679, []int{0, 0, 0}, []int{77, 63, 29}},
		{140784, []int{0, 0, 0}, []int{419, 21, 16}},
		{141120, []int{0, 0, 0}, []int{56, 56, 45}},
		{1024, []int{0, 0, 0, 0}, []int{8, 8, 4, 4}},
		{97, []int{0, 0, 0}, []int{97, 1, 1}},
		{55440, []int{0, 0, 0}, []int{44, 36, 35}}, // spread 9, as 42 x 40 x 33's
		{100320, []int{0, 0, 0}, []int{57, 44, 40}},
		{15984, []int{0, 0, 0, 0}, []int{37, 9, 8, 6}}, // spread 31, as 37 x 12 x 6 x 6's
		{60, []int{0, 5, 0}, []int{4, 5, 3}},
	}
	for _, c := range cases {
		got, err := mpi.DimsCreate(c.n, c.dims)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("DimsCreate(%d, %v) = %v, %v; want %v", c.n, c.dims, got, err, c.want)
		}
	}
	for _, bad := range []struct {
		n    int
		dims []int
	}{{7, []int{2, 0}}, {6, []int{2, 2}}, {4, []int{-1, 0}}} {
		if _, err := mpi.DimsCreate(bad.n, bad.dims); err == nil {
			t.Errorf("DimsCreate(%d, %v) accepted", bad.n, bad.dims)
		}
	}
}

// TestCart makes a 2x2 grid (periodic in dimension 1) out of 5 ranks and
// checks coordinates, shifts, a sub-grid and a ring exchange on it.
func TestCart(t *testing.T) {
	mpitest.Run(t, 5, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		c, err := w.CartCreate([]int{2, 2}, []bool{false, true})
		if err != nil {
			return err
		}
		if w.Rank() == 4 {
			if c != nil {
				return fmt.Errorf("rank beyond the grid got %v", c)
			}
			return nil
		}
		cart, err := c.Cart()
		if err != nil || c.TopoTest() != mpi.TopoCart || w.TopoTest() != mpi.TopoNone {
			return fmt.Errorf("topology: %v %d", err, c.TopoTest())
		}
		at, _ := cart.Coords(c.Rank())
		if r, _ := cart.Rank(at); r != c.Rank() || fmt.Sprint(at) != fmt.Sprint([]int{c.Rank() / 2, c.Rank() % 2}) {
			return fmt.Errorf("coords %v", at)
		}
		src, dst, _ := cart.Shift(c.Rank(), 0, 1)
		wantSrc, wantDst := mpi.ProcNull, c.Rank()+2
		if at[0] == 1 {
			wantSrc, wantDst = c.Rank()-2, mpi.ProcNull
		}
		if src != wantSrc || dst != wantDst {
			return fmt.Errorf("shift along 0: %d %d", src, dst)
		}
		src, dst, _ = cart.Shift(c.Rank(), 1, 1) // wraps: both are the other column
		if other := c.Rank() ^ 1; src != other || dst != other {
			return fmt.Errorf("shift along 1: %d %d", src, dst)
		}
		in := make([]byte, 1)
		if _, err := c.Sendrecv([]byte{byte(c.Rank())}, dst, 0, in, src, 0); err != nil || int(in[0]) != src {
			return fmt.Errorf("exchange: %v %v", in, err)
		}
		row, err := c.CartSub([]bool{false, true})
		if err != nil {
			return err
		}
		sub, _ := row.Cart()
		if row.Size() != 2 || row.Rank() != at[1] || fmt.Sprint(sub.Dims, sub.Periods) != "[2] [true]" {
			return fmt.Errorf("sub-grid: size %d rank %d %+v", row.Size(), row.Rank(), sub)
		}
		return nil
	})
}

func TestGraphs(t *testing.T) {
	mpitest.Run(t, 4, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		// A star: 0 linked to 1, 2; 1 and 2 to 0; rank 3 not in the graph.
		g, err := w.GraphCreate([]int{2, 3, 4}, []int{1, 2, 0, 0})
		if err != nil {
			return err
		}
		if (g == nil) != (w.Rank() == 3) {
			return fmt.Errorf("graph communicator on rank %d: %v", w.Rank(), g)
		}
		if g != nil {
			nb, err := g.Topology().Graph.Neighbors(g.Rank())
			want := map[int]string{0: "[1 2]", 1: "[0]", 2: "[0]"}[g.Rank()]
			if err != nil || fmt.Sprint(nb) != want || g.TopoTest() != mpi.TopoGraph {
				return fmt.Errorf("neighbours of %d: %v %v", g.Rank(), nb, err)
			}
		}
		n, r := w.Size(), w.Rank()
		d, err := w.DistGraphCreateAdjacent([]int{(r + n - 1) % n}, []int{(r + 1) % n})
		if err != nil {
			return err
		}
		dg := d.Topology().DistGraph
		if d.TopoTest() != mpi.TopoDistGraph || dg.Sources[0] != (r+n-1)%n || dg.Dests[0] != (r+1)%n || d.Size() != n {
			return fmt.Errorf("dist graph: %+v", dg)
		}
		return nil
	})
}
