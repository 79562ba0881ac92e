package crmig

import (
	"context"
	"errors"
	"fmt"
	"gompi/frameworks"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gompi/components/errmgr/autor"
	errmgrdefault "gompi/components/errmgr/default"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/errmgr/errmgrtest"
	"gompi/mca"
)

// job is a Runtime of 4 ranks, 0 and 1 on n1, 2 and 3 on n2, n3 empty.
type job struct{}

func (job) Size() int { return 4 }
func (job) RanksOf(node string) []int {
	return map[string][]int{"n1": {0, 1}, "n2": {2, 3}}[node]
}
func (job) NotifyFailed(context.Context, []int, string) error { return nil }

// mover is a job that migrates: it answers Migrate with res and err and
// records what it was asked.
type mover struct {
	job
	ckpt  time.Duration // CheckpointTime; 0 = none committed yet
	res   errmgr.MigrationResult
	err   error
	mu    sync.Mutex
	asked []errmgr.Migration
}

func (m *mover) Nodes() []errmgr.NodeInfo {
	return []errmgr.NodeInfo{
		{Name: "n1", Ranks: []int{0, 1}, Up: true},
		{Name: "n2", Ranks: []int{2, 3}, Up: true},
		{Name: "n3", Up: true},
	}
}

func (m *mover) CheckpointTime(context.Context) (time.Duration, bool) { return m.ckpt, m.ckpt > 0 }

func (m *mover) Migrate(_ context.Context, mg errmgr.Migration) (errmgr.MigrationResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked = append(m.asked, mg)
	return m.res, m.err
}

func offN2(deadline time.Time) errmgr.Fault {
	return errmgr.Fault{Kind: errmgr.Predicted, Rank: -1, Node: "n2", Detail: "maintenance",
		Predict: &errmgr.Prediction{Nodes: []string{"n2"}, Deadline: deadline}}
}

