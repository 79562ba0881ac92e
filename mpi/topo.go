package mpi

import (
	"fmt"
	"slices"
)

// Virtual topologies (MPI_Cart_*, MPI_Graph_*, MPI_Dist_graph_*): a
// communicator made by CartCreate, GraphCreate or DistGraphCreateAdjacent
// carries its topology (Comm.Topology). None reorders ranks. The
// communicator is made by a Split (every member of c takes part; those
// beyond the topology's size get nil), so the creation log records it
// and a restart replays it; the topology itself is the program's
// arguments, which the replayed call gives again.

// Topology kinds (MPI_Topo_test).
const (
	TopoNone      = 0
	TopoCart      = 1
	TopoGraph     = 2
	TopoDistGraph = 3
)

// Topology is a communicator's virtual topology: one of the fields is set.
type Topology struct {
	Cart      *Cart
	Graph     *Graph
	DistGraph *DistGraph
}

// Cart is a Cartesian grid: Dims[i] ranks along dimension i, Periods[i]
// when it wraps around. Ranks run through the grid in row-major order.
type Cart struct {
	Dims    []int
	Periods []bool
}

// Graph is a graph over every member (MPI_Graph_create): rank r's
// neighbours are Edges[Index[r-1]:Index[r]] (Index[-1] = 0).
type Graph struct {
	Index []int
	Edges []int
}

// DistGraph is this member's part of a distributed graph: the ranks it
// receives from and sends to (MPI_Dist_graph_create_adjacent).
type DistGraph struct {
	Sources []int
	Dests   []int
}

// Topology returns the communicator's topology, nil for none.
func (c *Comm) Topology() *Topology { return c.topo.Load() }

// TopoTest is the kind of the communicator's topology (TopoNone...).
func (c *Comm) TopoTest() int {
	t := c.Topology()
	switch {
	case t == nil:
		return TopoNone
	case t.Cart != nil:
		return TopoCart
	case t.Graph != nil:
		return TopoGraph
	}
	return TopoDistGraph
}

// withTopo makes the communicator of c's first n ranks (nil for the
// others) and gives it t.
func (c *Comm) withTopo(n int, t *Topology) (*Comm, error) {
	color := 0
	if c.rank >= n {
		color = Undefined
	}
	nc, err := c.Split(color, c.rank)
	if err != nil || nc == nil {
		return nil, err
	}
	nc.topo.Store(t)
	return nc, nil
}

// CartCreate makes a communicator with a Cartesian topology over the
// first prod(dims) ranks of c. Collective over c.
func (c *Comm) CartCreate(dims []int, periods []bool) (*Comm, error) {
	if err := c.checkOp(); err != nil {
		return nil, err
	}
	n := 1
	for _, d := range dims {
		if d <= 0 {
			return nil, fmt.Errorf("mpi: cart create: %w: dimension %d", ErrArg, d)
		}
		n *= d
	}
	if len(periods) != len(dims) || n > c.size {
		return nil, fmt.Errorf("mpi: cart create: %w: %d dimensions, %d periods, %d ranks of %d", ErrArg, len(dims), len(periods), n, c.size)
	}
	return c.withTopo(n, &Topology{Cart: &Cart{Dims: slices.Clone(dims), Periods: slices.Clone(periods)}})
}

// Cart returns the communicator's Cartesian topology, with an error when
// it has none.
func (c *Comm) Cart() (*Cart, error) {
	if t := c.Topology(); t != nil && t.Cart != nil {
		return t.Cart, nil
	}
	return nil, fmt.Errorf("mpi: %w: communicator %d has no Cartesian topology", ErrArg, c.handle)
}

