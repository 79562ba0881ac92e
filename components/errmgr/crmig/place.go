package crmig

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gompi/frameworks/errmgr"
)

// Place decides where the ranks of prediction p go, given the job's nodes
// (in hostfile order). The ranks that move are p.Ranks, every rank of
// p.Nodes, and every rank with a wish. No rank goes to a node predicted to
// fail or not up. Taken in ascending order, each moving rank goes to:
//
//   - its wish's Host;
//   - else, with a wish Near ≥ 0, the node of that rank (its destination
//     when it moves too);
//   - else the least loaded of p.Onto when given, or of every usable
//     node, its own node excepted: the load of a node is the ranks staying
//     there plus those placed there already; ties go to the node first in
//     p.Onto, or in nodes.
//
// The same input gives the same placement. Errors say what in p cannot be
// done and which nodes could be used instead.
func Place(nodes []errmgr.NodeInfo, p errmgr.Prediction) (map[int]string, error) {
	pl := planner{
		byName:   map[string]*errmgr.NodeInfo{},
		home:     map[int]string{},
		excluded: map[string]string{},
		moving:   map[int]bool{},
		wishes:   map[int]errmgr.MigrateWish{},
		load:     map[string]int{},
		dest:     map[int]string{},
		placing:  map[int]bool{},
	}
	pl.nodes = nodes
	for i := range nodes {
		n := &nodes[i]
		pl.byName[n.Name] = n
		for _, r := range n.Ranks {
			pl.home[r] = n.Name
		}
		if !n.Up {
			pl.excluded[n.Name] = "not up"
		}
	}
	for _, name := range p.Nodes {
		n, ok := pl.byName[name]
		if !ok {
			return nil, fmt.Errorf("node %s is not a node of the job (its nodes: %s)", name, nameList(pl.allNames()))
		}
		if n.Up {
			pl.excluded[name] = "predicted to fail"
		}
	}

	for _, r := range p.Ranks {
		if err := pl.isRank(r); err != nil {
			return nil, err
		}
		pl.moving[r] = true
	}
	for _, name := range p.Nodes {
		for _, r := range pl.byName[name].Ranks {
			pl.moving[r] = true
		}
	}
	for _, w := range p.Wishes {
		if err := pl.isRank(w.Rank); err != nil {
			return nil, err
		}
		if _, dup := pl.wishes[w.Rank]; dup {
			return nil, fmt.Errorf("rank %d has more than one migration wish: give one", w.Rank)
		}
		pl.wishes[w.Rank] = w
		pl.moving[w.Rank] = true
	}
	if len(pl.moving) == 0 {
		switch len(p.Nodes) {
		case 0:
			return nil, fmt.Errorf("the prediction names no rank and no node: nothing to move")
		case 1:
			return nil, fmt.Errorf("node %s runs no ranks: nothing to move", p.Nodes[0])
		default:
			return nil, fmt.Errorf("nodes %s run no ranks: nothing to move", nameList(p.Nodes))
		}
	}
	order := make([]int, 0, len(pl.moving))
	for r := range pl.moving {
		order = append(order, r)
	}
	slices.Sort(order)
	for _, r := range order {
		if n := pl.home[r]; !pl.byName[n].Up {
			return nil, fmt.Errorf("rank %d runs on node %s, which is not up: its process is lost with the node and cannot be saved (autor restarts it from the last checkpoint)", r, n)
		}
	}

	for _, n := range nodes {
		for _, r := range n.Ranks {
			if !pl.moving[r] {
				pl.load[n.Name]++
			}
		}
	}
	seen := map[string]bool{}
	for _, name := range p.Onto {
		if seen[name] {
			continue
		}
		seen[name] = true
		if err := pl.usable(name, "suggested destination "+name); err != nil {
			return nil, err
		}
		pl.onto = append(pl.onto, name)
	}

	for _, r := range order {
		if err := pl.place(r, nil); err != nil {
			return nil, err
		}
	}
	return pl.dest, nil
}

// planner is the state of one Place.
type planner struct {
	nodes    []errmgr.NodeInfo
	byName   map[string]*errmgr.NodeInfo
	home     map[int]string             // rank → node it runs on
	excluded map[string]string          // node → why no rank may go there
	moving   map[int]bool               // ranks to move
	wishes   map[int]errmgr.MigrateWish // rank → its wish
	onto     []string                   // suggested destinations, checked
	load     map[string]int             // node → ranks staying or placed there
	dest     map[int]string             // rank → destination, as decided
	placing  map[int]bool               // ranks being placed (a Near chain)
}

func (pl *planner) allNames() []string {
	out := make([]string, len(pl.nodes))
	for i, n := range pl.nodes {
		out[i] = n.Name
	}
	return out
}

