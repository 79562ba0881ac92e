package full

import (
	"context"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
)

// threeRanks: ranks 0 and 1 on n1, rank 2 on n2. Migrating rank 1 saves
// one rank of n1 and holds the other, and holds all of n2.
var threeRanks = []string{"n1", "n1", "n2"}

func (c *cluster) seen(rank int) []snapc.AppRequest {
	fr := c.ranks[rank]
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return slices.Clone(fr.seen)
}

// sentKind lists the nodes sent a request of kind, in order.
func (c *cluster) sentKind(kind snapc.LocalKind) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for i, r := range c.sent {
		if r.Kind == kind {
			out = append(out, c.sentTo[i])
		}
	}
	return out
}

// sentOf is every request of kind sent, in order.
func (c *cluster) sentOf(kind snapc.LocalKind) []snapc.LocalRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []snapc.LocalRequest
	for _, r := range c.sent {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// held is the global coordinator's hold, for the tests.
func (c *cluster) held() *hold {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	return c.g.held
}

// waitReleased waits until the hold is over: every node was told.
func (c *cluster) waitReleased() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for c.held() != nil {
		if time.Now().After(deadline) {
			c.t.Fatal("still held")
		}
		time.Sleep(time.Millisecond)
	}
}

// waitQueued waits until n requests are queued and the coordinator's
// worker waits for the hold to end (it starts nothing before). It fails
// the test if a request started meanwhile.
func (c *cluster) waitQueued(n int) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.g.mu.Lock()
		queued, cur, holding := c.g.queue.Len(), c.g.cur, c.g.state == loopHolding
		c.g.mu.Unlock()
		if cur != nil {
			c.t.Fatalf("request %d started while the ranks are held", cur.id)
		}
		if queued == n && holding {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d requests queued, want %d", queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// migrate runs a migration's checkpoint of ranks and returns its result
// and the events it reported.
func (c *cluster) migrate(ranks ...int) (snapc.Result, []snapc.Event, error) {
	var evs []snapc.Event
	res, err := c.g.Checkpoint(c.t.Context(), snapc.Request{Ranks: ranks}, func(e snapc.Event) { evs = append(evs, e) })
	return res, evs, err
}

func TestMigrationHoldsUntilRelease(t *testing.T) {
	c := newCluster(t, threeRanks)
	res, evs, err := c.migrate(1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Seq != 0 || res.Ref != c.ref.Name {
		t.Errorf("result %+v", res)
	}

	// The sequence: committed, a migration's, with rank 1's record only.
	m := c.meta()
	rec, ok := m.Seq(0)
	if !ok || !rec.Committed || !rec.Migrate {
		t.Fatalf("seq 0: %+v", rec)
	}
	if want := []snapshot.ProcRecord{{Rank: 1, Node: "n1", CRS: "self"}}; !reflect.DeepEqual(rec.Procs, want) {
		t.Errorf("procs %+v, want %+v", rec.Procs, want)
	}
	if len(m.Committed()) != 0 {
		t.Errorf("restart points %v: a migration's sequence is none", m.Committed())
	}
	if _, err := snapshot.ChooseSeq(c.ref, m, -1); !errors.Is(err, snapshot.ErrNotCommitted) {
		t.Errorf("restart from a reference with only a migration: %v", err)
	}
	if _, err := snapshot.ReadLocal(c.ref.LocalPath(0, 1)); err != nil {
		t.Errorf("rank 1's local snapshot: %v", err)
	}
	for _, r := range []int{0, 2} {
		if _, err := os.Stat(c.ref.LocalPath(0, r)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("held rank %d has a local snapshot: %v", r, err)
		}
	}

	// What the progress said.
	var phases []string
	details := map[snapc.Phase]string{}
	for _, e := range evs {
		p := string(e.Phase)
		if e.Node != "" {
			p += "(" + e.Node + ")"
			details[snapc.Phase(p)] = e.Detail
		} else {
			details[e.Phase] = e.Detail
		}
		phases = append(phases, p)
	}
	if got := strings.Join(phases, " "); got != "requested query target local_write(n1) local_write(n2) sync commit" &&
		got != "requested query target local_write(n2) local_write(n1) sync commit" {
		t.Errorf("phases %s", got)
	}
	for p, want := range map[snapc.Phase]string{
		snapc.PhaseRequested: "a migration of ranks [1]",
		snapc.PhaseQuery:     "3 ranks can be checkpointed; target safe point 13; saving ranks [1] for a migration, the others are held",
		snapc.PhaseTarget:    "for a migration (not a restart point); ranks [1] save at safe point 13",
		"local_write(n1)":    "1 local snapshots written, 1 ranks held unsaved",
		"local_write(n2)":    "0 local snapshots written, 1 ranks held unsaved",
		snapc.PhaseSync:      "1 local snapshots stable",
		snapc.PhaseCommit:    "ranks [1] saved, every rank holds until the release",
	} {
		if !strings.Contains(details[p], want) {
			t.Errorf("%s: %q lacks %q", p, details[p], want)
		}
	}

	// The ranks: each was asked the same target; rank 1 with a directory,
	// the others without, and all know the migration.
	for r := range c.ranks {
		var tg *snapc.AppRequest
		for _, q := range c.seen(r) {
			if q.Kind == snapc.Target {
				tg = &q
			}
		}
		if tg == nil {
			t.Fatalf("rank %d got no target", r)
		}
		if tg.Target != 13 || !reflect.DeepEqual(tg.Migrate, []int{1}) || (tg.Dir != "") != (r == 1) {
			t.Errorf("rank %d target %+v", r, *tg)
		}
	}
	if got := c.sentKind(snapc.LocalTarget); !reflect.DeepEqual(got, []string{"n1", "n2"}) {
		t.Errorf("targets went to %v, want every node", got)
	}
	if got := c.sentKind(snapc.LocalSync); !reflect.DeepEqual(got, []string{"n1"}) {
		t.Errorf("syncs went to %v, want only rank 1's node", got)
	}
	if got := c.sentKind(snapc.LocalDone); len(got) != 0 {
		t.Errorf("done sent to %v while the ranks are held", got)
	}

	// A request during the hold waits for the release.
	if c.held() == nil {
		t.Fatal("nothing held after the migration's commit")
	}
	var released atomic.Bool
	next := make(chan error, 1)
	go func() {
		res, err := c.g.Checkpoint(context.Background(), snapc.Request{}, func(e snapc.Event) {
			if !released.Load() {
				t.Errorf("event of the next request before the release: %+v", e)
			}
		})
		if err == nil && res.Seq != 1 {
			t.Errorf("next checkpoint took seq %d, want 1", res.Seq)
		}
		next <- err
	}()
	c.waitQueued(1)
	for r := range c.ranks {
		if n := len(c.seen(r)); n != 2 {
			t.Errorf("rank %d saw %d requests during the hold, want its query and target", r, n)
		}
	}

	released.Store(true)
	peers := map[int]map[string]string{1: {"tcp": "10.0.0.3:4000"}}
	if err := c.g.Release(snapc.Release{Leave: []int{1}, Peers: peers}); err != nil {
		t.Fatal(err)
	}
	// The queued request runs once every node was told.
	if err := <-next; err != nil {
		t.Fatalf("the queued checkpoint after the release: %v", err)
	}
	if got := c.sentKind(snapc.LocalRelease); !reflect.DeepEqual(got, []string{"n1", "n2"}) {
		t.Errorf("releases went to %v", got)
	}
	for _, lr := range c.sentOf(snapc.LocalRelease) {
		if lr.ID != c.sentOf(snapc.LocalTarget)[0].ID || lr.Seq != 0 || !reflect.DeepEqual(lr.Leave, []int{1}) || !reflect.DeepEqual(lr.Peers, peers) {
			t.Errorf("release %+v", lr)
		}
	}
	for r := range c.ranks {
		seen := c.seen(r)
		if len(seen) < 3 {
			t.Fatalf("rank %d saw %d requests, want a release third", r, len(seen))
		}
		if rel := seen[2]; rel.Kind != snapc.ReleaseHold || rel.Leave != (r == 1) || !reflect.DeepEqual(rel.Peers, peers) {
			t.Errorf("rank %d: third request %+v, want a release (leave %v)", r, rel, r == 1)
		}
	}
	if got := c.meta().Committed(); !reflect.DeepEqual(got, []int{1}) {
		t.Errorf("restart points %v, want [1]", got)
	}
	if err := c.g.Release(snapc.Release{}); err == nil || !strings.Contains(err.Error(), "no migration checkpoint holds") {
		t.Errorf("second release: %v", err)
	}
}

// Release never waits for the node link (gompirun calls it from the event
// loop that delivers the link's messages); the hold lasts until every node
// was told.
func TestReleaseDoesNotBlock(t *testing.T) {
	c := newCluster(t, threeRanks)
	if _, _, err := c.migrate(1); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	c.mu.Lock()
	c.gate = gate
	c.mu.Unlock()
	if err := c.g.Release(snapc.Release{Leave: []int{1}}); err != nil {
		t.Fatal(err)
	}
	if err := c.g.Release(snapc.Release{Leave: []int{1}}); err == nil || !strings.Contains(err.Error(), "being released already") {
		t.Errorf("second release while the first is sent: %v", err)
	}
	next := make(chan error, 1)
	go func() {
		_, err := c.g.Checkpoint(context.Background(), snapc.Request{}, nil)
		next <- err
	}()
	c.waitQueued(1)
	if c.held() == nil {
		t.Fatal("hold over before the nodes were told")
	}
	close(gate)
	if err := <-next; err != nil {
		t.Fatalf("queued checkpoint: %v", err)
	}
	if got := c.sentKind(snapc.LocalRelease); !reflect.DeepEqual(got, []string{"n1", "n2"}) {
		t.Errorf("releases went to %v", got)
	}
}

func TestReleaseWithoutHold(t *testing.T) {
	c := newCluster(t, threeRanks)
	if err := c.g.Release(snapc.Release{}); err == nil {
		t.Error("release of a job that was never held")
	}
	if _, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.g.Release(snapc.Release{Leave: []int{1}}); err == nil {
		t.Error("release after a checkpoint of the whole job")
	}
	if got := c.sentKind(snapc.LocalRelease); len(got) != 0 {
		t.Errorf("releases sent to %v", got)
	}
}

// A release whose Leave names a rank the migration did not save is
// refused and keeps the hold; an empty one resumes every rank.
func TestReleaseChecksLeave(t *testing.T) {
	c := newCluster(t, threeRanks)
	if _, _, err := c.migrate(2); err != nil {
		t.Fatal(err)
	}
	for _, leave := range [][]int{{0}, {2, 2}, {5}} {
		if err := c.g.Release(snapc.Release{Leave: leave}); err == nil {
			t.Errorf("release with leave %v accepted", leave)
		}
	}
	if c.held() == nil || len(c.sentKind(snapc.LocalRelease)) != 0 {
		t.Fatal("a refused release ended the hold")
	}
	if err := c.g.Release(snapc.Release{}); err != nil {
		t.Fatal(err)
	}
	c.waitReleased()
	for r := range c.ranks {
		seen := c.seen(r)
		if last := seen[len(seen)-1]; last.Kind != snapc.ReleaseHold || last.Leave {
			t.Errorf("rank %d: last %+v, want a release that resumes it", r, last)
		}
	}
}

func TestMigrationRefused(t *testing.T) {
	tests := []struct {
		name string
		req  snapc.Request
		want string
	}{
		{"term", snapc.Request{Ranks: []int{1}, Options: crs.Options{Term: true}}, "cannot end the job (term)"},
		{"stop", snapc.Request{Ranks: []int{1}, Options: crs.Options{Stop: true}}, "cannot stop the ranks (stop)"},
		{"beyond", snapc.Request{Ranks: []int{0, 3}}, "migration of rank 3: the job has ranks 0 to 2"},
		{"negative", snapc.Request{Ranks: []int{-1}}, "migration of rank -1"},
		{"twice", snapc.Request{Ranks: []int{2, 0, 2}}, "names rank 2 twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, threeRanks)
			_, err := c.g.Checkpoint(t.Context(), tt.req, nil)
			if !errors.Is(err, snapc.ErrRefused) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrRefused with %q", err, tt.want)
			}
			if _, err := os.Stat(c.ref.Path()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("reference created by a refused migration: %v", err)
			}
			for r := range c.ranks {
				if n := len(c.seen(r)); n != 0 {
					t.Errorf("rank %d got %d requests", r, n)
				}
			}
		})
	}
}

