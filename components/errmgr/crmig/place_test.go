package crmig

import (
	"maps"
	"testing"

	"gompi/frameworks/errmgr"
)

// cluster: n1 runs ranks 0 and 1, n2 ranks 2 and 3, n3 nothing, n4 rank
// 4, and n5 (rank 5) is down.
var cluster = []errmgr.NodeInfo{
	{Name: "n1", Ranks: []int{0, 1}, Up: true},
	{Name: "n2", Ranks: []int{2, 3}, Up: true},
	{Name: "n3", Up: true},
	{Name: "n4", Ranks: []int{4}, Up: true},
	{Name: "n5", Ranks: []int{5}, Up: false},
}

func wish(rank int, host string, near int) errmgr.MigrateWish {
	return errmgr.MigrateWish{Rank: rank, Host: host, Near: near}
}

func TestPlace(t *testing.T) {
	twoNodes := []errmgr.NodeInfo{{Name: "n1", Ranks: []int{0}, Up: true}, {Name: "n2", Ranks: []int{1}, Up: true}}
	tests := []struct {
		name  string
		nodes []errmgr.NodeInfo // cluster when nil
		p     errmgr.Prediction
		want  map[int]string
		err   string
	}{
		// Least loaded, ties by hostfile order.
		{name: "off a node", p: errmgr.Prediction{Nodes: []string{"n2"}},
			want: map[int]string{2: "n3", 3: "n3"}},
		{name: "a rank leaves its node, which others may use", p: errmgr.Prediction{Ranks: []int{0}},
			want: map[int]string{0: "n3"}},
		{name: "two nodes spread over the rest", p: errmgr.Prediction{Nodes: []string{"n1", "n2"}},
			want: map[int]string{0: "n3", 1: "n3", 2: "n4", 3: "n3"}},
		{name: "ranks and nodes together", p: errmgr.Prediction{Ranks: []int{4}, Nodes: []string{"n2"}},
			want: map[int]string{2: "n3", 3: "n4", 4: "n3"}},
		// Onto: least loaded of the suggested nodes, ties in their order.
		{name: "onto, ties in onto order", p: errmgr.Prediction{Nodes: []string{"n2"}, Onto: []string{"n4", "n3"}},
			want: map[int]string{2: "n3", 3: "n4"}},
		{name: "onto repeated", p: errmgr.Prediction{Nodes: []string{"n2"}, Onto: []string{"n4", "n4", "n3"}},
			want: map[int]string{2: "n3", 3: "n4"}},
		{name: "onto one node takes all", p: errmgr.Prediction{Nodes: []string{"n2"}, Onto: []string{"n1"}},
			want: map[int]string{2: "n1", 3: "n1"}},
		{name: "onto unknown", p: errmgr.Prediction{Nodes: []string{"n2"}, Onto: []string{"n9"}},
			err: "suggested destination n9, which is not a node of the job; usable nodes: n1, n3, n4"},
		{name: "onto predicted", p: errmgr.Prediction{Nodes: []string{"n2"}, Onto: []string{"n3", "n2"}},
			err: "suggested destination n2, which is predicted to fail; usable nodes: n1, n3, n4"},
		{name: "onto down", p: errmgr.Prediction{Nodes: []string{"n2"}, Onto: []string{"n5"}},
			err: "suggested destination n5, which is not up; usable nodes: n1, n3, n4"},
		{name: "onto only its own node", p: errmgr.Prediction{Ranks: []int{0}, Onto: []string{"n1"}},
			err: "no node left for rank 0: the only suggested destination, n1, is the node it runs on (suggest another, or none to let crmig choose)"},
		// Wishes.
		{name: "host wish", p: errmgr.Prediction{Nodes: []string{"n2"}, Wishes: []errmgr.MigrateWish{wish(2, "n4", -1)}},
			want: map[int]string{2: "n4", 3: "n3"}},
		{name: "host wish beats onto", p: errmgr.Prediction{Onto: []string{"n3"}, Wishes: []errmgr.MigrateWish{wish(2, "n1", 4)}},
			want: map[int]string{2: "n1"}},
		{name: "host wish unknown", p: errmgr.Prediction{Nodes: []string{"n2"}, Wishes: []errmgr.MigrateWish{wish(2, "n9", -1)}},
			err: "rank 2 asks for node n9, which is not a node of the job; usable nodes: n1, n3, n4"},
		{name: "host wish predicted", p: errmgr.Prediction{Nodes: []string{"n2"}, Wishes: []errmgr.MigrateWish{wish(2, "n2", -1)}},
			err: "rank 2 asks for node n2, which is predicted to fail; usable nodes: n1, n3, n4"},
		{name: "host wish down", p: errmgr.Prediction{Wishes: []errmgr.MigrateWish{wish(2, "n5", -1)}},
			err: "rank 2 asks for node n5, which is not up; usable nodes: n1, n2, n3, n4"},
		{name: "host wish own node", p: errmgr.Prediction{Wishes: []errmgr.MigrateWish{wish(0, "n1", -1)}},
			err: "rank 0 asks for node n1, where it runs already: nothing to move"},
		{name: "near a rank that stays", p: errmgr.Prediction{Nodes: []string{"n2"}, Wishes: []errmgr.MigrateWish{wish(2, "", 4)}},
			want: map[int]string{2: "n4", 3: "n3"}},
		{name: "near a rank that moves later", p: errmgr.Prediction{Nodes: []string{"n2"}, Onto: []string{"n1", "n4"},
			Wishes: []errmgr.MigrateWish{wish(2, "", 3)}},
			// 3 is placed first (n4, the least loaded), then 2 joins it.
			want: map[int]string{2: "n4", 3: "n4"}},
		{name: "near a chain", p: errmgr.Prediction{Wishes: []errmgr.MigrateWish{wish(0, "", 2), wish(2, "", 4)}},
			want: map[int]string{0: "n4", 2: "n4"}},
		{name: "near, a circle", p: errmgr.Prediction{Wishes: []errmgr.MigrateWish{wish(2, "", 3), wish(3, "", 2)}},
			err: "the ranks' wishes to go near each other go round in a circle (2 -> 3 -> 2): no node to go to"},
		{name: "near itself", p: errmgr.Prediction{Wishes: []errmgr.MigrateWish{wish(2, "", 2)}},
			err: "rank 2 asks to go near itself"},
		{name: "near an unknown rank", p: errmgr.Prediction{Wishes: []errmgr.MigrateWish{wish(2, "", 9)}},
			err: "rank 2 asks to go near rank 9, which is not a rank of the job (it has 6 ranks: 0 to 5)"},
		{name: "near a rank on its own node", p: errmgr.Prediction{Wishes: []errmgr.MigrateWish{wish(0, "", 1)}},
			err: "rank 0 asks to go near rank 1, on node n1, where it runs already: nothing to move"},
		{name: "near a rank on a node down", p: errmgr.Prediction{Wishes: []errmgr.MigrateWish{wish(0, "", 5)}},
			err: "rank 0 asks to go near rank 5, on node n5, which is not up; usable nodes: n1, n2, n3, n4"},
		{name: "near a rank, others placed by load", p: errmgr.Prediction{Ranks: []int{4}, Nodes: []string{"n1"}, Wishes: []errmgr.MigrateWish{wish(4, "", 2)}},
			want: map[int]string{0: "n3", 1: "n4", 4: "n2"}},
		{name: "off-node wish", p: errmgr.Prediction{Wishes: []errmgr.MigrateWish{{Rank: 4, Near: -1, OffNode: true}}},
			want: map[int]string{4: "n3"}},
		{name: "two wishes for a rank", p: errmgr.Prediction{Wishes: []errmgr.MigrateWish{wish(2, "n3", -1), wish(2, "n4", -1)}},
			err: "rank 2 has more than one migration wish: give one"},
		{name: "wish of an unknown rank", p: errmgr.Prediction{Wishes: []errmgr.MigrateWish{wish(8, "n3", -1)}},
			err: "rank 8 is not a rank of the job (it has 6 ranks: 0 to 5)"},
		// What cannot move.
		{name: "unknown rank", p: errmgr.Prediction{Ranks: []int{7}},
			err: "rank 7 is not a rank of the job (it has 6 ranks: 0 to 5)"},
		{name: "unknown rank, ranks not contiguous", nodes: []errmgr.NodeInfo{{Name: "a", Ranks: []int{0, 2}, Up: true}},
			p: errmgr.Prediction{Ranks: []int{1}}, err: "rank 1 is not a rank of the job (it has 2 ranks: 0, 2)"},
		{name: "unknown node", p: errmgr.Prediction{Nodes: []string{"n9"}},
			err: "node n9 is not a node of the job (its nodes: n1, n2, n3, n4, n5)"},
		{name: "node without ranks", p: errmgr.Prediction{Nodes: []string{"n3"}},
			err: "node n3 runs no ranks: nothing to move"},
		{name: "nodes without ranks", nodes: []errmgr.NodeInfo{{Name: "a", Up: true}, {Name: "b", Up: true}, {Name: "c", Ranks: []int{0}, Up: true}},
			p: errmgr.Prediction{Nodes: []string{"a", "b"}}, err: "nodes a, b run no ranks: nothing to move"},
		{name: "empty prediction", p: errmgr.Prediction{},
			err: "the prediction names no rank and no node: nothing to move"},
		{name: "rank on a node down", p: errmgr.Prediction{Ranks: []int{5}},
			err: "rank 5 runs on node n5, which is not up: its process is lost with the node and cannot be saved (autor restarts it from the last checkpoint)"},
		{name: "a node down predicted", p: errmgr.Prediction{Nodes: []string{"n5"}},
			err: "rank 5 runs on node n5, which is not up: its process is lost with the node and cannot be saved (autor restarts it from the last checkpoint)"},
		{name: "no node left", nodes: twoNodes, p: errmgr.Prediction{Nodes: []string{"n1", "n2"}},
			err: "no node left for rank 0: the job's nodes are n1 (where it runs, predicted to fail), n2 (predicted to fail)"},
		{name: "no node left, one node", nodes: twoNodes[:1], p: errmgr.Prediction{Ranks: []int{0}},
			err: "no node left for rank 0: the job's nodes are n1 (where it runs)"},
		{name: "no node left, the other down", nodes: []errmgr.NodeInfo{twoNodes[0], {Name: "n2", Ranks: []int{1}}},
			p: errmgr.Prediction{Ranks: []int{0}}, err: "no node left for rank 0: the job's nodes are n1 (where it runs), n2 (not up)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := tt.nodes
			if nodes == nil {
				nodes = cluster
			}
			got, err := Place(nodes, tt.p)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("Place: %v (placed %v), want error\n%s", err, got, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Place: %v", err)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("Place = %v, want %v", got, tt.want)
			}
		})
	}
}

// The same prediction places the same way every time (map iteration
// order must not leak into the placement).
func TestPlaceDeterministic(t *testing.T) {
	p := errmgr.Prediction{Nodes: []string{"n1", "n2"}, Wishes: []errmgr.MigrateWish{wish(3, "", 0)}}
	first, err := Place(cluster, p)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		got, err := Place(cluster, p)
		if err != nil || !maps.Equal(got, first) {
			t.Fatalf("Place = %v, %v; first time %v", got, err, first)
		}
	}
}
