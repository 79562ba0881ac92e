// Package errmgrtest is the conformance kit every ErrMgr component must
// pass. It selects the component as gompirun does (stacked, with default
// registered beside it), provisions the modules that take a Host with a
// job of its own (Job, which records what it is asked and refuses what the
// Runtime contract forbids), and checks Handle's decision contract: a
// known decision; Recovered and Abort say what was done, in Status.Actions
// under the component's name; the status vector left by the components
// above kept as it was; a predicted fault never aborting; a cancelled
// context or a missing Host never counting as recovered; and the
// component working in a Stack above default.
package errmgrtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gompi/frameworks"
	"gompi/frameworks/errmgr"
	"gompi/mca"
)

// Options describe the component under test.
type Options struct {
	// Component is the component; it is selected with Settings in the
	// role of gompirun.
	Component mca.Component[errmgr.Module]
	Settings  []mca.Setting
	// Register adds the component's companions (errmgr/default, which
	// every stack ends with) to the framework.
	Register func(set *frameworks.Set)
}

// Faults is one fault of each kind on the kit's job (ranks 0, 1 on n0;
// 2, 3 on n1).
func Faults() []errmgr.Fault {
	at := time.Unix(1_700_000_000, 0)
	return []errmgr.Fault{
		{Kind: errmgr.ProcExited, Rank: 1, Node: "n0", ExitCode: 3, Time: at},
		{Kind: errmgr.ProcSignaled, Rank: 2, Node: "n1", Signal: syscall.SIGKILL, Time: at},
		{Kind: errmgr.NodeLost, Rank: -1, Node: "n1", Time: at, Detail: "no heartbeat"},
		{Kind: errmgr.Predicted, Rank: -1, Node: "n0", Time: at, Predict: &errmgr.Prediction{Nodes: []string{"n0"}}},
	}
}

