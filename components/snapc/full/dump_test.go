package full

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
)

// fakeDumper is gompid's Dumper for every node of a test cluster: it
// counts what happens to each rank and dumps a rank as a file and its
// local metadata. Its quiescing is collective, as the ranks' is (they
// drain their channels together): a rank is quiet once every rank of the
// job is; after one refused, the others wait until their Cancel of the
// same request arrives.
type fakeDumper struct {
	n        int
	mu       sync.Mutex
	quiesced map[int]int
	dumped   map[int]int
	resumed  map[int]int
	ended    map[int]int
	refuse   map[int]string // Quiesce fails with this
	failDump map[int]string
	reqs     map[uint64]*fakeQuiesce
}

// fakeQuiesce is one request's quiescing.
type fakeQuiesce struct {
	arrived  int
	allQuiet chan struct{}         // closed once every rank arrived
	withdraw map[int]chan struct{} // closed by a Cancel to the rank
}

func newFakeDumper(c *cluster) *fakeDumper {
	d := &fakeDumper{n: len(c.ranks), quiesced: map[int]int{}, dumped: map[int]int{}, resumed: map[int]int{}, ended: map[int]int{},
		refuse: map[int]string{}, failDump: map[int]string{}, reqs: map[uint64]*fakeQuiesce{}}
	for r, fr := range c.ranks {
		fr.onCancel = func(id uint64) { d.cancelled(r, id) }
	}
	return d
}

// request returns request id's quiescing; d.mu is held.
func (d *fakeDumper) request(id uint64) *fakeQuiesce {
	q, ok := d.reqs[id]
	if !ok {
		q = &fakeQuiesce{allQuiet: make(chan struct{}), withdraw: map[int]chan struct{}{}}
		for r := range d.n {
			q.withdraw[r] = make(chan struct{})
		}
		d.reqs[id] = q
	}
	return q
}

func (d *fakeDumper) cancelled(rank int, id uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	w := d.request(id).withdraw[rank]
	select {
	case <-w:
	default:
		close(w)
	}
}

func (d *fakeDumper) Quiesce(ctx context.Context, rank int, id uint64, _ int) error {
	d.mu.Lock()
	d.quiesced[rank]++
	refuse, q := d.refuse[rank], d.request(id)
	if refuse == "" {
		if q.arrived++; q.arrived == d.n {
			close(q.allQuiet)
		}
	}
	d.mu.Unlock()
	if refuse != "" {
		return errors.New(refuse)
	}
	select {
	case <-q.allQuiet:
		return nil
	case <-q.withdraw[rank]:
		return fmt.Errorf("rank %d: request %d withdrawn while suspending", rank, id)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *fakeDumper) Dump(_ context.Context, rank int, dir string, opts crs.Options) error {
	d.mu.Lock()
	d.dumped[rank]++
	fail := d.failDump[rank]
	d.mu.Unlock()
	if opts.Term {
		return fmt.Errorf("rank %d: a dump was asked to end the rank", rank)
	}
	if fail != "" {
		return errors.New(fail)
	}
	w, err := snapshot.CreateFile(dir, "pages-1.img")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "rank %d's memory", rank)
	rec, err := w.Close()
	if err != nil {
		return err
	}
	return snapshot.WriteLocal(dir, &snapshot.LocalMeta{Rank: rank, PID: 200 + rank, Node: "x", CRS: "criu",
		Created: time.Now(), Files: []snapshot.FileRecord{rec}})
}

func (d *fakeDumper) Resume(rank int, _ uint64) error {
	d.mu.Lock()
	d.resumed[rank]++
	d.mu.Unlock()
	return nil
}

func (d *fakeDumper) End(rank int, _ uint64) error {
	d.mu.Lock()
	d.ended[rank]++
	d.mu.Unlock()
	return nil
}

func (d *fakeDumper) counts() (q, dumped, resumed map[int]int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return clone(d.quiesced), clone(d.dumped), clone(d.resumed)
}

// dumpCluster is a job of four ranks on two nodes whose CRS saves ranks
// from outside, with its Dumper.
func dumpCluster(t *testing.T) (*cluster, *fakeDumper) {
	var d *fakeDumper
	c := newClusterOpts(t, clusterOpts{nodeOf: twoNodes, dumper: dumperFunc(func() snapc.Dumper { return d })})
	d = newFakeDumper(c)
	return c, d
}

// dumperFunc is a Dumper made before the fake it forwards to (which
// needs the cluster's ranks).
type dumperFunc func() snapc.Dumper

