package full

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gompi/components/sstore/central"
	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/snapc/snapctest"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// values resolves the parameters of a process with this component.
func values(t *testing.T, settings ...string) *mca.Values {
	t.Helper()
	params := mca.NewParams()
	fw := mca.NewFramework[snapc.Module](params, snapc.Name, "test", mca.WithParams(snapc.FrameworkParams()...))
	fw.Register(newWithHooks())
	mca.NewFramework[sstore.Module](params, sstore.Name, "test", mca.WithParams(sstore.FrameworkParams()...)).Register(central.New())
	var s []mca.Setting
	for _, kv := range settings {
		k, v, _ := strings.Cut(kv, "=")
		s = append(s, mca.Setting{Name: k, Value: v, Origin: mca.Origin{Source: mca.SourceCommandLine, Where: "--mca"}})
	}
	vals, err := params.ResolveSettings(s)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// fakeRank is a rank's application coordinator as the tests script it.
type fakeRank struct {
	rank    int
	count   uint64
	noApp   bool   // no coordinator connected
	refuse  string // answer the query with this reason
	silent  bool   // never answer
	failErr string // answer the target with this error
	die     bool   // vanish instead of saving
	pid     int
	// onCancel, when set, runs when a Cancel reaches the rank.
	onCancel func(id uint64)

	mu       sync.Mutex
	seen     []snapc.AppRequest
	targeted chan uint64 // each target, as it arrives
}

// cluster is a job of fake ranks on named nodes, with real local
// coordinators behind a fake node link.
type cluster struct {
	t      *testing.T
	g      *global
	locals map[string]*local
	ranks  []*fakeRank
	nodeOf []string
	ref    snapshot.Ref

	busy     sync.WaitGroup // fake ranks at work
	handling sync.WaitGroup // local coordinators running a request
	mu       sync.Mutex
	sent     []snapc.LocalRequest
	sentTo   []string // the node of each of sent
	sendErr  map[string]error
	terminal int
	// gate, when set, holds every LocalRelease until it is closed (a
	// gompirun whose event loop is busy).
	gate chan struct{}
}

func (c *cluster) Send(node string, req snapc.LocalRequest) error {
	c.mu.Lock()
	c.sent = append(c.sent, req)
	c.sentTo = append(c.sentTo, node)
	err, gate := c.sendErr[node], c.gate
	c.mu.Unlock()
	if gate != nil && req.Kind == snapc.LocalRelease {
		<-gate
	}
	if err != nil {
		return err
	}
	l := c.locals[node]
	if req.Kind == snapc.LocalCancel || req.Kind == snapc.LocalDone || req.Kind == snapc.LocalRelease {
		l.Handle(context.Background(), req) // never blocks, as in gompid
		return nil
	}
	c.handling.Add(1)
	go func() {
		defer c.handling.Done()
		c.g.Deliver(l.Handle(context.Background(), req))
	}()
	return nil
}

func (c *cluster) Terminate() {
	c.mu.Lock()
	c.terminal++
	c.mu.Unlock()
}

// port is one node's view of its fake ranks.
type port struct {
	c    *cluster
	node string
}

func (p port) Send(rank int, req snapc.AppRequest) error {
	fr := p.c.ranks[rank]
	if fr.noApp {
		return fmt.Errorf("rank %d: %w", rank, snapc.ErrNoApp)
	}
	fr.mu.Lock()
	fr.seen = append(fr.seen, req)
	fr.mu.Unlock()
	l := p.c.locals[p.node]
	p.c.busy.Add(1)
	go func() {
		defer p.c.busy.Done()
		fr.handle(p.c.t, l, req)
	}()
	return nil
}

func (fr *fakeRank) handle(t *testing.T, l *local, req snapc.AppRequest) {
	if fr.silent {
		return
	}
	switch req.Kind {
	case snapc.Cancel:
		if fr.onCancel != nil {
			fr.onCancel(req.ID)
		}
	case snapc.Query:
		if fr.refuse != "" {
			l.AppReply(fr.rank, snapc.AppReply{ID: req.ID, Kind: snapc.Query, Reason: fr.refuse})
			return
		}
		l.AppReply(fr.rank, snapc.AppReply{ID: req.ID, Kind: snapc.Query, Count: fr.count, Checkpointable: true})
	case snapc.Target:
		fr.targeted <- req.Target
		if fr.die {
			l.AppGone(fr.rank, fmt.Sprintf("rank %d exited with status 1", fr.rank))
			return
		}
		if fr.failErr != "" {
			l.AppReply(fr.rank, snapc.AppReply{ID: req.ID, Kind: snapc.Target, Err: fr.failErr})
			return
		}
		if req.Dir == "" {
			if len(req.Migrate) == 0 {
				t.Errorf("rank %d: target without a directory outside a migration: %+v", fr.rank, req)
			}
			// Held by a migration: channels drained, nothing saved.
			l.AppReply(fr.rank, snapc.AppReply{ID: req.ID, Kind: snapc.Target})
			return
		}
		w, err := snapshot.CreateFile(req.Dir, "app.state")
		if err != nil {
			t.Error(err)
			return
		}
		fmt.Fprintf(w, "rank %d saved at %d", fr.rank, req.Target)
		rec, err := w.Close()
		if err == nil {
			err = snapshot.WriteLocal(req.Dir, &snapshot.LocalMeta{Rank: fr.rank, PID: 100 + fr.rank, Node: "x", CRS: "self",
				Created: time.Now(), Files: []snapshot.FileRecord{rec}})
		}
		if err != nil {
			t.Error(err)
		}
		l.AppReply(fr.rank, snapc.AppReply{ID: req.ID, Kind: snapc.Target})
	}
}

func newCluster(t *testing.T, nodeOf []string, settings ...string) *cluster {
	t.Helper()
	return newClusterWith(t, nodeOf, nil, settings...)
}

// newClusterWith is newCluster whose nodes use wrap(central) as their
// SStore (nil: central) and send progress replies to the global
// coordinator, as gompid does.
func newClusterWith(t *testing.T, nodeOf []string, wrap func(sstore.Module) sstore.Module, settings ...string) *cluster {
	t.Helper()
	return newClusterSpares(t, nodeOf, nil, wrap, settings...)
}

// newClusterSpares is newClusterWith with spare nodes: local coordinators
// that start with no ranks.
func newClusterSpares(t *testing.T, nodeOf, spares []string, wrap func(sstore.Module) sstore.Module, settings ...string) *cluster {
	t.Helper()
	return newClusterOpts(t, clusterOpts{nodeOf: nodeOf, spares: spares, wrap: wrap, settings: settings})
}

// clusterOpts are newClusterOpts's: the job's nodes, spare nodes, a
// wrapper of the nodes' SStore, settings, and for a job whose CRS saves
// ranks from outside, the nodes' Dumper.
type clusterOpts struct {
	nodeOf, spares []string
	wrap           func(sstore.Module) sstore.Module
	settings       []string
	dumper         snapc.Dumper
	fromOutside    bool // FromOutside without a Dumper on the nodes
}

func newClusterOpts(t *testing.T, o clusterOpts) *cluster {
	t.Helper()
	nodeOf, spares, wrap := o.nodeOf, o.spares, o.wrap
	vals := values(t, append([]string{"ft_cr_enabled=1"}, o.settings...)...)
	c := &cluster{t: t, locals: map[string]*local{}, nodeOf: nodeOf, sendErr: map[string]error{},
		ref: snapshot.Ref{Dir: t.TempDir(), Name: snapshot.RefName("feed0001")}}
	nodeRanks := map[string][]int{}
	for r, n := range nodeOf {
		c.ranks = append(c.ranks, &fakeRank{rank: r, count: uint64(10 + r), targeted: make(chan uint64, 10)})
		nodeRanks[n] = append(nodeRanks[n], r)
	}
	for _, n := range spares {
		nodeRanks[n] = nil
	}
	store := storeOf(t, vals)
	if wrap != nil {
		store = wrap(store)
	}
	for n, rs := range nodeRanks {
		notify := func(r snapc.LocalReply) { c.g.Deliver(r) }
		l, err := newLocal(snapc.NodeSpec{Node: n, Ranks: rs, Store: store, Notify: notify, Values: vals, Dumper: o.dumper}, port{c, n})
		if err != nil {
			t.Fatal(err)
		}
		c.locals[n] = l
	}
	g, err := newGlobal(snapc.JobSpec{Job: "feed0001", RankNodes: nodeOf, Ref: c.ref, Values: vals,
		Settings: []mca.Setting{{Name: "btl", Value: "tcp", Origin: mca.Origin{Source: mca.SourceCommandLine, Where: "--mca"}},
			{Name: ParamPauseAt, Value: "x", Origin: mca.Origin{Source: mca.SourceCommandLine}}},
		AMCA:        []string{"ft-enable-cr"},
		Launch:      crs.Launch{Argv: []string{"/bin/app", "-n", "1"}, Dir: "/"},
		FromOutside: o.fromOutside || o.dumper != nil}, c)
	if err != nil {
		t.Fatal(err)
	}
	c.g = g
	t.Cleanup(func() {
		g.Close(errors.New("test over"))
		c.busy.Wait() // before the temporary folders go
	})
	return c
}

func storeOf(t *testing.T, vals *mca.Values) sstore.Module {
	t.Helper()
	m, _, err := central.New().Query(context.Background(), mca.Query{Values: vals, Priority: 20})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (c *cluster) meta() *snapshot.GlobalMeta {
	c.t.Helper()
	m, err := snapshot.ReadGlobal(c.ref)
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

func (c *cluster) kinds(rank int) []snapc.AppRequestKind {
	fr := c.ranks[rank]
	fr.mu.Lock()
	defer fr.mu.Unlock()
	var out []snapc.AppRequestKind
	for _, r := range fr.seen {
		out = append(out, r.Kind)
	}
	return out
}

var twoNodes = []string{"n1", "n1", "n2", "n2"}

func TestCheckpointsCommit(t *testing.T) {
	c := newCluster(t, twoNodes)
	var events []snapc.Event
	res, err := c.g.Checkpoint(t.Context(), snapc.Request{}, func(e snapc.Event) { events = append(events, e) })
	if err != nil {
		t.Fatal(err)
	}
	if res.Seq != 0 || res.Ref != "gompi_global_snapshot_feed0001.ckpt" || res.Dir != c.ref.Dir {
		t.Errorf("result %+v", res)
	}
	var phases []string
	for _, e := range events {
		p := string(e.Phase)
		if e.Node != "" {
			p += "(" + e.Node + ")"
		}
		phases = append(phases, p)
	}
	got := strings.Join(phases, " ")
	if got != "requested query target local_write(n1) local_write(n2) sync commit" &&
		got != "requested query target local_write(n2) local_write(n1) sync commit" {
		t.Errorf("phases %s", got)
	}
	for r := range c.ranks {
		if tg := <-c.ranks[r].targeted; tg != 14 { // the highest count (13) + 1
			t.Errorf("rank %d targeted at %d, want 14", r, tg)
		}
	}
	res, err = c.g.Checkpoint(t.Context(), snapc.Request{}, nil)
	if err != nil || res.Seq != 1 {
		t.Fatalf("second checkpoint: %+v %v", res, err)
	}
	m := c.meta()
	if !reflect.DeepEqual(m.Committed(), []int{0, 1}) || m.Job != "feed0001" || m.Ranks != 4 {
		t.Errorf("metadata: committed %v job %s ranks %d", m.Committed(), m.Job, m.Ranks)
	}
	rec, _ := m.Seq(1)
	want := []snapshot.ProcRecord{{Rank: 0, Node: "n1", CRS: "self"}, {Rank: 1, Node: "n1", CRS: "self"}, {Rank: 2, Node: "n2", CRS: "self"}, {Rank: 3, Node: "n2", CRS: "self"}}
	if !reflect.DeepEqual(rec.Procs, want) {
		t.Errorf("procs %+v", rec.Procs)
	}
	if len(m.Params) != 1 || m.Params[0].Name != "btl" || !slices.Equal(m.Launch.Argv, []string{"/bin/app", "-n", "1"}) || len(m.AMCA) != 1 {
		t.Errorf("job records: params %+v launch %+v amca %v (the test hook must not be stored)", m.Params, m.Launch, m.AMCA)
	}
	p, err := snapshot.ChooseSeq(c.ref, m, -1)
	if err == nil {
		err = p.VerifyAll()
	}
	if err != nil || p.Seq.Seq != 1 {
		t.Errorf("restart point: %v %v", p.Seq.Seq, err)
	}
}

func TestRefusals(t *testing.T) {
	tests := []struct {
		name  string
		setup func(c *cluster)
		want  []string
	}{
		{"not checkpointable", func(c *cluster) { c.ranks[2].refuse = "crs=none cannot save a process" },
			[]string{"checkpoint refused: rank 2 on node n2 cannot be checkpointed: crs=none cannot save a process; no rank was affected"}},
		{"no coordinator", func(c *cluster) { c.ranks[1].noApp = true },
			[]string{"rank 1 on node n1 cannot be checkpointed: rank 1: no application coordinator"}},
		{"two refuse", func(c *cluster) { c.ranks[0].refuse = "a"; c.ranks[3].refuse = "b" },
			[]string{"rank 0 on node n1 cannot be checkpointed: a", "rank 3 on node n2 cannot be checkpointed: b"}},
		{"silent rank", func(c *cluster) { c.ranks[3].silent = true },
			[]string{"rank 3 on node n2 cannot be checkpointed: no answer within 50ms (snapc_full_query_timeout)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, twoNodes, "snapc_full_query_timeout=50ms")
			tt.setup(c)
			_, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil)
			if !errors.Is(err, snapc.ErrRefused) {
				t.Fatalf("err = %v, want ErrRefused", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			// No rank was affected: nothing was recorded, no rank was targeted.
			if _, err := os.Stat(c.ref.Path()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("reference created by a refused checkpoint: %v", err)
			}
			for r := range c.ranks {
				for _, k := range c.kinds(r) {
					if k == snapc.Target {
						t.Errorf("rank %d was asked to save", r)
					}
				}
			}
		})
	}
}

func TestFailuresLeaveSequenceUncommitted(t *testing.T) {
	tests := []struct {
		name  string
		setup func(c *cluster)
		want  string
	}{
		{"rank fails", func(c *cluster) { c.ranks[3].failErr = "disk full" }, "rank 3 on node n2: disk full"},
		{"rank dies", func(c *cluster) { c.ranks[0].die = true }, "rank 0 on node n1: no local snapshot: rank 0 exited with status 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, twoNodes)
			if _, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err != nil {
				t.Fatal(err)
			}
			tt.setup(c)
			var last snapc.Event
			_, err := c.g.Checkpoint(t.Context(), snapc.Request{}, func(e snapc.Event) { last = e })
			if !errors.Is(err, snapc.ErrFailed) || !strings.Contains(err.Error(), tt.want) ||
				!strings.Contains(err.Error(), "sequence 1 of gompi_global_snapshot_feed0001.ckpt stays uncommitted") {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if last.Phase != snapc.PhaseFailed || last.Seq != 1 {
				t.Errorf("last event %+v", last)
			}
			m := c.meta()
			if rec, ok := m.Seq(1); !ok || rec.Committed || !reflect.DeepEqual(m.Committed(), []int{0}) {
				t.Errorf("seq 1 %+v, committed %v", rec, m.Committed())
			}
			// Every rank with a coordinator was told to forget the request.
			for r := range c.ranks {
				if k := c.kinds(r); k[len(k)-1] != snapc.Cancel && !c.ranks[r].die {
					t.Errorf("rank %d saw %v, want a cancel last", r, k)
				}
			}
			// The next checkpoint takes the next number.
			c.ranks[3].failErr, c.ranks[0].die = "", false
			if res, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err != nil || res.Seq != 2 {
				t.Errorf("after the failure: %+v %v", res, err)
			}
		})
	}
}

func TestNodeLostAndClose(t *testing.T) {
	c := newCluster(t, twoNodes, ParamPauseAt+"=local")
	done := make(chan error, 1)
	watch := make(chan snapc.Event, 20)
	go func() {
		_, err := c.g.Checkpoint(context.Background(), snapc.Request{}, func(e snapc.Event) { watch <- e })
		done <- err
	}()
	for wrote := 0; wrote < 2; {
		if e := <-watch; e.Phase == snapc.PhaseLocalWrite {
			wrote++
		}
	}
	c.g.NodeLost("n2", "its daemon was killed")
	if err := <-done; !errors.Is(err, snapc.ErrFailed) || !strings.Contains(err.Error(), "node n2 was lost: its daemon was killed") {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err == nil || !strings.Contains(err.Error(), "node n2 was lost") {
		t.Errorf("checkpoint after the node was lost: %v", err)
	}
	c.g.Close(errors.New("the job is ending"))
	if _, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err == nil || !strings.Contains(err.Error(), "the job is ending") {
		t.Errorf("checkpoint after Close: %v", err)
	}
	if _, err := c.g.AppCheckpoint(t.Context(), 0, 3, crs.Options{}); err == nil {
		t.Errorf("app checkpoint after Close succeeded")
	}
}

// A requester that goes away (gompi-checkpoint killed) does not stop the
// checkpoint: with the test hook holding it at each point, it is released
// and commits.
func TestRequesterGone(t *testing.T) {
	for _, point := range []string{PauseQuery, PauseSeq, PauseLocal, PauseCommit, PauseCommitted} {
		t.Run(point, func(t *testing.T) {
			c := newCluster(t, twoNodes, ParamPauseAt+"="+point+":0")
			ctx, cancel := context.WithCancel(context.Background())
			reached := make(chan struct{})
			var once sync.Once
			want := map[string]snapc.Phase{PauseQuery: snapc.PhaseQuery, PauseSeq: snapc.PhaseQuery, PauseLocal: snapc.PhaseLocalWrite,
				PauseCommit: snapc.PhaseSync, PauseCommitted: snapc.PhaseCommit}[point]
			errc := make(chan error, 1)
			go func() {
				_, err := c.g.Checkpoint(ctx, snapc.Request{}, func(e snapc.Event) {
					if e.Phase == want {
						once.Do(func() { close(reached) })
					}
				})
				errc <- err
			}()
			<-reached
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("waiting requester: %v", err)
			}
			// The next request runs after the first finished.
			res, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil)
			if err != nil || res.Seq != 1 {
				t.Fatalf("next checkpoint: %+v %v", res, err)
			}
			if got := c.meta().Committed(); !reflect.DeepEqual(got, []int{0, 1}) {
				t.Errorf("committed %v, want the abandoned sequence committed too", got)
			}
		})
	}
}

func TestAppCheckpointsMerge(t *testing.T) {
	c := newCluster(t, twoNodes)
	type out struct {
		res snapc.Result
		err error
	}
	outs := make(chan out, 4)
	ask := func(r int) {
		go func() {
			res, err := c.g.AppCheckpoint(t.Context(), r, 42, crs.Options{})
			outs <- out{res, err}
		}()
	}
	for r := range 3 {
		ask(r)
	}
	// Until every rank has asked, the ranks' checkpoint waits, and a
	// tool's request goes first.
	if res, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err != nil || res.Seq != 0 {
		t.Fatalf("tool checkpoint while 3 of 4 ranks asked: %+v %v", res, err)
	}
	for r := range c.ranks {
		<-c.ranks[r].targeted
	}
	select {
	case o := <-outs:
		t.Fatalf("the ranks' checkpoint ran before every rank asked: %+v %v", o.res, o.err)
	default:
	}
	ask(3)
	for range 4 {
		o := <-outs
		if o.err != nil || o.res.Seq != 1 {
			t.Errorf("rank's checkpoint: %+v %v", o.res, o.err)
		}
	}
	for r := range c.ranks {
		if tg := <-c.ranks[r].targeted; tg != 42 {
			t.Errorf("rank %d targeted %d, want the ranks' own 42", r, tg)
		}
	}
	// A rank whose request comes late gets the same result.
	if res, err := c.g.AppCheckpoint(t.Context(), 2, 42, crs.Options{}); err != nil || res.Seq != 1 {
		t.Errorf("late request: %+v %v", res, err)
	}
	if got := c.meta().Committed(); !reflect.DeepEqual(got, []int{0, 1}) {
		t.Errorf("committed %v, want one checkpoint of the tool's and one of the ranks'", got)
	}
	if _, err := c.g.AppCheckpoint(t.Context(), 9, 1, crs.Options{}); err == nil {
		t.Error("request from rank 9 of 4 accepted")
	}
}

func TestTerminate(t *testing.T) {
	c := newCluster(t, []string{"n1"})
	if _, err := c.g.Checkpoint(t.Context(), snapc.Request{Options: crs.Options{Term: true}}, nil); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.terminal != 1 {
		t.Errorf("Terminate called %d times", c.terminal)
	}
	for _, s := range c.sent {
		if s.Kind == snapc.LocalTarget && !s.Options.Term {
			t.Errorf("target without the term option: %+v", s)
		}
	}
}

// A restarted job continues its reference: next numbers, same name.
func TestContinuesReference(t *testing.T) {
	c := newCluster(t, twoNodes)
	os.MkdirAll(c.ref.Path(), 0o755)
	// A committed checkpoint records every rank of its job.
	procs := func(n int) (p []snapshot.ProcRecord) {
		for r := range n {
			p = append(p, snapshot.ProcRecord{Rank: r, Node: "n1", CRS: "self"})
		}
		return p
	}
	old := &snapshot.GlobalMeta{Job: "0ld0b00b", Ranks: 4, Seqs: []snapshot.SeqRecord{
		{Seq: 0, Started: time.Now(), Finished: time.Now(), Committed: true, Procs: procs(4)},
		{Seq: 1, Started: time.Now()}}}
	if err := snapshot.WriteGlobal(c.ref, old); err != nil {
		t.Fatal(err)
	}
	res, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil)
	if err != nil || res.Seq != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	m := c.meta()
	if m.Job != "0ld0b00b" || !reflect.DeepEqual(m.Committed(), []int{0, 2}) {
		t.Errorf("job %s committed %v", m.Job, m.Committed())
	}
	// A job restarted on another rank count (gompi-restart -np) goes on
	// in the reference: the earlier sequences keep their count.
	old.Ranks, old.Seqs[0].Procs, old.Seqs = 3, procs(3), old.Seqs[:1]
	snapshot.WriteGlobal(c.ref, old)
	res, err = c.g.Checkpoint(t.Context(), snapc.Request{}, nil)
	if err != nil {
		t.Fatalf("checkpoint into a reference of 3 ranks: %v", err)
	}
	m = c.meta()
	s0, _ := m.Seq(0)
	sn, _ := m.Seq(res.Seq)
	if m.Ranks != 4 || m.SeqRanks(*s0) != 3 || m.SeqRanks(*sn) != 4 {
		t.Errorf("after a checkpoint at 4 ranks into a reference of 3: Ranks %d, sequence 0 of %d, sequence %d of %d", m.Ranks, m.SeqRanks(*s0), res.Seq, m.SeqRanks(*sn))
	}
	os.WriteFile(c.ref.MetaPath(), []byte("garbage\n"), 0o644)
	if _, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); !errors.Is(err, snapshot.ErrCorrupt) {
		t.Errorf("corrupt metadata: %v", err)
	}
	if b, _ := os.ReadFile(c.ref.MetaPath()); string(b) != "garbage\n" {
		t.Errorf("corrupt metadata was overwritten: %q", b)
	}
}

// The daemon's pause (sync) ends with a cancel.
func TestSyncPauseEndsOnCancel(t *testing.T) {
	c := newCluster(t, []string{"n1"}, ParamPauseAt+"=sync:0")
	errc := make(chan error, 1)
	synced := make(chan struct{})
	var once sync.Once
	go func() {
		_, err := c.g.Checkpoint(context.Background(), snapc.Request{}, func(e snapc.Event) {
			if e.Phase == snapc.PhaseLocalWrite {
				once.Do(func() { close(synced) })
			}
		})
		errc <- err
	}()
	<-synced
	c.g.Close(errors.New("gompirun caught SIGINT"))
	if err := <-errc; !errors.Is(err, snapc.ErrFailed) || !strings.Contains(err.Error(), "SIGINT") {
		t.Fatalf("err = %v", err)
	}
}

func TestPausePoint(t *testing.T) {
	tests := []struct {
		in    string
		want  PausePoint
		err   string
		at    string
		seq   int
		pause bool
	}{
		{in: "", want: PausePoint{Seq: -1}, at: "query", seq: 0},
		{in: "local", want: PausePoint{"local", -1}, at: "local", seq: 7, pause: true},
		{in: " sync:2 ", want: PausePoint{"sync", 2}, at: "sync", seq: 2, pause: true},
		{in: "sync:2", want: PausePoint{"sync", 2}, at: "sync", seq: 1},
		{in: "commit", want: PausePoint{"commit", -1}, at: "committed", seq: 0},
		{in: "later", err: "want one of query, seq, write"},
		{in: "seq:-1", err: "not a sequence number"},
		{in: "seq:x", err: "not a sequence number"},
	}
	for _, tt := range tests {
		p, err := ParsePausePoint(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || p != tt.want || p.At(tt.at, tt.seq) != tt.pause {
			t.Errorf("%q = %+v %v; At(%s, %d) = %v", tt.in, p, err, tt.at, tt.seq, p.At(tt.at, tt.seq))
		}
	}
}

func FuzzParsePausePoint(f *testing.F) {
	for _, s := range []string{"", "query", "sync:3", "write:", ":1", "commit:99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePausePoint(s)
		if err != nil {
			return
		}
		again, err := ParsePausePoint(p.String())
		if err != nil || again != p {
			t.Fatalf("%q -> %+v -> %q -> %+v %v", s, p, p.String(), again, err)
		}
	})
}

func TestComponent(t *testing.T) {
	tests := []struct {
		settings []string
		answers  bool
	}{
		{nil, false},
		{[]string{"ft_cr_enabled=1"}, true},
		{[]string{"snapc=full"}, true},
		{[]string{"ft_cr_enabled=1", ParamPauseAt + "=never"}, false},
	}
	for _, tt := range tests {
		m, _, err := newWithHooks().Query(context.Background(), mca.Query{Values: values(t, tt.settings...), Priority: 20})
		if tt.answers != (err == nil) {
			t.Errorf("%v: %v", tt.settings, err)
		}
		if err == nil {
			if _, ok := m.(snapc.Coordinator); !ok {
				t.Errorf("module does not coordinate")
			}
			if _, err := m.Checkpoint(t.Context(), snapc.Request{}); !errors.Is(err, snapc.ErrNotCoordinator) {
				t.Errorf("unbound module checkpoints: %v", err)
			}
		}
	}
	vals := values(t)
	if _, err := newGlobal(snapc.JobSpec{Job: "x", Values: vals, Ref: snapshot.Ref{Dir: "/", Name: "r"}}, nil); err == nil {
		t.Error("global coordinator of a job without ranks")
	}
	if _, err := newLocal(snapc.NodeSpec{Node: "n"}, nil); err == nil {
		t.Error("local coordinator without storage")
	}
}

// drainingStore is central whose Sync reports a drain of three files, as
// stage does, each report sent at once.
type drainingStore struct{ sstore.Module }

func (d drainingStore) Sync(ctx context.Context, ref snapshot.Ref, seq int, locals []sstore.Local) error {
	for i := 0; i <= 3; i++ {
		sstore.ReportProgress(ctx, sstore.Progress{Files: 3, FilesDone: i, Bytes: 3 << 20, BytesDone: int64(i) << 20, Elapsed: time.Duration(i+1) * time.Second})
	}
	return d.Module.Sync(ctx, ref, seq, locals)
}

func TestDrainProgress(t *testing.T) {
	c := newClusterWith(t, twoNodes, func(m sstore.Module) sstore.Module { return drainingStore{m} })
	var drains []snapc.Event
	var sawSync bool
	_, err := c.g.Checkpoint(t.Context(), snapc.Request{}, func(e snapc.Event) {
		switch e.Phase {
		case snapc.PhaseDrain:
			if sawSync {
				t.Errorf("drain progress after the sync ended: %+v", e)
			}
			drains = append(drains, e)
		case snapc.PhaseSync:
			sawSync = true
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// Each node passes its first report and its last (every file done);
	// those in between fall within progressEvery of the first.
	last := map[string]sstore.Progress{}
	for _, e := range drains {
		if e.Progress == nil || e.Node == "" || e.Progress.Node != e.Node || e.Seq != 0 {
			t.Fatalf("drain event %+v", e)
		}
		last[e.Node] = *e.Progress
	}
	if len(drains) != 4 || len(last) != 2 {
		t.Fatalf("%d drain events from %d nodes, want 2 from each of 2: %+v", len(drains), len(last), drains)
	}
	for n, p := range last {
		if p.FilesDone != 3 || p.BytesDone != 3<<20 {
			t.Errorf("node %s: last progress %+v", n, p)
		}
	}
	if got, want := describeProgress(last["n1"]), "3/3 files, 3.0/3.0 MiB, 0.8 MiB/s"; got != want {
		t.Errorf("describeProgress = %q, want %q", got, want)
	}
}

func TestDescribeProgress(t *testing.T) {
	tests := []struct {
		p    sstore.Progress
		want string
	}{
		{sstore.Progress{Files: 4, Bytes: 8 << 20}, "0/4 files, 0.0/8.0 MiB, 0.0 MiB/s"},
		{sstore.Progress{Files: 4, FilesDone: 1, Bytes: 8 << 20, BytesDone: 2 << 20, Stored: 1 << 20, Elapsed: time.Second},
			"1/4 files, 2.0/8.0 MiB, 2.0 MiB/s, stored 1.0 MiB (50 %), ETA 3.0 s"},
	}
	for _, tt := range tests {
		if got := describeProgress(tt.p); got != tt.want {
			t.Errorf("describeProgress(%+v) = %q, want %q", tt.p, got, tt.want)
		}
	}
}

// TestConformance runs the SnapC kit on full as selected with C/R on, its
// nodes storing with central.
func TestConformance(t *testing.T) {
	vals := values(t, "ft_cr_enabled=1")
	snapctest.Run(t, func(t *testing.T) snapc.Module {
		m, _, err := New().Query(t.Context(), mca.Query{Values: vals, Priority: 20})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}, snapctest.Options{Values: vals, Store: storeOf(t, vals)})
}

// A checkpoint's reference is its owner's only (folders 0700, files 0600),
// or readable by the group with sstore_base_group_readable (0750, 0640):
// every folder and file of it, written by the coordinator, the SStore and
// the ranks.
func TestSnapshotModes(t *testing.T) {
	for _, tt := range []struct {
		settings  []string
		dir, file os.FileMode
	}{
		{nil, 0o700, 0o600},
		{[]string{sstore.ParamGroupReadable + "=1"}, 0o750, 0o640},
	} {
		t.Run(fmt.Sprint(tt.settings), func(t *testing.T) {
			c := newCluster(t, twoNodes, tt.settings...)
			if _, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err != nil {
				t.Fatal(err)
			}
			files := 0
			err := filepath.WalkDir(c.ref.Path(), func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				fi, err := d.Info()
				if err != nil {
					return err
				}
				want := tt.file
				if d.IsDir() {
					want = tt.dir
				} else {
					files++
				}
				if fi.Mode().Perm() != want {
					t.Errorf("%s: mode %04o, want %04o", path, fi.Mode().Perm(), want)
				}
				return nil
			})
			if err != nil || files < 1+2*len(twoNodes) {
				t.Fatalf("walked %d files: %v", files, err)
			}
		})
	}
}
