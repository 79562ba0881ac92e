package errmgr

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// policy is a module that answers with a fixed decision and error, may
// record an action or a report, and remembers the status it was shown.
type policy struct {
	decision Decision
	err      error
	action   string // appended to st.Actions when set
	report   string // set as st.Report when set
	calls    *[]string
	name     string
	sawActs  []string
}

func (p *policy) Handle(_ context.Context, _ Fault, st *Status) (Decision, error) {
	*p.calls = append(*p.calls, p.name)
	p.sawActs = slices.Clone(st.Actions)
	if p.action != "" {
		st.Actions = append(st.Actions, p.action)
	}
	if p.report != "" {
		st.Report = p.report
	}
	return p.decision, p.err
}

var signaled = Fault{Kind: ProcSignaled, Rank: 3, Node: "n1", Signal: syscall.SIGKILL}

func TestStackHandle(t *testing.T) {
	boom := errors.New("boom")
	exited := Fault{Kind: ProcExited, Rank: 3, Node: "n1", ExitCode: 1}
	predicted := Fault{Kind: Predicted, Rank: -1, Node: "n2"}
	tests := []struct {
		name        string
		fault       Fault
		mods        []policy // named a, b, c in order
		want        Decision
		wantCalls   []string
		wantActions []string
		wantReport  string
	}{
		{
			name: "first recovers", fault: signaled,
			mods: []policy{{decision: Recovered, action: "a: restarted rank 3"}, {decision: Abort}},
			want: Recovered, wantCalls: []string{"a"},
			wantActions: []string{"a: restarted rank 3"},
		},
		{
			name: "pass then abort with own report", fault: signaled,
			mods: []policy{{decision: Pass}, {decision: Abort, report: "b says stop"}, {decision: Recovered}},
			want: Abort, wantCalls: []string{"a", "b"},
			wantActions: []string{"a: passed"}, wantReport: "b says stop",
		},
		{
			name: "abort without report gets the stack's", fault: exited,
			mods: []policy{{decision: Pass, action: "a: no checkpoint to restart from"}, {decision: Abort}},
			want: Abort, wantCalls: []string{"a", "b"},
			wantActions: []string{"a: no checkpoint to restart from"},
			wantReport:  "gompirun: job aborted: rank 3 on node n1 exited with status 1\ngompirun: tried before aborting: a: no checkpoint to restart from",
		},
		{
			name: "error passes on", fault: signaled,
			mods: []policy{{decision: Recovered, err: boom}, {decision: Recovered}},
			want: Recovered, wantCalls: []string{"a", "b"},
			wantActions: []string{"a: failed: boom"},
		},
		{
			name: "unknown decision passes on", fault: signaled,
			mods: []policy{{decision: Decision(9)}, {decision: Recovered}},
			want: Recovered, wantCalls: []string{"a", "b"},
			wantActions: []string{"a: failed: unknown decision Decision(9)"},
		},
		{
			name: "all pass: the stack aborts", fault: signaled,
			mods: []policy{{decision: Pass}, {decision: Pass, err: boom}, {decision: Pass, action: "c: looked"}},
			want: Abort, wantCalls: []string{"a", "b", "c"},
			wantActions: []string{"a: passed", "b: failed: boom", "c: looked"},
			wantReport:  "gompirun: job aborted: rank 3 on node n1 was killed by signal 9 (killed)\ngompirun: tried before aborting: a: passed; b: failed: boom; c: looked",
		},
		{
			name: "empty stack aborts", fault: signaled,
			want: Abort, wantReport: "gompirun: job aborted: rank 3 on node n1 was killed by signal 9 (killed)",
		},
		{
			name: "prediction nobody acts on runs on", fault: predicted,
			mods: []policy{{decision: Pass}},
			want: Pass, wantCalls: []string{"a"},
			wantActions: []string{"a: passed", "errmgr: no policy acted on the prediction; the job runs on"},
		},
		{
			name: "prediction acted on", fault: predicted,
			mods: []policy{{decision: Recovered, action: "a: migrated ranks off n2"}},
			want: Recovered, wantCalls: []string{"a"},
			wantActions: []string{"a: migrated ranks off n2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			var mods []Named
			for i := range tt.mods {
				p := &tt.mods[i]
				p.calls, p.name = &calls, string(rune('a'+i))
				mods = append(mods, Named{Name: p.name, Module: p})
			}
			d, st := NewStack(mods).Handle(context.Background(), tt.fault)
			if d != tt.want {
				t.Errorf("decision %v, want %v", d, tt.want)
			}
			if !slices.Equal(calls, tt.wantCalls) {
				t.Errorf("called %q, want %q", calls, tt.wantCalls)
			}
			if !slices.Equal(st.Actions, tt.wantActions) {
				t.Errorf("actions %q, want %q", st.Actions, tt.wantActions)
			}
			if st.Report != tt.wantReport {
				t.Errorf("report %q, want %q", st.Report, tt.wantReport)
			}
			if len(st.Faults) != 1 || st.Faults[0] != tt.fault {
				t.Errorf("status faults %+v, want just the fault", st.Faults)
			}
		})
	}
}