func (f dumperFunc) Quiesce(ctx context.Context, rank int, id uint64, seq int) error {
	return f().Quiesce(ctx, rank, id, seq)
}
func (f dumperFunc) Dump(ctx context.Context, rank int, dir string, o crs.Options) error {
	return f().Dump(ctx, rank, dir, o)
}
func (f dumperFunc) Resume(rank int, id uint64) error { return f().Resume(rank, id) }
func (f dumperFunc) End(rank int, id uint64) error    { return f().End(rank, id) }

func clone(m map[int]int) map[int]int {
	out := map[int]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func each(n, v int) map[int]int {
	out := map[int]int{}
	for r := range n {
		out[r] = v
	}
	return out
}

// TestDumpCommits: a job whose CRS saves ranks from outside is dumped
// now: no query or target reaches a rank, every rank is quiesced, dumped
// and let go once per checkpoint, and the sequence commits with the
// dumps as its local snapshots.
func TestDumpCommits(t *testing.T) {
	c, d := dumpCluster(t)
	var phases []string
	res, err := c.g.Checkpoint(t.Context(), snapc.Request{}, func(e snapc.Event) {
		if e.Node == "" {
			phases = append(phases, string(e.Phase))
		}
	})
	if err != nil || res.Seq != 0 {
		t.Fatalf("checkpoint: %+v %v", res, err)
	}
	if got := strings.Join(phases, " "); got != "requested target sync commit" {
		t.Errorf("phases %s", got)
	}
	if res, err = c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err != nil || res.Seq != 1 {
		t.Fatalf("second checkpoint: %+v %v", res, err)
	}
	q, dumped, resumed := d.counts()
	if want := each(4, 2); !reflect.DeepEqual(q, want) || !reflect.DeepEqual(dumped, want) || !reflect.DeepEqual(resumed, want) {
		t.Errorf("quiesced %v, dumped %v, resumed %v; want each rank twice", q, dumped, resumed)
	}
	for r := range c.ranks {
		if k := c.kinds(r); len(k) != 0 {
			t.Errorf("rank %d was sent %v: a dump asks nothing of a rank's coordinator", r, k)
		}
	}
	m := c.meta()
	rec, _ := m.Seq(1)
	want := []snapshot.ProcRecord{{Rank: 0, Node: "n1", CRS: "criu"}, {Rank: 1, Node: "n1", CRS: "criu"}, {Rank: 2, Node: "n2", CRS: "criu"}, {Rank: 3, Node: "n2", CRS: "criu"}}
	if !reflect.DeepEqual(m.Committed(), []int{0, 1}) || !reflect.DeepEqual(rec.Procs, want) {
		t.Errorf("committed %v, procs %+v", m.Committed(), rec.Procs)
	}
	p, err := snapshot.ChooseSeq(c.ref, m, -1)
	if err == nil {
		err = p.VerifyAll()
	}
	if err != nil {
		t.Errorf("restart point: %v", err)
	}
}

// TestDumpRankRefuses: a rank that cannot be quiesced fails the request
// before anything is dumped: the ranks still suspending are withdrawn, the
// quiet ones go on, the sequence stays uncommitted, and the next
// checkpoint commits.
func TestDumpRankRefuses(t *testing.T) {
	c, d := dumpCluster(t)
	d.refuse[3] = "rank 3 is finalizing"
	_, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil)
	c.handling.Wait() // the request fails at its first error: the other node may still be at it
	if !errors.Is(err, snapc.ErrFailed) || !strings.Contains(err.Error(), "rank 3 on node n2: not quiesced: rank 3 is finalizing") {
		t.Fatalf("err = %v", err)
	}
	q, dumped, resumed := d.counts()
	if !reflect.DeepEqual(q, each(4, 1)) || len(dumped) != 0 || len(resumed) != 0 {
		t.Errorf("quiesced %v, dumped %v, resumed %v; want all asked, none quiet, none dumped", q, dumped, resumed)
	}
	if m := c.meta(); len(m.Committed()) != 0 {
		t.Errorf("committed %v after a failed dump", m.Committed())
	}
	delete(d.refuse, 3)
	if res, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err != nil || res.Seq != 1 {
		t.Errorf("after the refusal: %+v %v", res, err)
	}
}