// Run runs the kit.
func Run(t *testing.T, opts Options) {
	t.Helper()
	name := opts.Component.Info().Name
	t.Run("decision-contract", func(t *testing.T) {
		for _, f := range Faults() {
			m, job := provisioned(t, opts)
			handle(t, name, m, f, job, t.Context())
		}
	})
	t.Run("predicted-never-aborts", func(t *testing.T) {
		m, job := provisioned(t, opts)
		f := Faults()[3]
		if d := handle(t, name, m, f, job, t.Context()); d == errmgr.Abort {
			t.Errorf("a predicted fault aborted the job: a prediction is not a failure")
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		for _, f := range Faults() {
			m, job := provisioned(t, opts)
			if d := handle(t, name, m, f, job, ctx); d == errmgr.Recovered {
				t.Errorf("%s: recovered with a cancelled context, although the job could not be told", f.Describe())
			}
		}
	})
	t.Run("without-host", func(t *testing.T) {
		for _, f := range Faults() {
			m := selected(t, opts).module(t, name)
			if d := handle(t, name, m, f, nil, t.Context()); d == errmgr.Recovered {
				t.Errorf("%s: recovered without a job to act on", f.Describe())
			}
		}
	})
	t.Run("stacked-above-default", func(t *testing.T) { testStack(t, opts) })
}

// selection is a stacked selection as gompirun makes it.
type selection struct {
	cands []mca.Candidate[errmgr.Module]
}

func selected(t *testing.T, opts Options) selection {
	t.Helper()
	params := mca.NewParams()
	set := frameworks.New(params)
	set.ErrMgr.Register(opts.Component)
	if opts.Register != nil {
		opts.Register(set)
	}
	vals, err := params.ResolveSettings(opts.Settings)
	if err != nil {
		t.Fatal(err)
	}
	cands, err := set.ErrMgr.Select(t.Context(), vals, mca.RoleHNP, nil)
	if err != nil {
		t.Fatalf("select: %v", err)
	}
	return selection{cands}
}

func (s selection) module(t *testing.T, name string) errmgr.Module {
	t.Helper()
	for _, c := range s.cands {
		if c.Info.Name == name {
			return c.Module
		}
	}
	t.Fatalf("component %s was not selected", name)
	return nil
}

// provisioned returns the component's module provisioned with a new Job
// (when it takes a Host).
func provisioned(t *testing.T, opts Options) (errmgr.Module, *Job) {
	t.Helper()
	m := selected(t, opts).module(t, opts.Component.Info().Name)
	job := NewJob()
	if _, err := mca.Provision(t.Context(), m, errmgr.Host{Job: job}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	return m, job
}

// handle calls Handle as the stack does, below a component that passed,
// and checks the decision contract; it returns the decision.
func handle(t *testing.T, name string, m errmgr.Module, f errmgr.Fault, job *Job, ctx context.Context) errmgr.Decision {
	t.Helper()
	above := []string{"above: passed"}
	st := &errmgr.Status{Faults: []errmgr.Fault{f}, Actions: slices.Clone(above)}
	type result struct {
		d   errmgr.Decision
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := m.Handle(ctx, f, st)
		done <- result{d, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: Handle has not returned after 30s", f.Describe())
	}
	what := fmt.Sprintf("%s: Handle = %v, %v", f.Describe(), r.d, r.err)
	switch r.d {
	case errmgr.Pass, errmgr.Recovered, errmgr.Abort:
	default:
		t.Errorf("%s: not a decision", what)
	}
	if len(st.Faults) != 1 || st.Faults[0].Describe() != f.Describe() {
		t.Errorf("%s: the status vector's faults became %v", what, st.Faults)
	}
	if len(st.Actions) < len(above) || !slices.Equal(st.Actions[:len(above)], above) {
		t.Errorf("%s: the actions of the components above became %q", what, st.Actions)
	}
	mine := st.Actions[min(len(above), len(st.Actions)):]
	if r.err == nil && r.d != errmgr.Pass && len(mine) == 0 {
		t.Errorf("%s: decided without recording what it did in the status vector", what)
	}
	for _, a := range mine {
		if !strings.HasPrefix(a, name+": ") {
			t.Errorf("%s: action %q is not under the component's name", what, a)
		}
	}
	if job != nil {
		if err := job.Violation(); err != nil {
			t.Errorf("%s: %v", what, err)
		}
		if r.err == nil && r.d == errmgr.Recovered && !job.Told() {
			t.Errorf("%s: recovered without asking the job for anything", what)
		}
	}
	return r.d
}

// testStack: in a stack above default, a failure the component does not
// recover from ends in an abort whose report names the fault, a
// prediction never aborts, and default comes last.
func testStack(t *testing.T, opts Options) {
	s := selected(t, opts)
	stack := errmgr.FromCandidates(s.cands)
	names := stack.Names()
	if !slices.Contains(names, opts.Component.Info().Name) || names[len(names)-1] != errmgr.DefaultName {
		t.Fatalf("stack %q: want the component in it and default last", names)
	}
	if err := stack.Provision(t.Context(), errmgr.Host{Job: NewJob()}); err != nil {
		t.Fatalf("provision the stack: %v", err)
	}
	for _, f := range Faults() {
		d, st := stack.Handle(t.Context(), f)
		switch {
		case f.Kind == errmgr.Predicted && d == errmgr.Abort:
			t.Errorf("%s: the stack aborted on a prediction", f.Describe())
		case d == errmgr.Abort && !strings.Contains(st.Report, f.Describe()):
			t.Errorf("%s: aborted with report %q, which does not name the fault", f.Describe(), st.Report)
		case d == errmgr.Pass && f.Kind != errmgr.Predicted:
			t.Errorf("%s: the stack passed on a failure", f.Describe())
		}
	}
}

// Job is the kit's job for a Host: four ranks, 0 and 1 on node n0, 2 and 3
// on n1, whose ranks 1 and 2 and node n1 have failed (Faults). It
// implements errmgr.Runtime and errmgr.Recoverer, records what it is
// asked, honours its callers' contexts, and records as a violation a
// request the contract forbids: naming a rank that does not exist or has
// not failed.
type Job struct {
	mu        sync.Mutex
	told      int
	violation error
}

// NewJob returns a job no one has asked anything yet.
func NewJob() *Job { return &Job{} }

var failed = []int{1, 2, 3} // rank 1 exited, 2 was killed, 3 was lost with n1

// Size implements errmgr.Runtime.
func (j *Job) Size() int { return 4 }

// RanksOf implements errmgr.Runtime.
func (j *Job) RanksOf(node string) []int {
	switch node {
	case "n0":
		return []int{0, 1}
	case "n1":
		return []int{2, 3}
	}
	return nil
}

func (j *Job) ask(ctx context.Context, what string, ranks []int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("errmgrtest: %s: %w", what, err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range ranks {
		if !slices.Contains(failed, r) && j.violation == nil {
			j.violation = fmt.Errorf("%s named rank %d, which has not failed", what, r)
		}
	}
	if len(ranks) == 0 && j.violation == nil {
		j.violation = fmt.Errorf("%s named no rank", what)
	}
	j.told++
	return nil
}

// NotifyFailed implements errmgr.Runtime.
func (j *Job) NotifyFailed(ctx context.Context, ranks []int, why string) error {
	return j.ask(ctx, "NotifyFailed", ranks)
}

// Recover implements errmgr.Recoverer: the job restarts from sequence 7.
func (j *Job) Recover(ctx context.Context, r errmgr.Recovery) (int, error) {
	if err := j.ask(ctx, "Recover", r.Lost); err != nil {
		return 0, err
	}
	return 7, nil
}

// Told says whether the job accepted a request.
func (j *Job) Told() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.told > 0
}

// Violation is the first request the contract forbids, if any.
func (j *Job) Violation() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.violation
}

var (
	_ errmgr.Runtime   = (*Job)(nil)
	_ errmgr.Recoverer = (*Job)(nil)
)