// Each module sees what the modules above it recorded.
func TestStackStatusFlowsDown(t *testing.T) {
	var calls []string
	a := &policy{decision: Pass, action: "a: tried migration", calls: &calls, name: "a"}
	b := &policy{decision: Pass, err: errors.New("no checkpoint"), calls: &calls, name: "b"}
	c := &policy{decision: Recovered, calls: &calls, name: "c"}
	NewStack([]Named{{"a", a}, {"b", b}, {"c", c}}).Handle(context.Background(), signaled)
	if want := []string{"a: tried migration", "b: failed: no checkpoint"}; !slices.Equal(c.sawActs, want) {
		t.Errorf("c saw %q, want %q", c.sawActs, want)
	}
	if len(b.sawActs) != 1 {
		t.Errorf("b saw %q, want a's action", b.sawActs)
	}
}

func TestNewStackDefaultLast(t *testing.T) {
	var calls []string
	mk := func(n string) Named { return Named{Name: n, Module: &policy{decision: Pass, calls: &calls, name: n}} }
	tests := []struct {
		in, want []string
	}{
		{[]string{"default", "crmig", "autor"}, []string{"crmig", "autor", "default"}},
		{[]string{"crmig", "default", "autor"}, []string{"crmig", "autor", "default"}},
		{[]string{"crmig", "autor", "default"}, []string{"crmig", "autor", "default"}},
		{[]string{"default"}, []string{"default"}},
		{[]string{"autor", "sustain"}, []string{"autor", "sustain"}},
		{nil, []string{}},
	}
	for _, tt := range tests {
		var mods []Named
		for _, n := range tt.in {
			mods = append(mods, mk(n))
		}
		s := NewStack(mods)
		if got := s.Names(); !slices.Equal(got, tt.want) {
			t.Errorf("NewStack(%q).Names() = %q, want %q", tt.in, got, tt.want)
		}
		calls = nil
		s.Handle(context.Background(), signaled)
		if !slices.Equal(calls, tt.want) && len(tt.want) > 0 {
			t.Errorf("NewStack(%q) called %q, want %q", tt.in, calls, tt.want)
		}
	}
}

func TestNewStackNilModulePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for a nil module")
		}
	}()
	NewStack([]Named{{Name: "x"}})
}

func TestStackCancelled(t *testing.T) {
	var calls []string
	ctx, cancel := context.WithCancel(context.Background())
	a := &policy{decision: Pass, calls: &calls, name: "a"}
	s := NewStack([]Named{{"a", a}, {"b", &policy{decision: Recovered, calls: &calls, name: "b"}}})
	// a cancels while it runs; b must not be asked.
	s.mods[0].Module = moduleFunc(func(ctx context.Context, f Fault, st *Status) (Decision, error) {
		cancel()
		return a.Handle(ctx, f, st)
	})
	d, st := s.Handle(ctx, signaled)
	if d != Abort || !slices.Equal(calls, []string{"a"}) {
		t.Fatalf("decision %v after calls %q, want Abort after a only", d, calls)
	}
	want := "gompirun: job aborted: rank 3 on node n1 was killed by signal 9 (killed)\ngompirun: tried before aborting: a: passed; errmgr: interrupted before b: context canceled"
	if st.Report != want {
		t.Errorf("report %q, want %q", st.Report, want)
	}
}

type moduleFunc func(ctx context.Context, f Fault, st *Status) (Decision, error)

func (m moduleFunc) Handle(ctx context.Context, f Fault, st *Status) (Decision, error) {
	return m(ctx, f, st)
}

// Faults are handled one at a time; a fault waiting its turn gives up
// with its context.
func TestStackOneFaultAtATime(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var inside, most atomic.Int32
	s := NewStack([]Named{{"slow", moduleFunc(func(ctx context.Context, f Fault, st *Status) (Decision, error) {
		n := inside.Add(1)
		defer inside.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		if f.Rank == 0 {
			close(entered)
			<-release
		}
		return Recovered, nil
	})}})
	first := make(chan Decision)
	go func() {
		d, _ := s.Handle(context.Background(), Fault{Kind: ProcExited, Rank: 0, Node: "n0", ExitCode: 1})
		first <- d
	}()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, st := s.Handle(ctx, signaled)
	if d != Abort || len(st.Actions) != 1 || st.Report == "" {
		t.Errorf("fault waiting behind another with a cancelled context: %v %+v, want Abort with a report", d, st)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { s.Handle(context.Background(), Fault{Kind: ProcExited, Rank: i + 1, Node: "n1"}) })
	}
	close(release)
	if d := <-first; d != Recovered {
		t.Errorf("first fault: %v, want Recovered", d)
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Errorf("%d faults were handled at once, want 1", m)
	}
}

func TestAbortReport(t *testing.T) {
	tests := []struct {
		f     Fault
		tried []string
		want  string
	}{
		{signaled, nil, "gompirun: job aborted: rank 3 on node n1 was killed by signal 9 (killed)"},
		{Fault{Kind: NodeLost, Rank: -1, Node: "n4", Detail: "no heartbeat for 10s"}, []string{"autor: no committed checkpoint"},
			"gompirun: job aborted: node n4 was lost: no heartbeat for 10s\ngompirun: tried before aborting: autor: no committed checkpoint"},
	}
	for _, tt := range tests {
		if got := AbortReport(tt.f, tt.tried); got != tt.want {
			t.Errorf("AbortReport(%+v, %q) = %q, want %q", tt.f, tt.tried, got, tt.want)
		}
	}
}
