// Package snapctest is the conformance kit every SnapC component must pass.
// A component that coordinates (snapc.Coordinator) runs a job of four
// ranks on two nodes: the kit is gompirun's NodeLink (requests routed to
// the nodes' local coordinators, replies delivered back), gompid's AppPort
// and the ranks (each answers a query and saves a small local snapshot at
// its target, or refuses, or fails, as the case says). It checks that a
// request ends committed or failed, never half: a committed sequence is in
// the global metadata and verifies; a refusal or a failure leaves no
// committed sequence and the earlier ones intact. A module that is not the
// coordinator refuses with ErrNotCoordinator; a component for C/R off
// refuses every request with ErrDisabled.
package snapctest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// Options describe the component under test.
type Options struct {
	// Disabled is set for a component for C/R off.
	Disabled bool
	// Values are the job's resolved parameters (C/R on).
	Values *mca.Values
	// Store is the SStore module the nodes use.
	Store sstore.Module
}

// Run runs the kit. newModule returns a fresh module, as selected.
func Run(t *testing.T, newModule func(t *testing.T) snapc.Module, opts Options) {
	t.Helper()
	t.Run("not-coordinator", func(t *testing.T) {
		_, err := newModule(t).Checkpoint(t.Context(), snapc.Request{})
		want := snapc.ErrNotCoordinator
		if opts.Disabled {
			want = snapc.ErrDisabled
		}
		if !errors.Is(err, want) {
			t.Errorf("Checkpoint outside a job: %v, want %v", err, want)
		}
	})
	if opts.Disabled {
		return
	}
	job := func(t *testing.T) *Job {
		co, ok := newModule(t).(snapc.Coordinator)
		if !ok {
			t.Fatal("the component neither coordinates nor is disabled")
		}
		return NewJob(t, co, opts)
	}
	t.Run("commits", func(t *testing.T) {
		j := job(t)
		j.commit(t)
		j.commit(t)
	})
	t.Run("refusal-leaves-no-sequence", func(t *testing.T) {
		j := job(t)
		j.commit(t)
		j.rank[2].refuse = "kit: not checkpointable"
		before := j.records(t)
		j.fails(t)
		if after := j.records(t); after != before {
			t.Errorf("a refused request left a sequence: %d sequence records before, %d after", before, after)
		}
	})
	t.Run("failure-leaves-earlier-intact", func(t *testing.T) {
		j := job(t)
		j.commit(t)
		j.rank[1].fail = "kit: cannot save"
		j.fails(t)
		j.rank[1].fail = ""
		j.commit(t) // a failed sequence does not block the next
	})
	t.Run("node-lost", func(t *testing.T) {
		j := job(t)
		j.commit(t)
		j.g.NodeLost("n2", "kit: node lost")
		j.fails(t)
	})
}

// Job is a job of four ranks, 0 and 1 on node n1, 2 and 3 on n2.
type Job struct {
	t      *testing.T
	g      snapc.Global
	locals map[string]snapc.Local
	rank   []*rank
	ref    snapshot.Ref
	busy   sync.WaitGroup
	done   []int // the sequences committed so far
}

type rank struct {
	n      int
	refuse string // answer the query with this reason
	fail   string // fail the target with this error, after saving
}

var nodeOf = []string{"n1", "n1", "n2", "n2"}

// NewJob starts the global coordinator and the local ones of co.
func NewJob(t *testing.T, co snapc.Coordinator, opts Options) *Job {
	j := &Job{t: t, locals: map[string]snapc.Local{}, ref: snapshot.Ref{Dir: t.TempDir(), Name: snapshot.RefName("kit0001")}}
	for r := range nodeOf {
		j.rank = append(j.rank, &rank{n: r})
	}
	for _, n := range []string{"n1", "n2"} {
		var rs []int
		for r, rn := range nodeOf {
			if rn == n {
				rs = append(rs, r)
			}
		}
		l, err := co.NewLocal(snapc.NodeSpec{Node: n, Ranks: rs, Store: opts.Store, Values: opts.Values,
			Notify: func(r snapc.LocalReply) { j.g.Deliver(r) }}, port{j, n})
		if err != nil {
			t.Fatalf("local coordinator of %s: %v", n, err)
		}
		j.locals[n] = l
	}
	g, err := co.NewGlobal(snapc.JobSpec{Job: "kit0001", RankNodes: nodeOf, Ref: j.ref, Values: opts.Values,
		Launch: crs.Launch{Argv: []string{"/bin/kit"}, Dir: "/"}}, link{j})
	if err != nil {
		t.Fatalf("global coordinator: %v", err)
	}
	j.g = g
	t.Cleanup(func() {
		g.Close(errors.New("snapctest: test over"))
		j.busy.Wait() // before the temporary folders go
	})
	return j
}

// checkpoint runs one request, failing the test after a bound instead of
// hanging.
func (j *Job) checkpoint(t *testing.T) (snapc.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := j.g.Checkpoint(ctx, snapc.Request{}, nil)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("checkpoint did not end within 30s")
	}
	return res, err
}

