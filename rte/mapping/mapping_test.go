package mapping

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"gompi/rte/hostfile"
)

func TestPlace(t *testing.T) {
	two := []hostfile.Node{{Name: "a", Slots: 2}, {Name: "b", Slots: 2}}
	uneven := []hostfile.Node{{Name: "a", Slots: 3}, {Name: "b", Slots: 1}, {Name: "c", Slots: 2}}
	capped := []hostfile.Node{{Name: "a", Slots: 1, MaxSlots: 2}, {Name: "b", Slots: 1}}
	tests := []struct {
		name   string
		nodes  []hostfile.Node
		np     int
		policy Policy
		over   bool
		want   string // nodes of ranks 0.. joined by spaces
		err    string
	}{
		{name: "slot fills in order", nodes: two, np: 4, want: "a a b b"},
		{name: "slot partial", nodes: two, np: 3, want: "a a b"},
		{name: "slot one", nodes: two, np: 1, want: "a"},
		{name: "node round robin", nodes: two, np: 4, policy: ByNode, want: "a b a b"},
		{name: "node partial", nodes: two, np: 3, policy: ByNode, want: "a b a"},
		{name: "node skips full", nodes: uneven, np: 6, policy: ByNode, want: "a b c a c a"},
		{name: "slot uneven", nodes: uneven, np: 5, want: "a a a b c"},
		{name: "too many", nodes: two, np: 5, err: "5 ranks asked for (-np 5) but the nodes have 4 slots (a:2, b:2)"},
		{name: "oversubscribe", nodes: two, np: 6, over: true, want: "a a b b a b"},
		{name: "oversubscribe by node", nodes: two, np: 5, policy: ByNode, over: true, want: "a b a b a"},
		{name: "oversubscribe within max", nodes: capped, np: 4, over: true, want: "a b a b"},
		{name: "oversubscribe max reached", nodes: []hostfile.Node{{Name: "a", Slots: 1, MaxSlots: 2}}, np: 3, over: true, err: "max_slots"},
		{name: "zero ranks", nodes: two, np: 0, err: "want at least 1 rank"},
		{name: "no nodes", np: 1, err: "no nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Place(tt.nodes, tt.np, tt.policy, tt.over)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(m.RankNode, " "); got != tt.want {
				t.Errorf("placed %q, want %q", got, tt.want)
			}
			var names []string
			for _, n := range tt.nodes {
				names = append(names, n.Name)
			}
			if !slices.Equal(m.Nodes, names) {
				t.Errorf("nodes %q, want %q", m.Nodes, names)
			}
		})
	}
}

func TestNoRoomIs(t *testing.T) {
	_, err := Place([]hostfile.Node{{Name: "a", Slots: 1}}, 2, BySlot, false)
	if !errors.Is(err, ErrNoRoom) || !strings.Contains(err.Error(), "--oversubscribe") {
		t.Errorf("error %v: want ErrNoRoom suggesting --oversubscribe", err)
	}
}

func TestRanks(t *testing.T) {
	m := Map{Nodes: []string{"a", "b", "c"}, RankNode: []string{"a", "b", "a"}}
	if got := m.Ranks("a"); !slices.Equal(got, []int{0, 2}) {
		t.Errorf("Ranks(a) = %v", got)
	}
	if got := m.Ranks("c"); len(got) != 0 {
		t.Errorf("Ranks(c) = %v", got)
	}
}

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]Policy{"slot": BySlot, "": BySlot, "NODE": ByNode} {
		if p, err := ParsePolicy(in); err != nil || p != want {
			t.Errorf("ParsePolicy(%q) = %v, %v", in, p, err)
		}
	}
	if _, err := ParsePolicy("core"); err == nil {
		t.Error("ParsePolicy(core) did not fail")
	}
}
