// Package han is the hierarchical coll component, after Open MPI's coll
// han: on a communicator that spans several nodes with more than one
// member on some node, Barrier, Bcast, Reduce and Allreduce run in two
// levels. The lowest rank on each node is its leader; the members of a
// node meet through their leader (low level), and only the leaders talk
// across the network (up level), each level with the flat algorithms of
// package coll. Inside a node the messages go over whichever BTL joins the
// members (sm, uds), so a checkpoint drains them like any other: han keeps
// nothing in shared memory.
//
// Integer reductions give the same bits as the flat algorithms, as integer
// arithmetic is exact in any order. Floating-point reductions would not:
// the order of combination follows the layout, and a restarted or migrated
// job, or a replica on another node, would compute other bits. han
// therefore declines them (basic runs them) unless coll_han_float_order is
// "layout". Message sizes above each operation's coll_han_<op>_max go to
// the next component as well.
//
// han is not selected in a job with C/R (ft_cr_enabled): a restore on
// other nodes or a migration changes the layout, and a transparent
// checkpoint stops ranks anywhere, some inside a collective that others
// have not entered yet; those would group the members by the new layout
// and the others by the old, and run two different algorithms. Until the
// grouping is part of the checkpointed state, such jobs run basic.
package han

import (
	"context"
	"fmt"

	"gompi/frameworks/coll"
	"gompi/mca"
)

// Priority is the default priority: above basic, so han runs what it
// takes on the communicators it applies to.
const Priority = 30

const (
	paramFloatOrder   = "coll_han_float_order"
	paramBcastMax     = "coll_han_bcast_max"
	paramReduceMax    = "coll_han_reduce_max"
	paramAllreduceMax = "coll_han_allreduce_max"
)

// Float orders (coll_han_float_order).
const (
	orderFixed  = "fixed"
	orderLayout = "layout"
)

// New returns the han coll component.
func New() mca.Component[coll.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: coll.Name, Name: "han",
		Description: "Hierarchical collectives: node leaders over the network, the other members through their node's leader; on communicators that span several nodes with more than one member on some node",
		Priority:    Priority,
		Params: []mca.ParamSpec{
			{Name: paramFloatOrder, Type: mca.String, Default: orderFixed, Choices: []string{orderFixed, orderLayout}, Level: mca.LevelTuner,
				Help: "Floating-point Reduce and Allreduce: fixed leaves them to the flat algorithms, whose bits depend only on the communicator's size and root; layout runs them hierarchically too, in an order that depends on which ranks share a node (a restart on another layout, or a replica elsewhere, may then compute other bits)"},
			{Name: paramBcastMax, Type: mca.Size, Default: "0", Level: mca.LevelTuner,
				Help: "Largest Bcast, in bytes, run hierarchically (larger ones go to the next component); 0: no limit"},
			{Name: paramReduceMax, Type: mca.Size, Default: "0", Level: mca.LevelTuner,
				Help: "Largest Reduce, in bytes, run hierarchically (larger ones go to the next component); 0: no limit"},
			{Name: paramAllreduceMax, Type: mca.Size, Default: "256KiB", Level: mca.LevelTuner,
				Help: "Largest Allreduce, in bytes, run hierarchically; larger ones go to the next component, whose ring spreads the reduction over every rank where han's node leaders reduce every byte alone; 0: no limit"},
		},
	}, query)
}

func query(_ context.Context, q mca.Query) (coll.Module, int, error) {
	if q.Values.Bool(mca.ParamCREnabled) {
		return nil, 0, fmt.Errorf("%w: C/R is on (%s): a restart or migration on another layout would split the ranks between two groupings", mca.ErrSkip, mca.ParamCREnabled)
	}
	m := &module{
		layoutFloats: q.Values.String(paramFloatOrder) == orderLayout,
		bcastMax:     int(q.Values.Size(paramBcastMax)),
		reduceMax:    int(q.Values.Size(paramReduceMax)),
		allreduceMax: int(q.Values.Size(paramAllreduceMax)),
	}
	for name, v := range map[string]int{paramBcastMax: m.bcastMax, paramReduceMax: m.reduceMax, paramAllreduceMax: m.allreduceMax} {
		if v < 0 {
			return nil, 0, fmt.Errorf("coll han: %s = %d: a size cannot be negative", name, v)
		}
	}
	return m, q.Priority, nil
}

// module holds the process's han parameters; Comm gives each
// communicator its levels.
type module struct {
	layoutFloats                      bool
	bcastMax, reduceMax, allreduceMax int
}