func TestHandle(t *testing.T) {
	done := errmgr.MigrationResult{Seq: 4, Took: 840 * time.Millisecond, Checkpoint: 310 * time.Millisecond, Restart: 530 * time.Millisecond}
	moved := "crmig: moved rank 2 n2 -> n3, rank 3 n2 -> n3 in 0.84 s (checkpoint 0.31 s, restart 0.53 s), sequence 4"
	tests := []struct {
		name    string
		fault   errmgr.Fault
		ckpt    time.Duration
		err     error // Migrate's
		unbound bool
		plain   bool // a runtime that cannot migrate
		want    errmgr.Decision
		dest    map[int]string // asked of Migrate; nil: Migrate not called
		action  string         // the action recorded, matched as a regexp; "" = none
		handErr string         // Handle's error
	}{
		{name: "migrated", fault: offN2(time.Time{}), ckpt: time.Second, want: errmgr.Recovered,
			dest: map[int]string{2: "n3", 3: "n3"}, action: regexp.QuoteMeta(moved)},
		{name: "migrated, before the deadline", fault: offN2(time.Now().Add(time.Hour)), ckpt: time.Second, want: errmgr.Recovered,
			dest: map[int]string{2: "n3", 3: "n3"}, action: regexp.QuoteMeta(moved)},
		{name: "deadline, no checkpoint time known", fault: offN2(time.Now().Add(time.Millisecond)), want: errmgr.Recovered,
			dest: map[int]string{2: "n3", 3: "n3"}, action: regexp.QuoteMeta(moved)},
		{name: "deadline too close", fault: offN2(time.Now().Add(10 * time.Minute)), ckpt: time.Hour, want: errmgr.Pass,
			action: `^crmig: the fault is expected in [0-9m.]+s, a migration would take about 2h0m0s \(twice the last checkpoint's 1h0m0s\): left to the policies below \(autor recovers after the fault\)$`},
		{name: "deadline passed", fault: offN2(time.Now().Add(-time.Hour)), ckpt: 300 * time.Millisecond, want: errmgr.Pass,
			action: `^crmig: the fault is expected 1h0m[0-9.]+s ago, a migration would take about 600ms \(twice the last checkpoint's 300ms\): left to`},
		{name: "abandoned", fault: offN2(time.Time{}), err: fmt.Errorf("migration 4: rank 0 failed during it: %w", errmgr.ErrMigrationAbandoned),
			want: errmgr.Pass, dest: map[int]string{2: "n3", 3: "n3"},
			action: regexp.QuoteMeta("crmig: migration 4: rank 0 failed during it: " + errmgr.ErrMigrationAbandoned.Error())},
		{name: "refused", fault: offN2(time.Time{}), err: errors.New("the job is checkpointing"),
			want: errmgr.Pass, dest: map[int]string{2: "n3", 3: "n3"},
			handErr: "migrate rank 2 n2 -> n3, rank 3 n2 -> n3: the job is checkpointing"},
		{name: "not predicted", fault: errmgr.Fault{Kind: errmgr.NodeLost, Rank: -1, Node: "n2"}, want: errmgr.Pass},
		{name: "not predicted, not bound", fault: errmgr.Fault{Kind: errmgr.ProcExited, Rank: 1, Node: "n1"}, unbound: true, want: errmgr.Pass},
		{name: "prediction without details: a node", fault: errmgr.Fault{Kind: errmgr.Predicted, Rank: -1, Node: "n2"},
			want: errmgr.Recovered, dest: map[int]string{2: "n3", 3: "n3"}, action: regexp.QuoteMeta(moved)},
		{name: "prediction without details: a rank", fault: errmgr.Fault{Kind: errmgr.Predicted, Rank: 1, Node: "n1"},
			want: errmgr.Recovered, dest: map[int]string{1: "n3"}, action: `^crmig: moved rank 1 n1 -> n3 in`},
		{name: "nothing to move", fault: errmgr.Fault{Kind: errmgr.Predicted, Rank: -1, Node: "n3"}, want: errmgr.Pass,
			handErr: "node n3 runs no ranks: nothing to move"},
		{name: "not bound", fault: offN2(time.Time{}), unbound: true, want: errmgr.Pass,
			handErr: "no job to act on (the module was not bound to its runtime)"},
		{name: "runtime cannot migrate", fault: offN2(time.Time{}), plain: true, want: errmgr.Pass,
			handErr: "this job's runtime cannot migrate ranks (run the job with -am ft-enable-cr)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mv := &mover{ckpt: tt.ckpt, res: done, err: tt.err}
			m := NewModule()
			switch {
			case tt.unbound:
			case tt.plain:
				m.Provision(context.Background(), errmgr.Host{Job: job{}})
			default:
				m.Provision(context.Background(), errmgr.Host{Job: mv})
			}
			st := errmgr.Status{Faults: []errmgr.Fault{tt.fault}}
			d, err := m.Handle(t.Context(), tt.fault, &st)
			if d != tt.want {
				t.Errorf("decision %v, want %v", d, tt.want)
			}
			switch {
			case tt.handErr == "" && err != nil:
				t.Errorf("Handle: %v", err)
			case tt.handErr != "" && (err == nil || err.Error() != tt.handErr):
				t.Errorf("Handle: error %v, want %q", err, tt.handErr)
			}
			if tt.dest == nil {
				if len(mv.asked) != 0 {
					t.Errorf("Migrate called with %+v, want no call", mv.asked)
				}
			} else if len(mv.asked) != 1 || !maps.Equal(mv.asked[0].Dest, tt.dest) || mv.asked[0].Why != tt.fault.Describe() {
				t.Errorf("Migrate calls %+v, want one moving %v for %q", mv.asked, tt.dest, tt.fault.Describe())
			}
			switch {
			case tt.action == "" && len(st.Actions) != 0:
				t.Errorf("actions %q, want none", st.Actions)
			case tt.action != "" && (len(st.Actions) != 1 || !regexp.MustCompile(tt.action).MatchString(st.Actions[0])):
				t.Errorf("actions %q, want one matching %s", st.Actions, tt.action)
			}
		})
	}
}

