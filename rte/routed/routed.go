// Package routed is the shape of a job's daemon tree and the routing of
// control messages through it, as Open MPI's routed radix: gompirun is
// the root, the daemons are laid out in launch order as a complete tree
// of the radix (routed_radix), so gompirun is linked to at most radix
// daemons and every daemon to its parent and at most radix children. A
// message to a deep daemon is relayed by its ancestors; one to every
// daemon is sent once per link. Radix 0 is the star: every daemon linked
// to gompirun, as before the tree.
//
// The shape says where a daemon attaches at launch. Routes are learned,
// not computed: a daemon's hello goes up through its ancestors, and each
// relaying daemon (and gompirun) learns that the node is reached through
// the child it came from (Table). When a daemon's parent is lost, the
// daemon attaches to a live ancestor and says which nodes are below it,
// and the new path learns them the same way.
package routed

import (
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	pb "gompi/rte/control/proto"
)

// Root names gompirun as a parent.
const Root = ""

// Tree is the launch shape of a job's daemons.
type Tree struct {
	nodes []string
	radix int
	index map[string]int
}

// New lays nodes out (in this order) as a tree of radix; radix <= 0, or
// at least the node count, is the star.
func New(nodes []string, radix int) Tree {
	t := Tree{nodes: slices.Clone(nodes), radix: radix, index: make(map[string]int, len(nodes))}
	for i, n := range nodes {
		t.index[n] = i
	}
	return t
}

// Radix is the tree's radix (0: the star).
func (t Tree) Radix() int { return max(t.radix, 0) }

// Nodes are the tree's nodes in launch order.
func (t Tree) Nodes() []string { return slices.Clone(t.nodes) }

// vpid is a node's place in the tree: gompirun 0, the daemons 1..N.
func (t Tree) vpid(node string) (int, bool) {
	if node == Root {
		return 0, true
	}
	i, ok := t.index[node]
	return i + 1, ok
}

// Parent is node's parent at launch: Root (gompirun) or another node. A
// node not in the tree has Root.
func (t Tree) Parent(node string) string {
	v, ok := t.vpid(node)
	if !ok || v == 0 || t.radix <= 0 {
		return Root
	}
	p := (v - 1) / t.radix
	if p == 0 {
		return Root
	}
	return t.nodes[p-1]
}

// Children are node's children at launch (Root: gompirun's).
func (t Tree) Children(node string) []string {
	v, ok := t.vpid(node)
	if !ok {
		return nil
	}
	if t.radix <= 0 {
		if v == 0 {
			return slices.Clone(t.nodes)
		}
		return nil
	}
	var out []string
	for c := v*t.radix + 1; c <= v*t.radix+t.radix && c <= len(t.nodes); c++ {
		out = append(out, t.nodes[c-1])
	}
	return out
}

// Ancestors are node's parents up to gompirun, nearest first, Root last.
func (t Tree) Ancestors(node string) []string {
	var out []string
	for p := t.Parent(node); ; p = t.Parent(p) {
		out = append(out, p)
		if p == Root {
			return out
		}
	}
}

// Depth is the number of links from gompirun to the deepest daemon.
func (t Tree) Depth() int {
	d := 0
	for _, n := range t.nodes {
		d = max(d, len(t.Ancestors(n)))
	}
	return d
}

// Table is what one process of the tree knows of the nodes below it: the
// child each is reached through. It is safe for concurrent use.
type Table struct {
	mu  sync.Mutex
	via map[string]string
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{via: map[string]string{}} }

// Learn records that node is reached through child.
func (t *Table) Learn(node, child string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.via[node] = child
}

// Via is the child node is reached through.
func (t *Table) Via(node string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.via[node]
	return c, ok
}

// Forget drops child and every node reached through it, and returns them
// (child first when it was known).
func (t *Table) Forget(child string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for n, c := range t.via {
		if c == child {
			out = append(out, n)
			delete(t.via, n)
		}
	}
	slices.Sort(out)
	if i := slices.Index(out, child); i > 0 {
		out[0], out[i] = out[i], out[0]
	}
	return out
}

// Below lists every node below (sorted), or those reached through child
// when child is not empty.
func (t *Table) Below(child string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for n, c := range t.via {
		if child == "" || c == child {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Split groups the targets reached below by the child they go through;
// the others (not below: the process itself, or nodes it has no route
// to) are returned apart, in order.
func (t *Table) Split(to []string) (byChild map[string][]string, rest []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	byChild = map[string][]string{}
	for _, n := range to {
		if c, ok := t.via[n]; ok {
			byChild[c] = append(byChild[c], n)
		} else {
			rest = append(rest, n)
		}
	}
	return byChild, rest
}

// Counter counts the control traffic on one link of the tree, as the
// process at its upper end sees it: up is towards gompirun. It is safe for
// concurrent use.
type Counter struct {
	mu sync.Mutex
	s  pb.LinkStats
}

// Up counts a message that went up the link.
func (c *Counter) Up(m proto.Message) { c.count(m, &c.s.MsgsUp, &c.s.BytesUp, &c.s.KindsUp) }

// Down counts a message that went down the link.
func (c *Counter) Down(m proto.Message) { c.count(m, &c.s.MsgsDown, &c.s.BytesDown, &c.s.KindsDown) }

func (c *Counter) count(m proto.Message, msgs, bytes *uint64, kinds *map[string]uint64) {
	kind := Kind(m)
	size := uint64(proto.Size(m))
	c.mu.Lock()
	defer c.mu.Unlock()
	if *kinds == nil {
		*kinds = map[string]uint64{}
	}
	(*kinds)[kind]++
	if kind != "heartbeat" {
		*msgs++
		*bytes += size
	}
}

// Stats are the counts so far.
func (c *Counter) Stats() *pb.LinkStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return proto.Clone(&c.s).(*pb.LinkStats)
}

// Kind names a control message's kind: the field of its body ("fence",
// "heartbeat", "launch"...), or "none".
func Kind(m proto.Message) string {
	r := m.ProtoReflect()
	body := r.Descriptor().Oneofs().ByName("body")
	if body == nil {
		return "none"
	}
	f := r.WhichOneof(body)
	if f == nil {
		return "none"
	}
	return string(f.Name())
}