// A failure before the commit cancels the migration on every rank, leaves
// its sequence uncommitted and holds nothing.
func TestMigrationFailure(t *testing.T) {
	tests := []struct {
		name  string
		setup func(c *cluster)
		want  string
	}{
		{"held rank fails", func(c *cluster) { c.ranks[2].failErr = "channels would not drain" }, "rank 2 on node n2: channels would not drain"},
		{"moving rank fails", func(c *cluster) { c.ranks[1].failErr = "disk full" }, "rank 1 on node n1: disk full"},
		{"moving rank refuses", func(c *cluster) { c.ranks[1].refuse = "crs=none" }, "rank 1 on node n1 cannot be checkpointed: crs=none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, threeRanks)
			tt.setup(c)
			_, evs, err := c.migrate(1)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if last := evs[len(evs)-1]; last.Phase != snapc.PhaseFailed {
				t.Errorf("last event %+v", last)
			}
			if c.held() != nil {
				t.Error("a failed migration holds the ranks")
			}
			if err := c.g.Release(snapc.Release{}); err == nil {
				t.Error("release after a failed migration")
			}
			if m, err := snapshot.ReadGlobal(c.ref); err == nil {
				if rec, ok := m.Seq(0); ok && rec.Committed {
					t.Errorf("seq 0 committed: %+v", rec)
				}
			}
			if got := c.sentKind(snapc.LocalCancel); !reflect.DeepEqual(got, []string{"n1", "n2"}) {
				t.Errorf("cancels went to %v, want every node", got)
			}
			for r := range c.ranks {
				if k := c.kinds(r); k[len(k)-1] != snapc.Cancel {
					t.Errorf("rank %d saw %v, want a cancel last", r, k)
				}
			}
			// Nothing waits for a release: the next checkpoint runs.
			c.ranks[2].failErr, c.ranks[1].failErr, c.ranks[1].refuse = "", "", ""
			if _, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err != nil {
				t.Errorf("after the failure: %v", err)
			}
		})
	}
}

