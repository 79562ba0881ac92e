package cr

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// What gompi-restart -np M checks before it repartitions a sequence: the
// layout each rank's app.state records, read from its header alone.

// ValueLayout is how one saved value is spread over the ranks.
type ValueLayout struct {
	Name string
	// Mode is "plain" (Protect), "distributed", "replicated" or "func".
	Mode string
	// A distributed array's run: elements Lo..Lo+Count-1 of Global,
	// Elem bytes each.
	Global, Lo, Count, Elem int64
}

// Layout is what one rank's app.state holds.
type Layout struct {
	Rank      int
	SafePoint uint64
	Values    []ValueLayout
}

// ReadLayout reads the layout of an app.state file (its header only).
func ReadLayout(path string) (Layout, error) {
	s, err := readSource(path)
	if err != nil {
		return Layout{}, fmt.Errorf("cr: %w", err)
	}
	l := Layout{Rank: s.hdr.Rank, SafePoint: s.hdr.SafePoint}
	for i, name := range s.hdr.Names {
		d := s.hdr.dist(i)
		l.Values = append(l.Values, ValueLayout{Name: name, Mode: modeWord(d.Mode), Global: d.Global, Lo: d.Lo, Count: d.Count, Elem: d.Elem})
	}
	return l, nil
}

func modeWord(m byte) string {
	return [...]string{"plain", "distributed", "replicated", "func"}[m]
}

// CheckRedistributable says why the state the ranks saved (layouts[k] is
// rank k's) cannot be restarted on another rank count, nil when it can:
// every rank saved at the same safe point the same values, none of them
// plain (Protect), and each distributed array's runs tile it exactly.
func CheckRedistributable(layouts []Layout) error {
	if len(layouts) == 0 {
		return fmt.Errorf("no rank's state")
	}
	names := func(l Layout) []string {
		var out []string
		for _, v := range l.Values {
			out = append(out, v.Name)
		}
		return out
	}
	first := layouts[0]
	for k, l := range layouts {
		if l.Rank != k || l.SafePoint != first.SafePoint || !slices.Equal(names(l), names(first)) {
			return fmt.Errorf("rank %d's state (saved by rank %d at safe point %d, values %q) does not match rank 0's (safe point %d, values %q)",
				k, l.Rank, l.SafePoint, names(l), first.SafePoint, names(first))
		}
	}
	var plain []string
	for i, v := range first.Values {
		switch v.Mode {
		case "plain":
			plain = append(plain, v.Name)
		case "distributed":
			if err := checkTiling(layouts, i); err != nil {
				return err
			}
		}
	}
	if len(plain) > 0 {
		return fmt.Errorf("the program saved %s with cr.Protect, which says nothing of how a value is spread over the ranks: declare each with cr.ProtectDistributed, cr.ProtectReplicated or cr.ProtectFunc to restart on another rank count", quoteList(plain))
	}
	return nil
}

// checkTiling checks that the runs of distributed value i cover its array
// once, with one element size.
func checkTiling(layouts []Layout, i int) error {
	type run struct{ lo, n int64 }
	v0 := layouts[0].Values[i]
	runs := make([]run, 0, len(layouts))
	for k, l := range layouts {
		v := l.Values[i]
		if v.Mode != "distributed" || v.Global != v0.Global || v.Elem != v0.Elem {
			return fmt.Errorf("%q: rank %d saved it as %s of %d elements of %d bytes, rank 0 as %s of %d elements of %d bytes", v.Name, k, v.Mode, v.Global, v.Elem, v0.Mode, v0.Global, v0.Elem)
		}
		if v.Count > 0 {
			runs = append(runs, run{v.Lo, v.Count})
		}
	}
	sort.Slice(runs, func(a, b int) bool { return runs[a].lo < runs[b].lo })
	var next int64
	for _, r := range runs {
		if r.lo != next {
			return fmt.Errorf("%q: the ranks' runs leave elements %d to %d unsaved or save them twice", v0.Name, min(next, r.lo), max(next, r.lo)-1)
		}
		next = r.lo + r.n
	}
	if next != v0.Global {
		return fmt.Errorf("%q: the ranks' runs cover elements 0 to %d of %d", v0.Name, next-1, v0.Global)
	}
	return nil
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