func (pl *planner) isRank(r int) error {
	if _, ok := pl.home[r]; ok {
		return nil
	}
	return fmt.Errorf("rank %d is not a rank of the job (it has %d ranks: %s)", r, len(pl.home), pl.rankRange())
}

func (pl *planner) rankRange() string {
	ranks := make([]int, 0, len(pl.home))
	for r := range pl.home {
		ranks = append(ranks, r)
	}
	slices.Sort(ranks)
	switch {
	case len(ranks) == 0:
		return "none"
	case ranks[len(ranks)-1]-ranks[0] == len(ranks)-1:
		return fmt.Sprintf("%d to %d", ranks[0], ranks[len(ranks)-1])
	}
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = strconv.Itoa(r)
	}
	return strings.Join(s, ", ")
}

// usableNames are the nodes a rank may go to, in hostfile order.
func (pl *planner) usableNames() []string {
	var out []string
	for _, n := range pl.nodes {
		if _, bad := pl.excluded[n.Name]; !bad {
			out = append(out, n.Name)
		}
	}
	return out
}

// usable checks that ranks may go to node; what says who asks for it.
func (pl *planner) usable(node, what string) error {
	if _, ok := pl.byName[node]; !ok {
		return fmt.Errorf("%s, which is not a node of the job; usable nodes: %s", what, nameList(pl.usableNames()))
	}
	if why, bad := pl.excluded[node]; bad {
		return fmt.Errorf("%s, which is %s; usable nodes: %s", what, why, nameList(pl.usableNames()))
	}
	return nil
}

// place decides rank r's destination; chain is the Near wishes that led
// to it, to tell a circle of wishes.
func (pl *planner) place(r int, chain []int) error {
	if _, done := pl.dest[r]; done {
		return nil
	}
	if pl.placing[r] {
		circle := make([]string, 0, len(chain)+1)
		for _, c := range append(chain, r) {
			circle = append(circle, strconv.Itoa(c))
		}
		return fmt.Errorf("the ranks' wishes to go near each other go round in a circle (%s): no node to go to", strings.Join(circle, " -> "))
	}
	pl.placing[r] = true
	home := pl.home[r]
	w, wished := pl.wishes[r]
	var to string
	switch {
	case wished && w.Host != "":
		to = w.Host
		if err := pl.usable(to, fmt.Sprintf("rank %d asks for node %s", r, to)); err != nil {
			return err
		}
		if to == home {
			return fmt.Errorf("rank %d asks for node %s, where it runs already: nothing to move", r, to)
		}
	case wished && w.Near >= 0:
		q := w.Near
		if q == r {
			return fmt.Errorf("rank %d asks to go near itself", r)
		}
		if _, ok := pl.home[q]; !ok {
			return fmt.Errorf("rank %d asks to go near rank %d, which is not a rank of the job (it has %d ranks: %s)", r, q, len(pl.home), pl.rankRange())
		}
		to = pl.home[q]
		if pl.moving[q] {
			if err := pl.place(q, append(chain, r)); err != nil {
				return err
			}
			to = pl.dest[q]
		}
		if err := pl.usable(to, fmt.Sprintf("rank %d asks to go near rank %d, on node %s", r, q, to)); err != nil {
			return err
		}
		if to == home {
			return fmt.Errorf("rank %d asks to go near rank %d, on node %s, where it runs already: nothing to move", r, q, to)
		}
	default:
		cands := pl.onto
		if len(cands) == 0 {
			cands = pl.usableNames()
		}
		best := -1
		for i, n := range cands {
			if n != home && (best < 0 || pl.load[n] < pl.load[cands[best]]) {
				best = i
			}
		}
		if best < 0 {
			return pl.noNode(r)
		}
		to = cands[best]
	}
	pl.dest[r] = to
	pl.load[to]++
	return nil
}

// noNode says why no node is left for rank r.
func (pl *planner) noNode(r int) error {
	home := pl.home[r]
	if len(pl.onto) > 0 {
		return fmt.Errorf("no node left for rank %d: the only suggested destination, %s, is the node it runs on (suggest another, or none to let crmig choose)", r, home)
	}
	why := make([]string, len(pl.nodes))
	for i, n := range pl.nodes {
		reason := pl.excluded[n.Name]
		if n.Name == home {
			reason = strings.TrimSuffix("where it runs, "+reason, ", ")
		}
		why[i] = fmt.Sprintf("%s (%s)", n.Name, reason)
	}
	return fmt.Errorf("no node left for rank %d: the job's nodes are %s", r, strings.Join(why, ", "))
}

// nameList joins names for a message.
func nameList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