// A lost node, with held ranks or without (a destination), ends the hold:
// the job is recovered; so does Close.
func TestHoldEnds(t *testing.T) {
	tests := []struct {
		name string
		end  func(c *cluster)
		next string // the queued checkpoint's error ("" = it commits)
	}{
		{"node with held ranks lost", func(c *cluster) { c.g.NodeLost("n2", "its daemon was killed") }, "node n2 was lost: its daemon was killed"},
		{"destination lost", func(c *cluster) { c.g.NodeLost("n3", "its daemon was killed") }, ""},
		{"job ends", func(c *cluster) { c.g.Close(errors.New("the job is ending")) }, "the job is ending"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClusterSpares(t, threeRanks, []string{"n3"}, nil)
			if _, _, err := c.migrate(1); err != nil {
				t.Fatal(err)
			}
			next := make(chan error, 1)
			go func() {
				_, err := c.g.Checkpoint(context.Background(), snapc.Request{}, nil)
				next <- err
			}()
			c.waitQueued(1)
			tt.end(c)
			if c.held() != nil {
				t.Fatal("still held")
			}
			if err := c.g.Release(snapc.Release{}); err == nil || !strings.Contains(err.Error(), "no migration checkpoint holds") {
				t.Errorf("release: %v", err)
			}
			if got := c.sentKind(snapc.LocalRelease); len(got) != 0 {
				t.Errorf("releases sent to %v", got)
			}
			err := <-next
			if tt.next == "" && err != nil || tt.next != "" && (err == nil || !strings.Contains(err.Error(), tt.next)) {
				t.Errorf("queued checkpoint: %v, want %q", err, tt.next)
			}
		})
	}
}

