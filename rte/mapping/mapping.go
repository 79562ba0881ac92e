// Package mapping places a job's ranks on its nodes, as mpirun's
// --map-by does: by slot (fill each node's slots in order, the default) or
// by node (round robin over the nodes).
package mapping

import (
	"errors"
	"fmt"
	"strings"

	"gompi/rte/hostfile"
)

// ErrNoRoom is wrapped when the nodes cannot take the ranks.
var ErrNoRoom = errors.New("not enough slots")

// Policy is how ranks are spread.
type Policy int

const (
	BySlot Policy = iota // fill node 0's slots, then node 1's, ...
	ByNode               // rank r on node r mod n, skipping full nodes
)

func (p Policy) String() string {
	if p == ByNode {
		return "node"
	}
	return "slot"
}

// ParsePolicy reads a --map-by value.
func ParsePolicy(s string) (Policy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "slot", "":
		return BySlot, nil
	case "node":
		return ByNode, nil
	}
	return 0, fmt.Errorf("mapping: --map-by %q: want slot or node", s)
}

// Map is where every rank runs.
type Map struct {
	// Nodes are all nodes of the job, in hostfile order, whether or not
	// they got ranks.
	Nodes []string
	// RankNode[r] is the node of rank r.
	RankNode []string
}

// Ranks returns the ranks placed on node, in order.
func (m Map) Ranks(node string) []int {
	var out []int
	for r, n := range m.RankNode {
		if n == node {
			out = append(out, r)
		}
	}
	return out
}

// Place maps np ranks onto nodes. Without oversubscribe, a node takes at
// most its slots; with it, ranks beyond the slots go round robin over the
// nodes, up to each node's max_slots when one is set.
func Place(nodes []hostfile.Node, np int, policy Policy, oversubscribe bool) (Map, error) {
	if np < 1 {
		return Map{}, fmt.Errorf("mapping: -np %d: want at least 1 rank", np)
	}
	if len(nodes) == 0 {
		return Map{}, fmt.Errorf("mapping: no nodes to place %d ranks on", np)
	}
	m := Map{RankNode: make([]string, 0, np)}
	used := make([]int, len(nodes))
	total := 0
	for _, n := range nodes {
		m.Nodes = append(m.Nodes, n.Name)
		total += n.Slots
	}
	put := func(i int) {
		used[i]++
		m.RankNode = append(m.RankNode, nodes[i].Name)
	}
	// Phase one: the ranks that fit in the slots.
	inSlots := min(np, total)
	switch policy {
	case BySlot:
		for i := 0; i < len(nodes) && len(m.RankNode) < inSlots; i++ {
			for used[i] < nodes[i].Slots && len(m.RankNode) < inSlots {
				put(i)
			}
		}
	case ByNode:
		for len(m.RankNode) < inSlots {
			for i := range nodes {
				if used[i] < nodes[i].Slots && len(m.RankNode) < inSlots {
					put(i)
				}
			}
		}
	default:
		return Map{}, fmt.Errorf("mapping: unknown policy %d", policy)
	}
	if np == len(m.RankNode) {
		return m, nil
	}
	if !oversubscribe {
		return Map{}, fmt.Errorf("mapping: %w: %d ranks asked for (-np %d) but the nodes have %d slots (%s); add nodes or slots (--host a:4, a hostfile with slots=N), lower -np, or allow more ranks than slots with --oversubscribe",
			ErrNoRoom, np, np, total, describe(nodes))
	}
	// Phase two: oversubscribe round robin, within max_slots.
	for len(m.RankNode) < np {
		placed := false
		for i := range nodes {
			if len(m.RankNode) == np {
				break
			}
			if nodes[i].MaxSlots > 0 && used[i] >= nodes[i].MaxSlots {
				continue
			}
			put(i)
			placed = true
		}
		if !placed {
			return Map{}, fmt.Errorf("mapping: %w: %d ranks asked for but every node is at its max_slots (%s); lower -np or raise max_slots",
				ErrNoRoom, np, describe(nodes))
		}
	}
	return m, nil
}

func describe(nodes []hostfile.Node) string {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = fmt.Sprintf("%s:%d", n.Name, n.Slots)
		if n.MaxSlots > 0 {
			parts[i] += fmt.Sprintf(" max %d", n.MaxSlots)
		}
	}
	return strings.Join(parts, ", ")
}
