package errmgrsustain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	errmgrdefault "gompi/components/errmgr/default"
	"gompi/frameworks"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/errmgr/errmgrtest"
	"gompi/mca"
)

// job is a test double of the runtime: a job of size ranks placed on
// nodes, recording what it was told.
type job struct {
	size     int
	nodes    map[string][]int
	notified [][]int
	whys     []string
	err      error // NotifyFailed's answer
}

func (j *job) Size() int                 { return j.size }
func (j *job) RanksOf(node string) []int { return j.nodes[node] }
func (j *job) NotifyFailed(_ context.Context, ranks []int, why string) error {
	if j.err != nil {
		return j.err
	}
	j.notified = append(j.notified, slices.Clone(ranks))
	j.whys = append(j.whys, why)
	return nil
}

func newJob() *job {
	return &job{size: 4, nodes: map[string][]int{"n0": {0, 1}, "n1": {2, 3}}}
}

var (
	killed2  = errmgr.Fault{Kind: errmgr.ProcSignaled, Rank: 2, Node: "n1", Signal: syscall.SIGKILL}
	exited3  = errmgr.Fault{Kind: errmgr.ProcExited, Rank: 3, Node: "n1", ExitCode: 2}
	exited1  = errmgr.Fault{Kind: errmgr.ProcExited, Rank: 1, Node: "n0", ExitCode: 1}
	lostN1   = errmgr.Fault{Kind: errmgr.NodeLost, Rank: -1, Node: "n1", Detail: "its daemon's connection to gompirun broke"}
	lostN0   = errmgr.Fault{Kind: errmgr.NodeLost, Rank: -1, Node: "n0"}
	predictN = errmgr.Fault{Kind: errmgr.Predicted, Rank: -1, Node: "n1"}
)

func TestHandle(t *testing.T) {
	type step struct {
		fault       errmgr.Fault
		want        errmgr.Decision
		wantErr     bool
		wantNotify  []int // nil: not notified
		wantActions []string
	}
	tests := []struct {
		name   string
		limit  int
		notify error
		steps  []step
	}{
		{
			name: "a killed rank",
			steps: []step{{fault: killed2, want: errmgr.Recovered, wantNotify: []int{2},
				wantActions: []string{"sustain: the job runs on without rank 2 (3 of 4 ranks left)"}}},
		},
		{
			name: "a lost node, then a rank of it reported again",
			steps: []step{
				{fault: lostN1, want: errmgr.Recovered, wantNotify: []int{2, 3},
					wantActions: []string{"sustain: the job runs on without ranks 2, 3 (2 of 4 ranks left)"}},
				{fault: exited3, want: errmgr.Recovered,
					wantActions: []string{"sustain: rank 3 was declared failed before; the job runs on"}},
			},
		},
		{
			name: "a node whose rank failed before",
			steps: []step{
				{fault: killed2, want: errmgr.Recovered, wantNotify: []int{2},
					wantActions: []string{"sustain: the job runs on without rank 2 (3 of 4 ranks left)"}},
				{fault: lostN1, want: errmgr.Recovered, wantNotify: []int{3},
					wantActions: []string{"sustain: the job runs on without rank 3 (2 of 4 ranks left)"}},
			},
		},
		{
			name: "no rank would be left",
			steps: []step{
				{fault: lostN1, want: errmgr.Recovered, wantNotify: []int{2, 3},
					wantActions: []string{"sustain: the job runs on without ranks 2, 3 (2 of 4 ranks left)"}},
				{fault: lostN0, want: errmgr.Pass,
					wantActions: []string{"sustain: no rank would be left (4 of 4 lost); not running on"}},
			},
		},
		{
			name: "past the bound", limit: 2,
			steps: []step{
				{fault: killed2, want: errmgr.Recovered, wantNotify: []int{2},
					wantActions: []string{"sustain: the job runs on without rank 2 (3 of 4 ranks left)"}},
				{fault: exited3, want: errmgr.Recovered, wantNotify: []int{3},
					wantActions: []string{"sustain: the job runs on without rank 3 (2 of 4 ranks left)"}},
				{fault: exited1, want: errmgr.Pass,
					wantActions: []string{"sustain: 3 ranks lost, more than errmgr_sustain_max_failures = 2; not running on"}},
			},
		},
		{
			name: "a node past the bound", limit: 1,
			steps: []step{{fault: lostN1, want: errmgr.Pass,
				wantActions: []string{"sustain: 2 ranks lost, more than errmgr_sustain_max_failures = 1; not running on"}}},
		},
		{
			name:  "a prediction is not a failure",
			steps: []step{{fault: predictN, want: errmgr.Pass}},
		},
		{
			name: "the survivors could not be told", notify: errmgr.ErrJobOver,
			steps: []step{{fault: killed2, want: errmgr.Pass, wantErr: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := newJob()
			j.err = tt.notify
			m := NewModule(tt.limit)
			m.Provision(context.Background(), errmgr.Host{Job: j})
			for i, s := range tt.steps {
				before := len(j.notified)
				var st errmgr.Status
				d, err := m.Handle(context.Background(), s.fault, &st)
				if d != s.want || (err != nil) != s.wantErr {
					t.Fatalf("step %d (%s): %v, %v; want %v, error %v", i, s.fault.Describe(), d, err, s.want, s.wantErr)
				}
				var got []int
				if len(j.notified) > before {
					got = j.notified[len(j.notified)-1]
					if why := j.whys[len(j.whys)-1]; why != s.fault.Describe() {
						t.Errorf("step %d: told the ranks %q, want the fault's description %q", i, why, s.fault.Describe())
					}
				}
				if !slices.Equal(got, s.wantNotify) {
					t.Errorf("step %d: notified %v, want %v", i, got, s.wantNotify)
				}
				if !slices.Equal(st.Actions, s.wantActions) {
					t.Errorf("step %d: actions %q, want %q", i, st.Actions, s.wantActions)
				}
			}
		})
	}
}

// A new run of the job (a recovery restarted every rank) starts with no
// rank lost.
func TestRebind(t *testing.T) {
	m := NewModule(1)
	m.Provision(context.Background(), errmgr.Host{Job: newJob()})
	var st errmgr.Status
	if d, err := m.Handle(context.Background(), killed2, &st); d != errmgr.Recovered || err != nil {
		t.Fatalf("first run: %v, %v", d, err)
	}
	m.Provision(context.Background(), errmgr.Host{Job: newJob()})
	if f := m.Failed(); len(f) != 0 {
		t.Fatalf("failed ranks %v carried into a new run", f)
	}
	if d, err := m.Handle(context.Background(), exited3, &st); d != errmgr.Recovered || err != nil {
		t.Errorf("second run, first failure: %v, %v; want Recovered within the bound", d, err)
	}
}

func TestUnbound(t *testing.T) {
	var st errmgr.Status
	d, err := NewModule(0).Handle(context.Background(), killed2, &st)
	if d != errmgr.Pass || err == nil || !strings.Contains(err.Error(), "not bound") {
		t.Errorf("unbound module: %v, %v; want Pass and an error saying it has no job", d, err)
	}
}

func TestQuery(t *testing.T) {
	tests := []struct {
		settings []mca.Setting
		selected bool
		wantErr  string // a failure rather than a skip
	}{
		{selected: false},
		{settings: []mca.Setting{{Name: "errmgr", Value: "sustain,default"}}, selected: true},
		{settings: []mca.Setting{{Name: "errmgr", Value: "sustain"}}, selected: true},
		{settings: []mca.Setting{{Name: "errmgr", Value: "^default"}}, selected: false},
		{settings: []mca.Setting{{Name: ParamEnable, Value: "1"}}, selected: true},
		{settings: []mca.Setting{{Name: ParamEnable, Value: "yes"}, {Name: "errmgr", Value: "^sustain"}}, selected: false},
		{settings: []mca.Setting{{Name: ParamEnable, Value: "1"}, {Name: ParamMaxFailures, Value: "-1"}}, wantErr: "want 0 (no bound)"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.settings), func(t *testing.T) {
			params := mca.NewParams()
			set := frameworks.New(params)
			set.ErrMgr.Register(New())
			set.ErrMgr.Register(errmgrdefault.New())
			vals, err := params.ResolveSettings(tt.settings)
			if err != nil {
				t.Fatal(err)
			}
			probes, err := set.ErrMgr.Probe(context.Background(), vals, mca.RoleHNP)
			if err != nil {
				t.Fatal(err)
			}
			var p mca.Probe
			for _, q := range probes {
				if q.Info.Name == Name {
					p = q
				}
			}
			if p.Selected != tt.selected {
				t.Errorf("selected = %v (%+v), want %v", p.Selected, p, tt.selected)
			}
			if tt.wantErr != "" && !strings.Contains(p.Failed, tt.wantErr) {
				t.Errorf("failure %q, want one saying %q", p.Failed, tt.wantErr)
			}
			if !tt.selected && tt.wantErr == "" && !p.Excluded && !strings.Contains(p.Skipped, "not asked for") {
				t.Errorf("not selected, but neither excluded nor skipped as not asked for: %+v", p)
			}
		})
	}
}

