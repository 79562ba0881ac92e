package mpi

import (
	"fmt"
	"slices"
)

// Group is an ordered set of processes (MPI_Group): the world ranks of
// its members, in group rank order, seen from one process. It is a value:
// operations return new groups and never change their operands.
type Group struct {
	members []int // group rank -> world rank
	self    int   // this process's world rank
}

// Comparison results of Group.Compare and Comm.Compare.
const (
	Ident     = 0 // the same group (or communicator)
	Congruent = 1 // communicators: same members in the same order, other contexts
	Similar   = 2 // same members, another order
	Unequal   = 3
)

// Group returns the communicator's group.
func (c *Comm) Group() Group {
	return Group{members: slices.Clone(c.members), self: c.p.rank}
}

// Size is the number of members.
func (g Group) Size() int { return len(g.members) }

// Rank is this process's rank in the group, Undefined when it is no
// member.
func (g Group) Rank() int {
	if i := slices.Index(g.members, g.self); i >= 0 {
		return i
	}
	return Undefined
}

// Members returns the members' world ranks in group order.
func (g Group) Members() []int { return slices.Clone(g.members) }

func (g Group) with(members []int) Group { return Group{members: members, self: g.self} }

func (g Group) checkRanks(op string, ranks []int) error {
	seen := make(map[int]bool, len(ranks))
	for _, r := range ranks {
		if r < 0 || r >= len(g.members) || seen[r] {
			return fmt.Errorf("mpi: group %s: %w: rank %d outside a group of %d, or named twice", op, ErrArg, r, len(g.members))
		}
		seen[r] = true
	}
	return nil
}

// Incl is the group of g's members ranks, in that order.
func (g Group) Incl(ranks []int) (Group, error) {
	if err := g.checkRanks("incl", ranks); err != nil {
		return Group{}, err
	}
	out := make([]int, len(ranks))
	for i, r := range ranks {
		out[i] = g.members[r]
	}
	return g.with(out), nil
}

// Excl is g without the members ranks, in g's order.
func (g Group) Excl(ranks []int) (Group, error) {
	if err := g.checkRanks("excl", ranks); err != nil {
		return Group{}, err
	}
	var out []int
	for i, w := range g.members {
		if !slices.Contains(ranks, i) {
			out = append(out, w)
		}
	}
	return g.with(out), nil
}

// Range is first, first+stride, ... up to last (inclusive), as in
// MPI_Group_range_incl's triplets.
type Range struct{ First, Last, Stride int }

func (g Group) expand(op string, ranges []Range) ([]int, error) {
	var ranks []int
	for _, r := range ranges {
		if r.Stride == 0 || (r.Last-r.First)*r.Stride < 0 {
			return nil, fmt.Errorf("mpi: group %s: %w: range %d..%d by %d", op, ErrArg, r.First, r.Last, r.Stride)
		}
		for i := r.First; (r.Stride > 0 && i <= r.Last) || (r.Stride < 0 && i >= r.Last); i += r.Stride {
			ranks = append(ranks, i)
		}
	}
	return ranks, g.checkRanks(op, ranks)
}

// RangeIncl is Incl of the ranks the ranges name, in order.
func (g Group) RangeIncl(ranges []Range) (Group, error) {
	ranks, err := g.expand("range_incl", ranges)
	if err != nil {
		return Group{}, err
	}
	return g.Incl(ranks)
}

// RangeExcl is Excl of the ranks the ranges name.
func (g Group) RangeExcl(ranges []Range) (Group, error) {
	ranks, err := g.expand("range_excl", ranges)
	if err != nil {
		return Group{}, err
	}
	return g.Excl(ranks)
}

// Union is g's members, then h's that are not in g.
func (g Group) Union(h Group) Group {
	out := slices.Clone(g.members)
	for _, w := range h.members {
		if !slices.Contains(g.members, w) {
			out = append(out, w)
		}
	}
	return g.with(out)
}

// Intersection is g's members that are in h, in g's order.
func (g Group) Intersection(h Group) Group {
	var out []int
	for _, w := range g.members {
		if slices.Contains(h.members, w) {
			out = append(out, w)
		}
	}
	return g.with(out)
}

// Difference is g's members that are not in h, in g's order.
func (g Group) Difference(h Group) Group {
	var out []int
	for _, w := range g.members {
		if !slices.Contains(h.members, w) {
			out = append(out, w)
		}
	}
	return g.with(out)
}

// TranslateRanks returns the ranks in h of g's members ranks: Undefined
// for one that is not in h, ProcNull for ProcNull.
func (g Group) TranslateRanks(ranks []int, h Group) ([]int, error) {
	out := make([]int, len(ranks))
	for i, r := range ranks {
		if r == ProcNull {
			out[i] = ProcNull
			continue
		}
		if r < 0 || r >= len(g.members) {
			return nil, fmt.Errorf("mpi: group translate_ranks: %w: rank %d outside a group of %d", ErrArg, r, len(g.members))
		}
		out[i] = Undefined
		if j := slices.Index(h.members, g.members[r]); j >= 0 {
			out[i] = j
		}
	}
	return out, nil
}

// Compare is Ident when g and h have the same members in the same order,
// Similar when in another order, else Unequal.
func (g Group) Compare(h Group) int {
	switch {
	case slices.Equal(g.members, h.members):
		return Ident
	case len(g.members) == len(h.members) && len(g.Intersection(h).members) == len(g.members):
		return Similar
	}
	return Unequal
}

// Compare compares two communicators: Ident when they are one, Congruent
// when they have the same members in the same order, Similar in another
// order, else Unequal.
func (c *Comm) Compare(d *Comm) int {
	if c == d || (c != nil && d != nil && c.p == d.p && c.handle == d.handle) {
		return Ident
	}
	if c.inter != nil || d.inter != nil {
		return compareInter(c, d)
	}
	if r := c.Group().Compare(d.Group()); r != Ident {
		return r
	}
	return Congruent
}

// Create returns a communicator of g's members, in g's order (nil on the
// others). g must be a subgroup of c's, the same on every member of c;
// collective over c. It is made as a Split (color: membership, key: rank
// in g), so the creation log records it, and a restart rebuilds it, as a
// Split.
//
// On an intercommunicator each group passes a subgroup of its own, and the
// result joins the two (nil where either is empty), as a Split of it.
func (c *Comm) Create(g Group) (*Comm, error) {
	if err := c.usable(); err != nil {
		return nil, err
	}
	for _, w := range g.members {
		if c.toComm != nil && c.toComm[w] < 0 {
			return nil, fmt.Errorf("mpi: create: %w: world rank %d of the group is no member of communicator %d", ErrArg, w, c.handle)
		}
	}
	r := g.Rank()
	color := 0
	if r == Undefined {
		color = Undefined
	}
	return c.Split(color, r)
}

// SplitShared splits c by node (MPI_Comm_split_type with
// MPI_COMM_TYPE_SHARED): the members on one node get a communicator
// together, ordered by key and then rank in c. Collective over c; a Split
// in the creation log.
func (c *Comm) SplitShared(key int) (*Comm, error) {
	if err := c.checkOp(); err != nil {
		return nil, err
	}
	v, mine := c.view(), c.view().Node(c.rank)
	color := c.rank
	for r := 0; r < c.size; r++ {
		if v.Node(r) == mine {
			color = r // the node's first member names it
			break
		}
	}
	return c.Split(color, key)
}