// Size is the number of ranks in the grid.
func (t *Cart) Size() int {
	n := 1
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Coords returns the coordinates of rank.
func (t *Cart) Coords(rank int) ([]int, error) {
	if rank < 0 || rank >= t.Size() {
		return nil, fmt.Errorf("mpi: cart coords: %w: rank %d outside a grid of %d", ErrArg, rank, t.Size())
	}
	out := make([]int, len(t.Dims))
	for i := len(t.Dims) - 1; i >= 0; i-- {
		out[i] = rank % t.Dims[i]
		rank /= t.Dims[i]
	}
	return out, nil
}

// Rank returns the rank at coords; a coordinate outside a periodic
// dimension wraps, outside another is an error.
func (t *Cart) Rank(coords []int) (int, error) {
	if len(coords) != len(t.Dims) {
		return 0, fmt.Errorf("mpi: cart rank: %w: %d coordinates for %d dimensions", ErrArg, len(coords), len(t.Dims))
	}
	r := 0
	for i, x := range coords {
		d := t.Dims[i]
		if t.Periods[i] {
			x = (x%d + d) % d
		} else if x < 0 || x >= d {
			return 0, fmt.Errorf("mpi: cart rank: %w: coordinate %d outside dimension %d of %d", ErrArg, x, i, d)
		}
		r = r*d + x
	}
	return r, nil
}

// Shift returns the ranks disp steps before and after rank along
// dimension dir (MPI_Cart_shift's source and destination): ProcNull
// past the edge of a dimension that does not wrap.
func (t *Cart) Shift(rank, dir, disp int) (src, dst int, err error) {
	if dir < 0 || dir >= len(t.Dims) {
		return 0, 0, fmt.Errorf("mpi: cart shift: %w: direction %d of %d", ErrArg, dir, len(t.Dims))
	}
	at, err := t.Coords(rank)
	if err != nil {
		return 0, 0, err
	}
	step := func(k int) int {
		x := slices.Clone(at)
		x[dir] += k
		r, err := t.Rank(x)
		if err != nil {
			return ProcNull
		}
		return r
	}
	return step(-disp), step(disp), nil
}

// CartSub splits a Cartesian communicator into the sub-grids that keep
// the dimensions remain marks (MPI_Cart_sub). Collective.
func (c *Comm) CartSub(remain []bool) (*Comm, error) {
	t, err := c.Cart()
	if err != nil {
		return nil, err
	}
	if len(remain) != len(t.Dims) {
		return nil, fmt.Errorf("mpi: cart sub: %w: %d flags for %d dimensions", ErrArg, len(remain), len(t.Dims))
	}
	at, _ := t.Coords(c.rank)
	color, key := 0, 0
	sub := &Cart{}
	for i, d := range t.Dims {
		if remain[i] {
			key = key*d + at[i]
			sub.Dims, sub.Periods = append(sub.Dims, d), append(sub.Periods, t.Periods[i])
		} else {
			color = color*d + at[i]
		}
	}
	nc, err := c.Split(color, key)
	if err != nil {
		return nil, err
	}
	nc.topo.Store(&Topology{Cart: sub})
	return nc, nil
}

// DimsCreate fills the zero entries of dims so that their product with
// the others is nnodes, as balanced as possible and in non-increasing
// order (MPI_Dims_create).
func DimsCreate(nnodes int, dims []int) ([]int, error) {
	out, fixed, free := slices.Clone(dims), 1, 0
	for _, d := range dims {
		switch {
		case d < 0:
			return nil, fmt.Errorf("mpi: dims create: %w: dimension %d", ErrArg, d)
		case d == 0:
			free++
		default:
			fixed *= d
		}
	}
	if nnodes <= 0 || nnodes%fixed != 0 || (free == 0 && fixed != nnodes) {
		return nil, fmt.Errorf("mpi: dims create: %w: %d nodes in dimensions %v", ErrArg, nnodes, dims)
	}
	if free == 0 {
		return out, nil
	}
	got := balanced(nnodes/fixed, free)
	for i, j := 0, 0; i < len(out); i++ {
		if out[i] == 0 {
			out[i], j = got[j], j+1
		}
	}
	return out, nil
}

// balanced returns the k factors of n, in non-increasing order, whose
// largest and smallest differ least (MPI's "as close to each other as
// possible"); among those, the one with the largest smallest factor, then
// the largest next-to-smallest, and so on (what MPICH gives and its test
// of balance, topo/dims5, expects: 55440 in 3 is 44 x 36 x 35, not
// 42 x 40 x 33; 15984 in 4 is 37 x 9 x 8 x 6, not 37 x 12 x 6 x 6). Dealing
// prime factors greedily misses it: 72 in 2 gives 12 x 6, not 9 x 8. The
// search runs over the divisors of n, largest factor first, each next
// factor no larger than the one before and large enough that k of it
// reach what is left.
func balanced(n, k int) []int {
	var divs []int
	for d := 1; d*d <= n; d++ {
		if n%d == 0 {
			divs = append(divs, d)
			if d*d != n {
				divs = append(divs, n/d)
			}
		}
	}
	slices.Sort(divs)
	var best, acc []int
	var search func(rest, k, most int)
	search = func(rest, k, most int) {
		if k == 1 {
			if rest <= most {
				cand := append(acc, rest)
				if spread := cand[0] - rest; best == nil || spread < best[0]-best[len(best)-1] ||
					(spread == best[0]-best[len(best)-1] && laterFactors(cand, best)) {
					best = slices.Clone(cand)
				}
			}
			return
		}
		for _, f := range divs {
			if f > most || f > rest {
				break
			}
			if rest%f != 0 || !reaches(f, k, rest) {
				continue
			}
			acc = append(acc, f)
			search(rest/f, k-1, f)
			acc = acc[:len(acc)-1]
		}
	}
	search(n, k, n)
	return best
}

// laterFactors reports whether a beats b (of equal spread) in balanced's
// order: compared from the smallest factor up, the larger first.
func laterFactors(a, b []int) bool {
	for i := len(a) - 1; i >= 0; i-- {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return false
}

// reaches reports whether f^k >= n.
func reaches(f, k, n int) bool {
	p := 1
	for range k {
		if p *= f; p >= n {
			return true
		}
	}
	return false
}

// GraphCreate makes a communicator with a graph topology over the first
// len(index) ranks of c. Collective over c.
func (c *Comm) GraphCreate(index, edges []int) (*Comm, error) {
	if err := c.checkOp(); err != nil {
		return nil, err
	}
	n := len(index)
	if n > c.size || (n > 0 && index[n-1] != len(edges)) {
		return nil, fmt.Errorf("mpi: graph create: %w: %d nodes, %d edges, last index %v", ErrArg, n, len(edges), index)
	}
	for i, e := range edges {
		if e < 0 || e >= n {
			return nil, fmt.Errorf("mpi: graph create: %w: edge %d to node %d of %d", ErrArg, i, e, n)
		}
	}
	return c.withTopo(n, &Topology{Graph: &Graph{Index: slices.Clone(index), Edges: slices.Clone(edges)}})
}

// Neighbors returns rank's neighbours in the graph.
func (g *Graph) Neighbors(rank int) ([]int, error) {
	if rank < 0 || rank >= len(g.Index) {
		return nil, fmt.Errorf("mpi: graph neighbors: %w: rank %d of %d", ErrArg, rank, len(g.Index))
	}
	lo := 0
	if rank > 0 {
		lo = g.Index[rank-1]
	}
	return slices.Clone(g.Edges[lo:g.Index[rank]]), nil
}

// DistGraphCreateAdjacent makes a communicator with the same members as c
// whose topology, on each member, is the sources it receives from and the
// destinations it sends to. Collective over c.
func (c *Comm) DistGraphCreateAdjacent(sources, dests []int) (*Comm, error) {
	if err := c.checkOp(); err != nil {
		return nil, err
	}
	for _, r := range append(slices.Clone(sources), dests...) {
		if r < 0 || r >= c.size {
			return nil, fmt.Errorf("mpi: dist graph create: %w: neighbour %d of %d ranks", ErrArg, r, c.size)
		}
	}
	return c.withTopo(c.size, &Topology{DistGraph: &DistGraph{Sources: slices.Clone(sources), Dests: slices.Clone(dests)}})
}