// In a stack, sustain runs a failure through and default aborts what
// sustain passes on, with sustain's reason in the report.
func TestStack(t *testing.T) {
	params := mca.NewParams()
	set := frameworks.New(params)
	set.ErrMgr.Register(New())
	set.ErrMgr.Register(errmgrdefault.New())
	vals, err := params.ResolveSettings([]mca.Setting{{Name: "errmgr", Value: "sustain,default"}, {Name: ParamMaxFailures, Value: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	cands, err := set.ErrMgr.Select(context.Background(), vals, mca.RoleHNP, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := newJob()
	for _, c := range cands {
		if b, ok := c.Module.(mca.Provisioner[errmgr.Host]); ok {
			b.Provision(context.Background(), errmgr.Host{Job: j})
		}
	}
	s := errmgr.FromCandidates(cands)
	if got := s.Names(); !slices.Equal(got, []string{"sustain", "default"}) {
		t.Fatalf("stack %q, want sustain then default", got)
	}
	if d, st := s.Handle(context.Background(), killed2); d != errmgr.Recovered || st.Report != "" {
		t.Fatalf("first failure: %v %+v, want Recovered", d, st)
	}
	d, st := s.Handle(context.Background(), exited3)
	want := "gompirun: job aborted: rank 3 on node n1 exited with status 2\n" +
		"gompirun: tried before aborting: sustain: 2 ranks lost, more than errmgr_sustain_max_failures = 1; not running on"
	if d != errmgr.Abort || st.Report != want {
		t.Errorf("second failure: %v, report %q; want Abort, %q", d, st.Report, want)
	}
	if len(j.notified) != 1 || !slices.Equal(j.notified[0], []int{2}) {
		t.Errorf("notified %v, want only rank 2", j.notified)
	}
}

var _ errmgr.Runtime = (*job)(nil)

// TestConformance runs the ErrMgr kit on the component selected as
// gompirun selects it.
func TestConformance(t *testing.T) {
	errmgrtest.Run(t, errmgrtest.Options{
		Component: New(),
		Settings:  []mca.Setting{{Name: ParamEnable, Value: "1"}},
		Register:  func(set *frameworks.Set) { set.ErrMgr.Register(errmgrdefault.New()) },
	})
}
