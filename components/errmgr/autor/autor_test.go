package autor

import (
	"context"
	"errors"
	"fmt"
	"gompi/frameworks"
	"reflect"
	"strings"
	"testing"

	errmgrdefault "gompi/components/errmgr/default"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/errmgr/errmgrtest"
	"gompi/mca"
)

// job is a runtime of 4 ranks on two nodes that records recoveries.
type job struct {
	err  error // Recover's answer
	seq  int
	got  []errmgr.Recovery
	recv bool // implements Recoverer
}

func (j *job) Size() int { return 4 }
func (j *job) RanksOf(node string) []int {
	return map[string][]int{"n1": {0, 1}, "n2": {2, 3}}[node]
}
func (j *job) NotifyFailed(context.Context, []int, string) error { return nil }

type recoverable struct{ *job }

func (r recoverable) Recover(_ context.Context, rec errmgr.Recovery) (int, error) {
	r.got = append(r.got, rec)
	return r.seq, r.err
}

func TestHandle(t *testing.T) {
	rankFault := errmgr.Fault{Kind: errmgr.ProcSignaled, Rank: 2, Node: "n2", Signal: 9}
	nodeFault := errmgr.Fault{Kind: errmgr.NodeLost, Rank: -1, Node: "n1"}
	tests := []struct {
		name     string
		limit    int
		same     bool
		faults   []errmgr.Fault
		err      error
		plain    bool // runtime without Recover
		want     []errmgr.Decision
		wantRec  []errmgr.Recovery
		action   string // in the last status's actions
		handlErr bool
	}{
		{"rank", 5, false, []errmgr.Fault{rankFault}, nil, false, []errmgr.Decision{errmgr.Recovered},
			[]errmgr.Recovery{{Lost: []int{2}, Why: rankFault.Describe()}}, "autor: recovery 1 of 5: every rank restarts from sequence 3 (rank 2 lost; lost ranks on other nodes)", false},
		{"node, same node allowed", 5, true, []errmgr.Fault{nodeFault}, nil, false, []errmgr.Decision{errmgr.Recovered},
			[]errmgr.Recovery{{Lost: []int{0, 1}, LostNodes: []string{"n1"}, SameNode: true, Why: nodeFault.Describe()}}, "ranks 0, 1 lost", false},
		{"limit", 1, false, []errmgr.Fault{rankFault, rankFault}, nil, false, []errmgr.Decision{errmgr.Recovered, errmgr.Pass},
			[]errmgr.Recovery{{Lost: []int{2}, Why: rankFault.Describe()}}, "went through 1 recoveries, its limit", false},
		{"no checkpoint yet", 5, false, []errmgr.Fault{rankFault}, fmt.Errorf("job x: %w", errmgr.ErrNoCheckpoint), false, []errmgr.Decision{errmgr.Pass},
			[]errmgr.Recovery{{Lost: []int{2}, Why: rankFault.Describe()}}, "autor: cannot recover: job x: no committed checkpoint", false},
		{"recover fails", 5, false, []errmgr.Fault{rankFault}, errors.New("daemons did not start"), false, []errmgr.Decision{errmgr.Pass},
			[]errmgr.Recovery{{Lost: []int{2}, Why: rankFault.Describe()}}, "", true},
		{"predicted", 5, false, []errmgr.Fault{{Kind: errmgr.Predicted, Rank: 1, Node: "n1"}}, nil, false, []errmgr.Decision{errmgr.Pass}, nil, "", false},
		{"runtime cannot recover", 5, false, []errmgr.Fault{rankFault}, nil, true, []errmgr.Decision{errmgr.Pass}, nil, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &job{err: tt.err, seq: 3}
			m := NewModule(tt.limit, tt.same)
			if tt.plain {
				m.Provision(context.Background(), errmgr.Host{Job: j})
			} else {
				m.Provision(context.Background(), errmgr.Host{Job: recoverable{j}})
			}
			var st errmgr.Status
			for i, f := range tt.faults {
				st = errmgr.Status{}
				d, err := m.Handle(t.Context(), f, &st)
				if (err != nil) != tt.handlErr {
					t.Fatalf("fault %d: error %v, want error %v", i, err, tt.handlErr)
				}
				if d != tt.want[i] {
					t.Errorf("fault %d: decision %v, want %v (%v)", i, d, tt.want[i], st.Actions)
				}
			}
			if !reflect.DeepEqual(j.got, tt.wantRec) {
				t.Errorf("recoveries %+v, want %+v", j.got, tt.wantRec)
			}
			if tt.action != "" && !strings.Contains(strings.Join(st.Actions, "\n"), tt.action) {
				t.Errorf("actions %q lack %q", st.Actions, tt.action)
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
		{map[string]string{"errmgr": "autor,default"}, "checkpoint/restart is off"},
		{map[string]string{"errmgr": "autor,default", "ft_cr_enabled": "1"}, ""},
		{map[string]string{ParamEnable: "1", "ft_cr_enabled": "1"}, ""},
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
		case tt.skip != "" && (!errors.Is(err, mca.ErrSkip) || !strings.Contains(err.Error(), tt.skip)):
			t.Errorf("%v: %v, want a skip saying %q", tt.settings, err, tt.skip)
		}
	}
}

// TestConformance runs the ErrMgr kit on the component selected as
// gompirun selects it.
func TestConformance(t *testing.T) {
	errmgrtest.Run(t, errmgrtest.Options{
		Component: New(),
		Settings:  []mca.Setting{{Name: ParamEnable, Value: "1"}, {Name: "ft_cr_enabled", Value: "1"}},
		Register:  func(set *frameworks.Set) { set.ErrMgr.Register(errmgrdefault.New()) },
	})
}