// Comm groups c's members by node, nodes in the order of their lowest
// rank, and skips c when the grouping has nothing to gain: one node, or
// one member per node.
func (m *module) Comm(c coll.Comm) (any, error) {
	n := c.Size()
	group := make([]int, n) // member -> its node's index
	index := map[string]int{}
	var groups [][]int
	for r := 0; r < n; r++ {
		g, ok := index[c.Node(r)]
		if !ok {
			g = len(groups)
			index[c.Node(r)] = g
			groups = append(groups, nil)
		}
		group[r] = g
		groups[g] = append(groups[g], r)
	}
	if len(groups) == 1 {
		return nil, fmt.Errorf("%w: the communicator lies within one node", mca.ErrSkip)
	}
	if len(groups) == n {
		return nil, fmt.Errorf("%w: every member of the communicator runs on a node of its own", mca.ErrSkip)
	}
	o := &ops{module: m, group: group, groups: groups}
	me := group[c.Rank()]
	o.low = coll.Sub(c, groups[me])
	if groups[me][0] == c.Rank() {
		leaders := make([]int, len(groups))
		for g, members := range groups {
			leaders[g] = members[0]
		}
		o.up = coll.Sub(c, leaders)
	}
	return o, nil
}

// ops are han's operations on one communicator. low is this member's
// node (its leader is low rank 0); up, on leaders only, is the leaders,
// whose up rank is their node's index.
type ops struct {
	*module
	group  []int   // member -> node index
	groups [][]int // node index -> members, lowest first
	low    coll.Comm
	up     coll.Comm // nil unless this member leads its node
}

// lowRank is member r's rank within its node.
func (o *ops) lowRank(r int) int {
	for i, m := range o.groups[o.group[r]] {
		if m == r {
			return i
		}
	}
	panic("han: member outside its own node")
}

func noop(_, _ []byte) {}

// Barrier: the members report to their leader, the leaders meet, and
// each leader releases its node.
func (o *ops) Barrier(ctx context.Context, c coll.Comm, tag int) error {
	fanIn := coll.Reduction{Fn: noop, Elem: 1}
	if err := coll.Reduce(ctx, o.low, tag, nil, nil, fanIn, 0); err != nil {
		return err
	}
	if o.up != nil {
		if err := coll.Barrier(ctx, o.up, tag); err != nil {
			return err
		}
	}
	return coll.Bcast(ctx, o.low, tag, nil, 0)
}

// Bcast: root's node first (from root), then the leaders (from root's
// leader), then every other node (from its leader).
func (o *ops) Bcast(ctx context.Context, c coll.Comm, tag int, buf []byte, root int) error {
	if o.bcastMax > 0 && len(buf) > o.bcastMax {
		return coll.ErrDecline
	}
	rootNode, mine := o.group[root], o.group[c.Rank()]
	if mine == rootNode {
		if err := coll.Bcast(ctx, o.low, tag, buf, o.lowRank(root)); err != nil {
			return err
		}
	}
	if o.up != nil {
		if err := coll.Bcast(ctx, o.up, tag, buf, rootNode); err != nil {
			return err
		}
	}
	if mine != rootNode {
		return coll.Bcast(ctx, o.low, tag, buf, 0)
	}
	return nil
}

// takes reports whether han runs a reduction of n bytes with limit max.
// A non-commutative one needs rank order, which node-first reduction
// breaks.
func (o *ops) takes(red coll.Reduction, n, max int) bool {
	return !red.NonCommutative && (!red.Float || o.layoutFloats) && (max == 0 || n <= max)
}

// Reduce: each node reduces to its leader, the leaders to root's leader,
// which hands the result to root.
func (o *ops) Reduce(ctx context.Context, c coll.Comm, tag int, send, recv []byte, red coll.Reduction, root int) error {
	if !o.takes(red, len(send), o.reduceMax) {
		return coll.ErrDecline
	}
	acc := coll.AlignedBuf(len(send))
	if err := coll.Reduce(ctx, o.low, tag, send, acc, red, 0); err != nil {
		return err
	}
	rootNode := o.group[root]
	rootLeader := o.groups[rootNode][0]
	if o.up != nil {
		if err := coll.Reduce(ctx, o.up, tag, acc, acc, red, rootNode); err != nil {
			return err
		}
	}
	switch me := c.Rank(); {
	case me == root:
		if root != rootLeader {
			return c.Recv(ctx, recv, rootLeader, tag)
		}
		copy(recv, acc)
	case me == rootLeader:
		return c.Send(ctx, root, tag, acc)
	}
	return nil
}

// Allreduce: each node reduces to its leader, the leaders allreduce, and
// each leader broadcasts the result in its node.
func (o *ops) Allreduce(ctx context.Context, c coll.Comm, tag int, send, recv []byte, red coll.Reduction) error {
	if !o.takes(red, len(send), o.allreduceMax) {
		return coll.ErrDecline
	}
	acc := coll.AlignedBuf(len(send))
	if err := coll.Reduce(ctx, o.low, tag, send, acc, red, 0); err != nil {
		return err
	}
	if o.up != nil {
		if err := coll.Allreduce(ctx, o.up, tag, acc, acc, red); err != nil {
			return err
		}
	}
	if err := coll.Bcast(ctx, o.low, tag, acc, 0); err != nil {
		return err
	}
	copy(recv, acc)
	return nil
}

// Interface guards.
var (
	_ coll.Barrierer  = (*ops)(nil)
	_ coll.Bcaster    = (*ops)(nil)
	_ coll.Reducer    = (*ops)(nil)
	_ coll.Allreducer = (*ops)(nil)
)
