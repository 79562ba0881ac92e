package hnp

import (
	"reflect"
	"strings"
	"testing"

	"gompi/frameworks/errmgr"
	"gompi/rte/mapping"
)

func TestReplan(t *testing.T) {
	two := mapping.Map{Nodes: []string{"n1", "n2"}, RankNode: []string{"n1", "n1", "n2", "n2"}}
	three := mapping.Map{Nodes: []string{"n1", "n2", "n3"}, RankNode: []string{"n1", "n1", "n2", "n2", "n3", "n3"}}
	one := mapping.Map{Nodes: []string{"n1"}, RankNode: []string{"n1", "n1"}}
	tests := []struct {
		name    string
		m       mapping.Map
		plan    errmgr.Recovery
		want    mapping.Map
		wantErr string
	}{
		{"rank moves off its node", two, errmgr.Recovery{Lost: []int{2}},
			mapping.Map{Nodes: []string{"n1", "n2"}, RankNode: []string{"n1", "n1", "n1", "n2"}}, ""},
		{"rank stays when allowed", two, errmgr.Recovery{Lost: []int{2}, SameNode: true},
			mapping.Map{Nodes: []string{"n1", "n2"}, RankNode: []string{"n1", "n1", "n2", "n2"}}, ""},
		{"node lost: its ranks spread over the least loaded", three, errmgr.Recovery{Lost: []int{2, 3}, LostNodes: []string{"n2"}},
			mapping.Map{Nodes: []string{"n1", "n3"}, RankNode: []string{"n1", "n1", "n1", "n3", "n3", "n3"}}, ""},
		{"single node: the rank restarts where it was", one, errmgr.Recovery{Lost: []int{1}},
			mapping.Map{Nodes: []string{"n1"}, RankNode: []string{"n1", "n1"}}, ""},
		{"every node lost", one, errmgr.Recovery{Lost: []int{0, 1}, LostNodes: []string{"n1"}}, mapping.Map{}, "every node of the job was lost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := replan(tt.m, tt.plan)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("replan = %+v, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("replan = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
