package rollback

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	errmgrdefault "gompi/components/errmgr/default"
	"gompi/frameworks"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/errmgr/errmgrtest"
	"gompi/mca"
)

// twoNodes is 8 ranks on n1 (0-3) and n2 (4-7), both up.
func twoNodes() []errmgr.NodeInfo {
	return []errmgr.NodeInfo{{Name: "n1", Ranks: []int{0, 1, 2, 3}, Up: true}, {Name: "n2", Ranks: []int{4, 5, 6, 7}, Up: true}}
}

func threeNodes(downN3 bool) []errmgr.NodeInfo {
	return []errmgr.NodeInfo{{Name: "n1", Ranks: []int{0, 1, 2}, Up: true}, {Name: "n2", Ranks: []int{3, 4}, Up: true}, {Name: "n3", Ranks: []int{5, 6, 7}, Up: !downN3}}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name      string
		lost      []int
		lostNodes []string
		view      errmgr.RollbackView
		want      errmgr.Rollback
		why       string // a fall-back reason containing this
	}{
		{name: "a rank, restarted on its node, newest global",
			lost: []int{2}, view: errmgr.RollbackView{CRS: "self", Global: []int{0, 1, 2}, Nodes: twoNodes()},
			want: errmgr.Rollback{Seq: 2, Lost: []int{2}, Place: map[int]string{2: "n1"}}},
		{name: "duplicates and order of the lost set",
			lost: []int{5, 4, 5}, view: errmgr.RollbackView{CRS: "self", Global: []int{3}, Nodes: twoNodes()},
			want: errmgr.Rollback{Seq: 3, Lost: []int{4, 5}, Place: map[int]string{4: "n2", 5: "n2"}}},
		{name: "a node: its ranks go to the least loaded up node",
			lost: []int{5, 6, 7}, lostNodes: []string{"n3"}, view: errmgr.RollbackView{CRS: "self", Global: []int{1}, Nodes: threeNodes(false)},
			want: errmgr.Rollback{Seq: 1, Lost: []int{5, 6, 7}, Place: map[int]string{5: "n2", 6: "n1", 7: "n2"}, LostNodes: []string{"n3"}}},
		{name: "a node whose daemon is already seen down",
			lost: []int{4, 5, 6, 7}, lostNodes: []string{"n2"}, view: errmgr.RollbackView{CRS: "self", Global: []int{0}, Nodes: twoNodes()},
			want: errmgr.Rollback{Seq: 0, Lost: []int{4, 5, 6, 7}, Place: map[int]string{4: "n1", 5: "n1", 6: "n1", 7: "n1"}, LostNodes: []string{"n2"}}},
		{name: "the newest cached everywhere beats an older global one",
			lost: []int{1}, view: errmgr.RollbackView{CRS: "self", Global: []int{3}, Cached: map[string][]int{"n1": {3, 4}, "n2": {4}}, Nodes: twoNodes()},
			want: errmgr.Rollback{Seq: 4, Lost: []int{1}, Place: map[int]string{1: "n1"}}},
		{name: "a sequence one survivor's node lacks is not chosen",
			lost: []int{1}, view: errmgr.RollbackView{CRS: "self", Global: []int{3}, Cached: map[string][]int{"n1": {3, 4}, "n2": {3}}, Nodes: twoNodes()},
			want: errmgr.Rollback{Seq: 3, Lost: []int{1}, Place: map[int]string{1: "n1"}}},
		{name: "the lost ranks' new node counts too",
			lost: []int{5, 6, 7}, lostNodes: []string{"n3"}, view: errmgr.RollbackView{CRS: "self", Cached: map[string][]int{"n1": {2}, "n2": {2}, "n3": {2, 3}}, Nodes: threeNodes(true)},
			want: errmgr.Rollback{Seq: 2, Lost: []int{5, 6, 7}, Place: map[int]string{5: "n2", 6: "n1", 7: "n2"}, LostNodes: []string{"n3"}}},
		{name: "caches only, none common", lost: []int{1},
			view: errmgr.RollbackView{CRS: "self", Cached: map[string][]int{"n1": {4}, "n2": {3}}, Nodes: twoNodes()}, why: "no committed sequence is reachable"},
		{name: "crs criu", lost: []int{1}, view: errmgr.RollbackView{CRS: "criu", Global: []int{0}, Nodes: twoNodes()}, why: "crs criu"},
		{name: "nothing committed", lost: []int{1}, view: errmgr.RollbackView{CRS: "self", Nodes: twoNodes()}, why: "no committed sequence"},
		{name: "second failure", lost: []int{1}, view: errmgr.RollbackView{CRS: "self", Global: []int{0}, Nodes: twoNodes(), Rolling: true}, why: "during a rollback"},
		{name: "every rank lost", lost: []int{0, 1, 2, 3, 4, 5, 6, 7}, view: errmgr.RollbackView{CRS: "self", Global: []int{0}, Nodes: twoNodes()}, why: "every rank"},
		{name: "no node left", lost: []int{5, 6, 7}, lostNodes: []string{"n3"},
			view: errmgr.RollbackView{CRS: "self", Global: []int{0}, Nodes: []errmgr.NodeInfo{{Name: "n1", Ranks: []int{0, 1, 2, 3, 4}, Up: false}, {Name: "n3", Ranks: []int{5, 6, 7}}}}, why: "no node is up"},
		{name: "a node that ran nothing", lostNodes: []string{"n3"}, view: errmgr.RollbackView{CRS: "self", Global: []int{0}, Nodes: twoNodes()}, why: "no rank was lost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decide(8, tt.lost, tt.lostNodes, tt.view)
			if tt.why != "" {
				if !errors.Is(err, errFallBack) || !strings.Contains(err.Error(), tt.why) {
					t.Fatalf("got %+v, %v; want a fall-back saying %q", got, err, tt.why)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// job is a runtime of 8 ranks on two nodes; with rollback set it rolls
// back, recording what it was asked.
type job struct {
	view errmgr.RollbackView
	err  error // RollBack's answer
	got  []errmgr.Rollback
}

func (j *job) Size() int { return 8 }
func (j *job) RanksOf(node string) []int {
	for _, n := range j.view.Nodes {
		if n.Name == node {
			return n.Ranks
		}
	}
	return nil
}
func (j *job) NotifyFailed(context.Context, []int, string) error { return nil }

type rollbacker struct{ *job }

func (r rollbacker) RollbackView(context.Context) (errmgr.RollbackView, error) { return r.view, nil }
func (r rollbacker) RollBack(_ context.Context, rb errmgr.Rollback) error {
	r.got = append(r.got, rb)
	return r.err
}

func TestHandle(t *testing.T) {
	rankFault := errmgr.Fault{Kind: errmgr.ProcSignaled, Rank: 2, Node: "n1", Signal: 9}
	nodeFault := errmgr.Fault{Kind: errmgr.NodeLost, Rank: -1, Node: "n2"}
	self := errmgr.RollbackView{CRS: "self", Global: []int{0, 1}, Nodes: twoNodes()}
	tests := []struct {
		name    string
		limit   int
		plain   bool // a runtime without RollBack
		view    errmgr.RollbackView
		err     error
		faults  []errmgr.Fault
		want    []errmgr.Decision
		action  string // in the last status's actions
		handErr bool
	}{
		{name: "rank", limit: 5, view: self, faults: []errmgr.Fault{rankFault}, want: []errmgr.Decision{errmgr.Recovered},
			action: "rollback: rollback 1 of 5: survivors return to sequence 1 in place, rank 2 starts again on n1"},
		{name: "node", limit: 5, view: self, faults: []errmgr.Fault{nodeFault}, want: []errmgr.Decision{errmgr.Recovered},
			action: "ranks 4, 5, 6, 7 start again on n1, n1, n1, n1"},
		{name: "limit", limit: 1, view: self, faults: []errmgr.Fault{rankFault, rankFault}, want: []errmgr.Decision{errmgr.Recovered, errmgr.Pass},
			action: "rollback: falls back: the job went through 1 rollbacks, its limit"},
		{name: "criu falls back", limit: 5, view: errmgr.RollbackView{CRS: "criu", Global: []int{0}, Nodes: twoNodes()}, faults: []errmgr.Fault{rankFault},
			want: []errmgr.Decision{errmgr.Pass}, action: "rollback: falls back: crs criu saves whole processes"},
		{name: "runtime refuses", limit: 5, view: self, err: fmt.Errorf("hnp: %w: a migration is under way", errmgr.ErrCannotRollBack), faults: []errmgr.Fault{rankFault},
			want: []errmgr.Decision{errmgr.Pass}, action: "rollback: falls back: hnp: cannot roll back in place: a migration is under way"},
		{name: "runtime fails", limit: 5, view: self, err: errors.New("daemon gone"), faults: []errmgr.Fault{rankFault}, want: []errmgr.Decision{errmgr.Pass}, handErr: true},
		{name: "runtime cannot", limit: 5, plain: true, view: self, faults: []errmgr.Fault{rankFault}, want: []errmgr.Decision{errmgr.Pass}, action: "cannot roll back in place"},
		{name: "predicted", limit: 5, view: self, faults: []errmgr.Fault{{Kind: errmgr.Predicted, Rank: -1, Node: "n1"}}, want: []errmgr.Decision{errmgr.Pass}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &job{view: tt.view, err: tt.err}
			m := NewModule(tt.limit)
			var rt errmgr.Runtime = rollbacker{j}
			if tt.plain {
				rt = j
			}
			if err := m.Provision(t.Context(), errmgr.Host{Job: rt}); err != nil {
				t.Fatal(err)
			}
			var st errmgr.Status
			for i, f := range tt.faults {
				st = errmgr.Status{}
				d, err := m.Handle(t.Context(), f, &st)
				if (err != nil) != tt.handErr {
					t.Fatalf("fault %d: error %v, want error %v", i, err, tt.handErr)
				}
				if d != tt.want[i] {
					t.Errorf("fault %d: decision %v, want %v (%v)", i, d, tt.want[i], st.Actions)
				}
			}
			if tt.action != "" && !strings.Contains(strings.Join(st.Actions, "\n"), tt.action) {
				t.Errorf("actions %q lack %q", st.Actions, tt.action)
			}
			if tt.plain && len(j.got) != 0 {
				t.Errorf("rolled back through a runtime that cannot: %+v", j.got)
			}
		})
	}
}

func TestQuery(t *testing.T) {
	tests := []struct {
		settings map[string]string
		skip     string
	}{
		{map[string]string{}, "not asked for"},
		{map[string]string{"errmgr": "rollback,autor,default"}, "checkpoint/restart is off"},
		{map[string]string{"errmgr": "rollback,autor,default", "ft_cr_enabled": "1"}, ""},
		{map[string]string{ParamEnable: "1", "ft_cr_enabled": "1"}, ""},
		{map[string]string{ParamEnable: "1", "ft_cr_enabled": "1", ParamMaxRollbacks: "-1"}, "want 0 or more"},
	}
	for _, tt := range tests {
		params := mca.NewParams()
		fw := mca.NewFramework[errmgr.Module](params, errmgr.Name, "test", mca.Stacked())
		fw.Register(New())
		var s []mca.Setting
		for k, v := range tt.settings {
			s = append(s, mca.Setting{Name: k, Value: v, Origin: mca.Origin{Source: mca.SourceCommandLine}})
		}
		vals, err := params.ResolveSettings(s)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = New().Query(t.Context(), mca.Query{Values: vals, Priority: Priority})
		switch {
		case tt.skip == "" && err != nil:
			t.Errorf("%v: %v", tt.settings, err)
		case tt.skip != "" && (err == nil || !strings.Contains(err.Error(), tt.skip)):
			t.Errorf("%v: %v, want an error saying %q", tt.settings, err, tt.skip)
		}
	}
}

// TestConformance runs the ErrMgr kit on the component selected as
// gompirun selects it. The kit's job does not roll back: every fault falls
// back, which the kit checks is a pass with the reason recorded.
func TestConformance(t *testing.T) {
	errmgrtest.Run(t, errmgrtest.Options{
		Component: New(),
		Settings:  []mca.Setting{{Name: ParamEnable, Value: "1"}, {Name: "ft_cr_enabled", Value: "1"}},
		Register:  func(set *frameworks.Set) { set.ErrMgr.Register(errmgrdefault.New()) },
	})
}