// committed returns the committed sequences of the global metadata.
func (j *Job) committed(t *testing.T) []int {
	t.Helper()
	m, err := snapshot.ReadGlobal(j.ref)
	if err != nil {
		t.Fatalf("global metadata: %v", err)
	}
	return m.Committed()
}

// commit runs a checkpoint that must commit a sequence newer than every
// one before, and checks the committed sequences.
func (j *Job) commit(t *testing.T) {
	t.Helper()
	res, err := j.checkpoint(t)
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if len(j.done) > 0 && res.Seq <= j.done[len(j.done)-1] {
		t.Errorf("committed seq %d after seq %d", res.Seq, j.done[len(j.done)-1])
	}
	if res.Ref != j.ref.Name || res.Dir != j.ref.Dir {
		t.Errorf("result %+v, want a sequence of %s", res, j.ref.Path())
	}
	j.done = append(j.done, res.Seq)
	j.intact(t)
}

// intact checks the committed sequences are those committed so far, and
// each verifies.
func (j *Job) intact(t *testing.T) {
	t.Helper()
	m, err := snapshot.ReadGlobal(j.ref)
	if err != nil {
		t.Fatalf("global metadata: %v", err)
	}
	if got := m.Committed(); !slices.Equal(got, j.done) {
		t.Fatalf("committed sequences %v, want %v", got, j.done)
	}
	for _, s := range j.done {
		p, err := snapshot.ChooseSeq(j.ref, m, s)
		if err == nil {
			err = p.VerifyAll()
		}
		if err != nil {
			t.Errorf("committed seq %d does not verify: %v", s, err)
		}
	}
}

// records is the number of sequences, committed or not, in the global
// metadata.
func (j *Job) records(t *testing.T) int {
	t.Helper()
	m, err := snapshot.ReadGlobal(j.ref)
	if err != nil {
		t.Fatalf("global metadata: %v", err)
	}
	return len(m.Seqs)
}

// fails runs a checkpoint that must fail, leaving the committed sequences
// as they were, intact.
func (j *Job) fails(t *testing.T) {
	t.Helper()
	if res, err := j.checkpoint(t); err == nil {
		t.Fatalf("checkpoint committed %+v, want a failure", res)
	}
	j.intact(t)
}

// link is gompirun's side: requests to the nodes, replies back.
type link struct{ j *Job }

func (l link) Send(node string, req snapc.LocalRequest) error {
	lc, ok := l.j.locals[node]
	if !ok {
		return fmt.Errorf("snapctest: no node %s", node)
	}
	if req.Kind == snapc.LocalCancel || req.Kind == snapc.LocalDone || req.Kind == snapc.LocalRelease {
		lc.Handle(context.Background(), req) // never blocks, as in gompid
		return nil
	}
	l.j.busy.Go(func() { l.j.g.Deliver(lc.Handle(context.Background(), req)) })
	return nil
}

func (l link) Terminate() {}

// port is gompid's side: requests to the node's ranks.
type port struct {
	j    *Job
	node string
}

func (p port) Send(r int, req snapc.AppRequest) error {
	if r < 0 || r >= len(p.j.rank) || nodeOf[r] != p.node {
		return fmt.Errorf("snapctest: rank %d is not on node %s: %w", r, p.node, snapc.ErrNoApp)
	}
	rk, l := p.j.rank[r], p.j.locals[p.node]
	p.j.busy.Go(func() { rk.handle(p.j.t, l, req) })
	return nil
}

// handle answers as a rank's application coordinator does.
func (rk *rank) handle(t *testing.T, l snapc.Local, req snapc.AppRequest) {
	switch req.Kind {
	case snapc.Query:
		if rk.refuse != "" {
			l.AppReply(rk.n, snapc.AppReply{ID: req.ID, Kind: snapc.Query, Reason: rk.refuse})
			return
		}
		l.AppReply(rk.n, snapc.AppReply{ID: req.ID, Kind: snapc.Query, Count: uint64(10 + rk.n), Checkpointable: true})
	case snapc.Target:
		// A failing rank fails after its files are written (its CRS saved,
		// then something after failed): only its answer says the local
		// snapshot is not to be trusted.
		if err := save(req.Dir, rk.n, req.Target); err != nil {
			t.Errorf("rank %d: %v", rk.n, err)
			l.AppReply(rk.n, snapc.AppReply{ID: req.ID, Kind: snapc.Target, Err: err.Error()})
			return
		}
		l.AppReply(rk.n, snapc.AppReply{ID: req.ID, Kind: snapc.Target, Err: rk.fail})
	}
}

func save(dir string, r int, target uint64) error {
	w, err := snapshot.CreateFile(dir, "app.state")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "rank %d saved at %d", r, target)
	rec, err := w.Close()
	if err != nil {
		return err
	}
	return snapshot.WriteLocal(dir, &snapshot.LocalMeta{Rank: r, PID: 100 + r, Node: nodeOf[r], CRS: "self",
		Created: time.Unix(1_700_000_000, 0), Files: []snapshot.FileRecord{rec}})
}