// TestDumpTerm: with --term the dumped ranks are held, not let go, and
// the job ends once the sequence commits; when the request fails they go
// on (a failed checkpoint never ends a job).
func TestDumpTerm(t *testing.T) {
	c, d := dumpCluster(t)
	d.failDump[2] = "criu: no space left on device"
	_, err := c.g.Checkpoint(t.Context(), snapc.Request{Options: crs.Options{Term: true}}, nil)
	c.handling.Wait()
	if !errors.Is(err, snapc.ErrFailed) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("err = %v", err)
	}
	_, _, resumed := d.counts()
	if !reflect.DeepEqual(resumed, each(4, 1)) {
		t.Errorf("resumed %v after a failed --term checkpoint; want every rank let go once", resumed)
	}
	delete(d.failDump, 2)
	if _, err := c.g.Checkpoint(t.Context(), snapc.Request{Options: crs.Options{Term: true}}, nil); err != nil {
		t.Fatal(err)
	}
	_, dumped, resumed := d.counts()
	c.mu.Lock()
	terminal := c.terminal
	c.mu.Unlock()
	d.mu.Lock()
	ended := clone(d.ended)
	d.mu.Unlock()
	if !reflect.DeepEqual(resumed, each(4, 1)) || !reflect.DeepEqual(dumped, each(4, 2)) || !reflect.DeepEqual(ended, each(4, 1)) || terminal != 1 {
		t.Errorf("after a committed --term: resumed %v dumped %v ended %v, Terminate %d times; want no rank let go, each ended once and the job ended", resumed, dumped, ended, terminal)
	}
}

// TestDumpMigration: a migration's dump quiesces every rank, dumps only
// the moving ones, commits a migration's sequence with their records,
// and holds every rank until the release, which ends the moving ranks
// (restored elsewhere by then) and lets the others go on. A migration
// whose dump fails lets every rank go on, the moving ones included.
func TestDumpMigration(t *testing.T) {
	c, d := dumpCluster(t)
	res, err := c.g.Checkpoint(t.Context(), snapc.Request{Ranks: []int{3, 2}}, nil)
	if err != nil || res.Seq != 0 {
		t.Fatalf("migration's dump: %+v %v", res, err)
	}
	q, dumped, resumed := d.counts()
	if !reflect.DeepEqual(q, each(4, 1)) || !reflect.DeepEqual(dumped, map[int]int{2: 1, 3: 1}) || len(resumed) != 0 {
		t.Errorf("quiesced %v, dumped %v, resumed %v; want all quiesced, 2 and 3 dumped, none let go before the release", q, dumped, resumed)
	}
	rec, _ := c.meta().Seq(0)
	if want := []snapshot.ProcRecord{{Rank: 2, Node: "n2", CRS: "criu"}, {Rank: 3, Node: "n2", CRS: "criu"}}; !rec.Committed || !rec.Migrate || !reflect.DeepEqual(rec.Procs, want) {
		t.Errorf("sequence 0: %+v, want a committed migration's with %+v", rec, want)
	}
	if err := c.g.Release(snapc.Release{Leave: []int{2, 3}}); err != nil {
		t.Fatal(err)
	}
	c.waitReleased()
	c.handling.Wait()
	_, _, resumed = d.counts()
	d.mu.Lock()
	ended := clone(d.ended)
	d.mu.Unlock()
	if !reflect.DeepEqual(resumed, map[int]int{0: 1, 1: 1}) || !reflect.DeepEqual(ended, map[int]int{2: 1, 3: 1}) {
		t.Errorf("after the release: resumed %v, ended %v; want 0 and 1 let go, 2 and 3 ended", resumed, ended)
	}

	d.failDump[3] = "criu: no space left on device"
	if _, err := c.g.Checkpoint(t.Context(), snapc.Request{Ranks: []int{3}}, nil); !errors.Is(err, snapc.ErrFailed) {
		t.Fatalf("migration whose dump failed: %v", err)
	}
	c.handling.Wait()
	if _, _, resumed = d.counts(); !reflect.DeepEqual(resumed, map[int]int{0: 2, 1: 2, 2: 1, 3: 1}) {
		t.Errorf("after a failed migration's dump: resumed %v; want every rank let go", resumed)
	}
	if c.held() != nil {
		t.Error("a failed migration left a hold")
	}
}

// TestFromOutsideRefusals: no checkpoint at a safe point, and a node
// without a Dumper says so.
func TestFromOutsideRefusals(t *testing.T) {
	c, _ := dumpCluster(t)
	if _, err := c.g.AppCheckpoint(t.Context(), 0, 3, crs.Options{}); !errors.Is(err, snapc.ErrRefused) || !strings.Contains(err.Error(), "gompi-checkpoint") {
		t.Errorf("checkpoint at a safe point: %v", err)
	}
	c = newClusterOpts(t, clusterOpts{nodeOf: twoNodes, fromOutside: true})
	if _, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err == nil || !strings.Contains(err.Error(), "cannot dump ranks") {
		t.Errorf("no Dumper: %v", err)
	}
}