// After a migration moved rank 1 to the spare node n3, Place and SetRanks
// send the next checkpoint there; the release still goes to the nodes
// that held the ranks, whatever the placement says by then.
func TestPlaceAfterMigration(t *testing.T) {
	c := newClusterSpares(t, threeRanks, []string{"n3"}, nil)
	if _, _, err := c.migrate(1); err != nil {
		t.Fatal(err)
	}
	// gompirun moves the rank, then releases.
	c.locals["n1"].SetRanks([]int{0})
	c.locals["n3"].SetRanks([]int{1})
	c.g.Place([]string{"n1", "n3", "n2"})
	if err := c.g.Release(snapc.Release{Leave: []int{1}}); err != nil {
		t.Fatal(err)
	}
	c.waitReleased()
	if got := c.sentKind(snapc.LocalRelease); !reflect.DeepEqual(got, []string{"n1", "n2"}) {
		t.Errorf("releases went to %v, want the nodes that held the ranks", got)
	}
	// n1 no longer runs rank 1, but held it: rank 1 is told to leave.
	seen := c.seen(1)
	if last := seen[len(seen)-1]; last.Kind != snapc.ReleaseHold || !last.Leave {
		t.Errorf("rank 1's last request %+v, want a release telling it to leave", last)
	}

	res, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := c.meta().Seq(res.Seq)
	want := []snapshot.ProcRecord{{Rank: 0, Node: "n1", CRS: "self"}, {Rank: 1, Node: "n3", CRS: "self"}, {Rank: 2, Node: "n2", CRS: "self"}}
	if !reflect.DeepEqual(rec.Procs, want) {
		t.Errorf("procs %+v, want %+v", rec.Procs, want)
	}
	queries := c.sentKind(snapc.LocalQuery)
	if got := queries[len(queries)-3:]; !reflect.DeepEqual(got, []string{"n1", "n2", "n3"}) {
		t.Errorf("the checkpoint after the migration queried %v", got)
	}
	p, err := snapshot.ChooseSeq(c.ref, c.meta(), -1)
	if err == nil {
		err = p.VerifyAll()
	}
	if err != nil || p.Seq.Seq != res.Seq {
		t.Errorf("restart point %d: %v", p.Seq.Seq, err)
	}
}

