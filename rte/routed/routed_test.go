package routed

import (
	"fmt"
	"slices"
	"testing"

	pb "gompi/rte/control/proto"
)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("n%d", i+1)
	}
	return out
}

func TestShape(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n, radix int
		node     string
		parent   string
		children []string
		depth    int
	}{
		{"star", 5, 0, "n3", Root, nil, 1},
		{"star: gompirun's children", 3, 0, Root, "", []string{"n1", "n2", "n3"}, 1},
		{"radix above the nodes is a star", 4, 8, "n4", Root, nil, 1},
		{"binary: top", 7, 2, "n1", Root, []string{"n3", "n4"}, 3},
		{"binary: gompirun", 7, 2, Root, "", []string{"n1", "n2"}, 3},
		{"binary: second level", 7, 2, "n3", "n1", []string{"n7"}, 3},
		{"binary: leaf", 7, 2, "n6", "n2", nil, 3},
		{"chain", 4, 1, "n4", "n3", nil, 4},
		{"128 by 8: gompirun", 128, 8, Root, "", names(8), 3},
		{"128 by 8: deep", 128, 8, "n128", "n15", nil, 3},
		{"128 by 8: interior", 128, 8, "n9", "n1", []string{"n73", "n74", "n75", "n76", "n77", "n78", "n79", "n80"}, 3},
		{"unknown node", 3, 2, "zz", Root, nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(names(tc.n), tc.radix)
			if tc.node != Root {
				if p := tr.Parent(tc.node); p != tc.parent {
					t.Errorf("Parent(%s) = %q, want %q", tc.node, p, tc.parent)
				}
			}
			if c := tr.Children(tc.node); !slices.Equal(c, tc.children) {
				t.Errorf("Children(%q) = %v, want %v", tc.node, c, tc.children)
			}
			if d := tr.Depth(); d != tc.depth {
				t.Errorf("Depth = %d, want %d", d, tc.depth)
			}
		})
	}
}

// Every node is its parent's child exactly once, no daemon has more than
// radix children, and every ancestor chain ends at gompirun within the
// depth: the tree is a tree, for every size and radix.
func TestShapeIsATree(t *testing.T) {
	for _, radix := range []int{0, 1, 2, 3, 8, 32} {
		for _, n := range []int{1, 2, 7, 8, 9, 64, 65, 128} {
			tr := New(names(n), radix)
			seen := map[string]int{}
			for _, p := range append([]string{Root}, names(n)...) {
				kids := tr.Children(p)
				if radix > 0 && len(kids) > radix {
					t.Errorf("radix %d, %d nodes: %q has %d children", radix, n, p, len(kids))
				}
				for _, c := range kids {
					seen[c]++
					if tr.Parent(c) != p {
						t.Errorf("radix %d, %d nodes: %s is a child of %q whose parent is %q", radix, n, c, p, tr.Parent(c))
					}
				}
			}
			for _, c := range names(n) {
				if seen[c] != 1 {
					t.Errorf("radix %d, %d nodes: %s is a child %d times", radix, n, c, seen[c])
				}
				if a := tr.Ancestors(c); a[len(a)-1] != Root || len(a) > tr.Depth() {
					t.Errorf("radix %d, %d nodes: ancestors of %s: %v (depth %d)", radix, n, c, a, tr.Depth())
				}
			}
		}
	}
}

func TestTable(t *testing.T) {
	tb := NewTable()
	tb.Learn("c1", "c1")
	tb.Learn("g1", "c1")
	tb.Learn("g2", "c1")
	tb.Learn("c2", "c2")
	by, rest := tb.Split([]string{"g2", "me", "c2", "g1", "far"})
	if !slices.Equal(by["c1"], []string{"g2", "g1"}) || !slices.Equal(by["c2"], []string{"c2"}) || !slices.Equal(rest, []string{"me", "far"}) {
		t.Errorf("Split = %v, %v", by, rest)
	}
	if b := tb.Below("c1"); !slices.Equal(b, []string{"c1", "g1", "g2"}) {
		t.Errorf("Below(c1) = %v", b)
	}
	// A grandchild that attached again elsewhere is learned there.
	tb.Learn("g2", "c2")
	if gone := tb.Forget("c1"); !slices.Equal(gone, []string{"c1", "g1"}) {
		t.Errorf("Forget(c1) = %v, want c1 first", gone)
	}
	if b := tb.Below(""); !slices.Equal(b, []string{"c2", "g2"}) {
		t.Errorf("Below = %v", b)
	}
	if _, ok := tb.Via("g1"); ok {
		t.Error("g1 still has a route")
	}
}

func TestCounter(t *testing.T) {
	var c Counter
	m := &pb.HNPMessage{Seq: 7, All: true, Body: &pb.HNPMessage_Shutdown{Shutdown: &pb.Shutdown{}}}
	c.Down(m)
	c.Down(m)
	c.Up(&pb.DaemonMessage{Origin: "n1", Body: &pb.DaemonMessage_Fence{Fence: &pb.FenceContribution{Seq: 1}}})
	c.Up(&pb.DaemonMessage{Body: &pb.DaemonMessage_Heartbeat{Heartbeat: &pb.Heartbeat{Ack: 3}}})
	s := c.Stats()
	if s.MsgsDown != 2 || s.MsgsUp != 1 || s.BytesDown == 0 || s.BytesUp == 0 {
		t.Errorf("stats %v: heartbeats are counted by kind only", s)
	}
	if s.KindsDown["shutdown"] != 2 || s.KindsUp["fence"] != 1 || s.KindsUp["heartbeat"] != 1 {
		t.Errorf("kinds %v, %v", s.KindsUp, s.KindsDown)
	}
	if k := Kind(&pb.HNPMessage{}); k != "none" {
		t.Errorf("Kind of an empty message: %q", k)
	}
}