// In a stack above autor: a migration abandoned, or too late to try,
// leaves the prediction to autor (which waits for the failure itself), and
// the job runs on; a migration done ends the walk.
func TestStack(t *testing.T) {
	tests := []struct {
		name    string
		mv      *mover
		fault   errmgr.Fault
		want    errmgr.Decision
		actions []string // prefixes
	}{
		{"migrated", &mover{res: errmgr.MigrationResult{Seq: 1}}, offN2(time.Time{}), errmgr.Recovered,
			[]string{"crmig: moved rank 2 n2 -> n3, rank 3 n2 -> n3 in 0.00 s"}},
		{"abandoned", &mover{err: fmt.Errorf("rank 1 exited: %w", errmgr.ErrMigrationAbandoned)}, offN2(time.Time{}), errmgr.Pass,
			[]string{"crmig: rank 1 exited: migration abandoned", "autor: passed", "errmgr: no policy acted on the prediction"}},
		{"too late", &mover{ckpt: time.Minute}, offN2(time.Now().Add(time.Second)), errmgr.Pass,
			[]string{"crmig: the fault is expected in", "autor: passed", "errmgr: no policy acted on the prediction"}},
		{"refused", &mover{err: errors.New("no")}, offN2(time.Time{}), errmgr.Pass,
			[]string{"crmig: failed: migrate rank 2 n2 -> n3, rank 3 n2 -> n3: no", "autor: passed", "errmgr: no policy acted on the prediction"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewModule()
			c.Provision(context.Background(), errmgr.Host{Job: tt.mv})
			a := autor.NewModule(5, false)
			a.Provision(context.Background(), errmgr.Host{Job: tt.mv})
			s := errmgr.NewStack([]errmgr.Named{{Name: Name, Module: c}, {Name: autor.Name, Module: a}})
			if got := s.Names(); !slices.Equal(got, []string{Name, autor.Name}) {
				t.Fatalf("stack %q", got)
			}
			d, st := s.Handle(t.Context(), tt.fault)
			if d != tt.want {
				t.Errorf("decision %v, want %v (%q)", d, tt.want, st.Actions)
			}
			if len(st.Actions) != len(tt.actions) {
				t.Fatalf("actions %q, want %d starting %q", st.Actions, len(tt.actions), tt.actions)
			}
			for i, p := range tt.actions {
				if !strings.HasPrefix(st.Actions[i], p) {
					t.Errorf("action %d: %q, want it to start %q", i, st.Actions[i], p)
				}
			}
			if a.Recoveries() != 0 {
				t.Errorf("autor recovered %d times on a prediction", a.Recoveries())
			}
		})
	}
}

func TestQuery(t *testing.T) {
	tests := []struct {
		settings map[string]string
		skip     string
	}{
		{map[string]string{}, "checkpoint/restart is off: run with -am ft-enable-cr"},
		{map[string]string{"ft_cr_enabled": "1"}, ""},
		{map[string]string{"ft_cr_enabled": "1", ParamEnable: "0"}, "turned off (errmgr_crmig_enable=0"},
		{map[string]string{"ft_cr_enabled": "1", ParamEnable: "0", "errmgr": "crmig,autor,default"}, ""},
		{map[string]string{ParamEnable: "0", "errmgr": "crmig,default"}, "checkpoint/restart is off"},
		{map[string]string{"ft_cr_enabled": "1", ParamEnable: "0", "errmgr": "^crmig"}, "turned off"},
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
		mod, prio, err := New().Query(t.Context(), mca.Query{Values: vals, Priority: Priority})
		switch {
		case tt.skip == "" && err != nil:
			t.Errorf("%v: %v", tt.settings, err)
		case tt.skip == "" && (mod == nil || prio != Priority):
			t.Errorf("%v: module %v priority %d, want a module at %d", tt.settings, mod, prio, Priority)
		case tt.skip != "" && (!errors.Is(err, mca.ErrSkip) || !strings.Contains(err.Error(), tt.skip)):
			t.Errorf("%v: %v, want a skip saying %q", tt.settings, err, tt.skip)
		}
	}
}

func TestInfo(t *testing.T) {
	info := New().Info()
	if info.Name != Name || info.Framework != errmgr.Name || info.Priority != 40 {
		t.Errorf("info %+v", info)
	}
	if len(info.Params) != 1 || info.Params[0].Name != ParamEnable || info.Params[0].Default != "1" || info.Params[0].Type != mca.Bool {
		t.Errorf("params %+v, want %s, a Bool defaulting to 1", info.Params, ParamEnable)
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