// A request runs with the placement of its start: Place while it runs
// changes the next one only (and, under -race, does not race with it).
func TestPlaceDuringRequest(t *testing.T) {
	c := newClusterSpares(t, threeRanks, []string{"n3"}, nil)
	moved := []string{"n3", "n1", "n2"}
	res, err := c.g.Checkpoint(t.Context(), snapc.Request{}, func(e snapc.Event) {
		if e.Phase == snapc.PhaseQuery {
			c.g.Place(moved)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := c.meta().Seq(res.Seq)
	if rec.Procs[0].Node != "n1" {
		t.Errorf("rank 0 recorded on %s, want n1 where the request found it", rec.Procs[0].Node)
	}
	c.locals["n1"].SetRanks([]int{1})
	c.locals["n3"].SetRanks([]int{0})
	res, err = c.g.Checkpoint(t.Context(), snapc.Request{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ = c.meta().Seq(res.Seq)
	if rec.Procs[0].Node != "n3" {
		t.Errorf("rank 0 recorded on %s, want n3 after Place", rec.Procs[0].Node)
	}
	// A placement of the wrong size is ignored.
	c.g.Place([]string{"n1"})
	if _, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err != nil {
		t.Errorf("after a bad placement: %v", err)
	}
}

// A spare node's local coordinator answers for no rank until SetRanks
// gives it some.
func TestSetRanksOnSpare(t *testing.T) {
	c := newClusterSpares(t, []string{"n1"}, []string{"n2"}, nil)
	l := c.locals["n2"]
	rep := l.Handle(t.Context(), snapc.LocalRequest{ID: 1, Kind: snapc.LocalQuery})
	if rep.Err != "" || len(rep.Ranks) != 0 {
		t.Fatalf("spare node's query: %+v", rep)
	}
	l.SetRanks([]int{0})
	rep = l.Handle(t.Context(), snapc.LocalRequest{ID: 2, Kind: snapc.LocalQuery})
	if rep.Err != "" || len(rep.Ranks) != 1 || rep.Ranks[0].Rank != 0 || !rep.Ranks[0].Checkpointable || rep.Ranks[0].Count != 10 {
		t.Fatalf("query after SetRanks: %+v", rep)
	}
	l.SetRanks(nil)
	if rep = l.Handle(t.Context(), snapc.LocalRequest{ID: 3, Kind: snapc.LocalQuery}); len(rep.Ranks) != 0 {
		t.Errorf("query after the rank moved away: %+v", rep)
	}
}

// A target whose Ranks came back empty but not nil (a decoded message) is
// a checkpoint of every rank, not a migration saving none.
func TestTargetEmptyRanks(t *testing.T) {
	c := newCluster(t, []string{"n1", "n1"})
	if err := os.MkdirAll(c.ref.Path(), 0o755); err != nil {
		t.Fatal(err)
	}
	rep := c.locals["n1"].Handle(t.Context(), snapc.LocalRequest{ID: 1, Kind: snapc.LocalTarget, Ref: c.ref, Target: 3, Ranks: []int{}})
	if rep.Err != "" || len(rep.Ranks) != 2 {
		t.Fatalf("reply %+v", rep)
	}
	for _, rr := range rep.Ranks {
		if rr.Err != "" || rr.Dir == "" {
			t.Errorf("rank %d: %+v, want saved", rr.Rank, rr)
		}
		if q := c.seen(rr.Rank); len(q) != 1 || q[0].Migrate != nil {
			t.Errorf("rank %d was sent %+v", rr.Rank, q)
		}
	}
}
