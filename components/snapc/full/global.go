package full

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
	"gompi/mca/queue"
)

// global is a job's global coordinator. Requests run one at a time on one
// worker goroutine; callers wait on their request's event log, so a slow
// or vanished caller never holds the coordinator up. Deliver, NodeLost and
// Close only take the lock and signal: gompirun calls them from its event
// loop and from its daemons' stream handlers.
type global struct {
	spec  snapc.JobSpec
	link  snapc.NodeLink
	log   *slog.Logger
	pause PausePoint
	ranks int

	mu sync.Mutex
	// place is where the ranks run now; Place replaces it, and each
	// request runs with the one it started with (request.place).
	place *placement
	// queue holds the requests not started yet, in arrival order; the
	// worker (loop) owns its consumer end. Puts happen under mu, and
	// Close closes it under mu, so nothing is queued after Close.
	queue *queue.Queue[*request]
	// apps are the ranks' requests in the queue, by target, so a rank's
	// call joins the request of its target; a request leaves it when it
	// starts.
	apps    map[uint64]*request
	cur     *request
	closed  error
	lost    map[string]string // node -> why it was lost
	appDone []appResult       // the last rank-requested checkpoints, newest last
	nextID  uint64
	state   loopState
	// held is the committed migration checkpoint whose ranks wait for
	// Release; while it is set, no other request starts.
	held *hold
	// storage is held (a token sent in) by whoever reads and rewrites the
	// reference's metadata: the worker for a request's run, Remove for a
	// removal, so neither rewrites over the other.
	storage chan struct{}
}

// loopState is what the worker does.
type loopState int

const (
	loopWaiting loopState = iota // for a ready request
	loopRunning                  // a request (cur)
	loopHolding                  // for the end of a migration's hold
)

type appResult struct {
	target uint64
	res    snapc.Result
	err    error
}

// appDoneKept bounds how many finished rank-requested checkpoints are
// remembered for ranks whose request arrives after the checkpoint ended.
const appDoneKept = 8

func newGlobal(spec snapc.JobSpec, link snapc.NodeLink) (*global, error) {
	if len(spec.RankNodes) == 0 {
		return nil, fmt.Errorf("snapc/full: job %s has no ranks", spec.Job)
	}
	if spec.Ref.Dir == "" || spec.Ref.Name == "" {
		return nil, fmt.Errorf("snapc/full: job %s has no snapshot reference", spec.Job)
	}
	p := PausePoint{Seq: -1}
	if spec.Values != nil && spec.Values.Has(ParamPauseAt) {
		var err error
		if p, err = ParsePausePoint(spec.Values.String(ParamPauseAt)); err != nil {
			return nil, err
		}
	}
	g := &global{spec: spec, link: link, log: logger(spec.Log), pause: p, place: newPlacement(spec.RankNodes),
		ranks: len(spec.RankNodes), lost: map[string]string{}, queue: queue.New[*request](), apps: map[uint64]*request{},
		storage: make(chan struct{}, 1)}
	g.spec.RankNodes = slices.Clone(spec.RankNodes)
	go g.loop()
	return g, nil
}

// placement is where the ranks run at one time. It is never changed once
// made: Place makes a new one, so a running request keeps a consistent
// view while a migration moves ranks.
type placement struct {
	nodes     []string         // nodes that run ranks, sorted
	nodeRanks map[string][]int // ranks of each node, ascending
}

func newPlacement(rankNodes []string) *placement {
	p := &placement{nodeRanks: map[string][]int{}}
	for r, n := range rankNodes {
		if len(p.nodeRanks[n]) == 0 {
			p.nodes = append(p.nodes, n)
		}
		p.nodeRanks[n] = append(p.nodeRanks[n], r)
	}
	sort.Strings(p.nodes)
	return p
}

// Place records where the ranks run after a migration. A request already
// running goes on with the placement it started with.
func (g *global) Place(rankNodes []string) {
	if len(rankNodes) != g.ranks {
		// gompirun's bug, not the user's: keep the placement we have
		// rather than lose ranks.
		g.log.Error("snapc/full: placement ignored: wrong number of ranks", "got", len(rankNodes), "want", g.ranks)
		return
	}
	p := newPlacement(rankNodes)
	g.mu.Lock()
	g.spec.RankNodes = slices.Clone(rankNodes)
	g.place = p
	g.mu.Unlock()
}

func (g *global) Ref() snapshot.Ref { return g.spec.Ref }

// request is one checkpoint and everyone waiting for it.
type request struct {
	id    uint64
	opts  crs.Options
	app   bool         // asked for by the ranks (cr.Checkpoint)
	want  uint64       // the ranks' target (app)
	asked map[int]bool // the ranks that asked (app); it runs once all have
	// ready is set (under g.mu) once every rank asked (app), and read by
	// the queue's worker without g.mu.
	ready atomic.Bool
	// migrate: the ranks a migration's checkpoint saves, ascending (nil:
	// a checkpoint of the whole job).
	migrate []int
	// place is the placement the request runs with, taken when it starts.
	place *placement

	inbox chan snapc.LocalReply
	// progress holds LocalProgress replies apart, so that a flood of them
	// can never crowd out a node's real reply; when full, they are dropped.
	progress chan snapc.LocalReply

	mu        sync.Mutex
	target    uint64 // chosen target, 0 until the query is done
	events    []snapc.Event
	changed   chan struct{} // closed and replaced on each new event
	done      bool
	res       snapc.Result
	err       error
	waiters   int
	watched   bool
	unwatched chan struct{} // closed once every waiter has gone
	abort     chan struct{} // closed when the request must stop
	abortErr  error
}

func (g *global) newRequest(opts crs.Options) *request {
	g.nextID++
	return &request{id: g.nextID, opts: opts, changed: make(chan struct{}), unwatched: make(chan struct{}), abort: make(chan struct{})}
}

// start makes r the current request with the placement of now, its
// mailboxes sized for its nodes. g.mu is held.
func (g *global) start(r *request) {
	r.place = g.place
	if r.app {
		delete(g.apps, r.want)
	}
	g.state = loopRunning
	n := len(r.place.nodes)
	r.inbox, r.progress = make(chan snapc.LocalReply, 8*n+8), make(chan snapc.LocalReply, 4*n+4)
	g.cur = r
}

func (r *request) emit(e snapc.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func (r *request) finish(res snapc.Result, err error) {
	r.mu.Lock()
	r.res, r.err, r.done = res, err, true
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// stop makes the request fail with err at its next wait.
func (r *request) stop(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.abortErr == nil {
		r.abortErr = err
		close(r.abort)
	}
}

func (r *request) stopped() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.abortErr
}

func (r *request) join() {
	r.mu.Lock()
	r.waiters++
	r.watched = true
	r.mu.Unlock()
}

func (r *request) leave() {
	r.mu.Lock()
	r.waiters--
	if r.waiters == 0 && r.watched {
		select {
		case <-r.unwatched:
		default:
			close(r.unwatched)
		}
	}
	r.mu.Unlock()
}

// wait follows r until it ends or ctx does, reporting its events.
func (r *request) wait(ctx context.Context, progress func(snapc.Event)) (snapc.Result, error) {
	r.join()
	defer r.leave()
	next := 0
	for {
		r.mu.Lock()
		evs := r.events[next:]
		next = len(r.events)
		changed, done, res, err := r.changed, r.done, r.res, r.err
		r.mu.Unlock()
		if progress != nil {
			for _, e := range evs {
				progress(e)
			}
		}
		if done {
			return res, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return snapc.Result{}, fmt.Errorf("snapc/full: stopped waiting for checkpoint request %d (it goes on without us): %w", r.id, ctx.Err())
		}
	}
}

// Checkpoint runs a tool's request.
func (g *global) Checkpoint(ctx context.Context, req snapc.Request, progress func(snapc.Event)) (snapc.Result, error) {
	migrate, err := g.checkMigration(req)
	if err != nil {
		return snapc.Result{}, err
	}
	g.mu.Lock()
	if g.closed != nil {
		err := g.closed
		g.mu.Unlock()
		return snapc.Result{}, err
	}
	r := g.newRequest(req.Options)
	r.migrate = migrate
	r.ready.Store(true)
	g.queue.Put(r)
	g.mu.Unlock()
	return r.wait(ctx, progress)
}

// AppCheckpoint runs, or joins, the checkpoint the ranks ask for at target.
func (g *global) AppCheckpoint(ctx context.Context, rank int, target uint64, opts crs.Options) (snapc.Result, error) {
	if rank < 0 || rank >= g.ranks {
		return snapc.Result{}, fmt.Errorf("snapc/full: checkpoint asked for by rank %d of a job of %d ranks", rank, g.ranks)
	}
	if target == 0 {
		return snapc.Result{}, fmt.Errorf("snapc/full: rank %d asked for a checkpoint at safe point 0; safe points count from 1", rank)
	}
	if g.spec.FromOutside {
		return snapc.Result{}, fmt.Errorf("snapc/full: rank %d asked for a checkpoint at safe point %d: %w: %w, which has no safe points; checkpoint it with gompi-checkpoint", rank, target, snapc.ErrRefused, errFromOutside)
	}
	g.mu.Lock()
	if g.closed != nil {
		err := g.closed
		g.mu.Unlock()
		return snapc.Result{}, err
	}
	for i := len(g.appDone) - 1; i >= 0; i-- {
		if d := g.appDone[i]; d.target == target {
			g.mu.Unlock()
			return d.res, d.err
		}
	}
	var r *request
	// A migration saves only some ranks: the ranks' checkpoint never joins one.
	if c := g.cur; c != nil && c.migrate == nil && ((c.app && c.want == target) || c.chosenTarget() == target) {
		r = c
	}
	if r == nil {
		r = g.apps[target]
	}
	if r == nil {
		r = g.newRequest(opts)
		r.app, r.want, r.asked = true, target, map[int]bool{}
		g.apps[target] = r
		g.queue.Put(r)
	}
	if r.asked != nil {
		r.asked[rank] = true
		// cr.Checkpoint is collective: the request runs once every rank
		// asked, so none is queried before its coordinator is up.
		if len(r.asked) == g.ranks && !r.ready.Swap(true) {
			g.queue.Wake()
		}
	}
	g.mu.Unlock()
	g.log.Debug("rank asks for a checkpoint", "rank", rank, "target", target, "request", r.id)
	return r.wait(ctx, nil)
}

func (r *request) chosenTarget() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.target
}

func (g *global) Deliver(rep snapc.LocalReply) {
	g.mu.Lock()
	r := g.cur
	g.mu.Unlock()
	if r == nil || rep.ID != r.id {
		g.log.Debug("reply to a request that is over", "node", rep.Node, "request", rep.ID, "kind", rep.Kind)
		return
	}
	box := r.inbox
	if rep.Kind == snapc.LocalProgress {
		box = r.progress
	}
	select {
	case box <- rep:
	default:
		if rep.Kind != snapc.LocalProgress {
			g.log.Warn("dropped a node's reply: too many for one request", "node", rep.Node, "request", rep.ID, "kind", rep.Kind)
		}
	}
}

func (g *global) NodeLost(node, why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	// A node without ranks now may get some from a migration: remember it.
	g.lost[node] = why
	if g.cur != nil {
		if _, ok := g.cur.place.nodeRanks[node]; ok {
			g.cur.stop(fmt.Errorf("node %s was lost: %s", node, why))
		}
	}
	// A node lost during a migration's hold (one that held ranks, or the
	// destination of the moved ones) ends the migration: the job is
	// recovered by the next policy, and nothing is left to release.
	if h := g.held; h != nil {
		g.log.Warn("migration hold cleared: a node was lost during it", "node", node, "seq", h.seq, "why", why)
		g.endHoldLocked()
	}
}

func (g *global) Close(why error) {
	if why == nil {
		why = errors.New("the job is over")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed != nil {
		return
	}
	g.closed = fmt.Errorf("snapc/full: no checkpoint: %w", why)
	g.endHoldLocked()
	if g.cur != nil {
		g.cur.stop(why)
	}
	g.queue.Close() // the worker ends the queued requests with g.closed
}

// endHoldLocked ends the hold, if any: the worker goes on. g.mu is held.
func (g *global) endHoldLocked() {
	if g.held != nil {
		close(g.held.over)
		g.held = nil
	}
}

func (g *global) loop() {
	for {
		r, err := g.queue.PopFunc(context.Background(), (*request).isReady)
		if err != nil {
			return // closed, and every queued request was ended
		}
		g.mu.Lock()
		if g.closed != nil {
			err := g.closed
			g.mu.Unlock()
			r.finish(snapc.Result{}, err)
			continue
		}
		g.start(r)
		g.mu.Unlock()

		res, err := g.run(r)

		g.mu.Lock()
		g.cur = nil
		if r.app {
			g.appDone = append(g.appDone, appResult{target: r.want, res: res, err: err})
			if len(g.appDone) > appDoneKept {
				g.appDone = g.appDone[1:]
			}
		}
		g.mu.Unlock()
		r.finish(res, err)
		g.waitHold()
	}
}

// isReady reports whether a queued request can run: a tool's at once; the
// ranks' once every rank has asked.
func (r *request) isReady() bool { return r.ready.Load() }

// waitHold waits while a migration's hold lasts: a held migration lets no
// request start before its release (or a lost node, or the job's end).
func (g *global) waitHold() {
	g.mu.Lock()
	h := g.held
	if h == nil {
		g.state = loopWaiting
		g.mu.Unlock()
		return
	}
	g.state = loopHolding
	g.mu.Unlock()
	<-h.over
	g.mu.Lock()
	g.state = loopWaiting
	g.mu.Unlock()
}

func (g *global) event(r *request, p snapc.Phase, node string, seq int, detail string) {
	r.emit(snapc.Event{Phase: p, Node: node, Seq: seq, Detail: detail, Time: time.Now()})
}

// run is one checkpoint, from query to commit (checkpoint.go). A
// migration's (migrationPath) ends holding every rank (g.held) instead of
// letting them go on.
func (g *global) run(r *request) (snapc.Result, error) {
	// Storage calls (a remote reference's metadata) end when the request
	// is stopped.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.abort:
			cancel()
		case <-ctx.Done():
		}
	}()
	c := &ckpt{g: g, r: r, path: r.path(), ctx: ctx, start: time.Now(), ref: g.spec.Ref, place: r.place, seq: -1}
	g.storage <- struct{}{} // a removal takes a moment: it never waits on the job
	res, err := c.steps()
	<-g.storage
	if err != nil {
		return c.fail(err)
	}
	return res, nil
}

// round sends req to every node of want and collects one reply from each,
// which must answer for exactly the node's ranks in want. For every rank
// of a reply it calls each (which may stop the round); after a node's
// reply, onNode, and once every node was sent the request, sent (both may
// be nil).
func (g *global) round(r *request, req snapc.LocalRequest, want map[string][]int, each func(node string, rr snapc.RankReply) error,
	onNode func(snapc.LocalReply), sent func()) error {
	if err := r.stopped(); err != nil {
		return err
	}
	// Replies of an earlier round of this request are stale by now.
	for drained := false; !drained; {
		select {
		case <-r.inbox:
		default:
			drained = true
		}
	}
	var timeout <-chan time.Time
	if req.Kind == snapc.LocalQuery && g.spec.Values != nil && g.spec.Values.Has(ParamQueryTimeout) {
		if d := g.spec.Values.Duration(ParamQueryTimeout); d > 0 {
			t := time.NewTimer(d + 5*time.Second) // the nodes time their ranks out first
			defer t.Stop()
			timeout = t.C
		}
	}
	nodes := make([]string, 0, len(want))
	for n := range want {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	pending := map[string]bool{}
	for _, n := range nodes {
		if err := g.link.Send(n, req); err != nil {
			return fmt.Errorf("node %s: %w", n, err)
		}
		pending[n] = true
	}
	if sent != nil {
		sent()
	}
	showProgress := func(rep snapc.LocalReply) {
		if rep.ID == req.ID && req.Kind == snapc.LocalSync && pending[rep.Node] && rep.Progress != nil {
			r.emit(snapc.Event{Phase: snapc.PhaseDrain, Node: rep.Node, Seq: req.Seq, Detail: describeProgress(*rep.Progress),
				Time: time.Now(), Progress: rep.Progress})
		}
	}
	for len(pending) > 0 {
		select {
		case rep := <-r.progress:
			showProgress(rep)
		case rep := <-r.inbox:
			// A node's progress reaches Deliver before its reply does;
			// show it before the reply ends the node's part.
			for more := true; more; {
				select {
				case p := <-r.progress:
					showProgress(p)
				default:
					more = false
				}
			}
			if rep.ID != req.ID || rep.Kind != req.Kind || !pending[rep.Node] {
				continue
			}
			delete(pending, rep.Node)
			if rep.Err != "" {
				return fmt.Errorf("node %s: %s", rep.Node, rep.Err)
			}
			if err := checkRanks(rep, want[rep.Node]); err != nil {
				return err
			}
			for _, rr := range rep.Ranks {
				if err := each(rep.Node, rr); err != nil {
					return err
				}
			}
			if onNode != nil {
				onNode(rep)
			}
		case <-r.abort:
			return r.stopped()
		case <-timeout:
			var late []string
			for n := range pending {
				late = append(late, n)
			}
			sort.Strings(late)
			return fmt.Errorf("nodes %s did not answer the %s", strings.Join(late, ", "), req.Kind)
		}
	}
	return nil
}

// checkRanks makes sure a node answered for exactly the ranks asked of it
// (want, ascending).
func checkRanks(rep snapc.LocalReply, want []int) error {
	got := make([]int, 0, len(rep.Ranks))
	for _, rr := range rep.Ranks {
		got = append(got, rr.Rank)
	}
	sort.Ints(got)
	if !slices.Equal(got, want) {
		return fmt.Errorf("node %s answered for ranks %v, not for its ranks %v", rep.Node, got, want)
	}
	return nil
}

// cancelAll withdraws the request on every node, best effort.
func (g *global) cancelAll(r *request) {
	for _, n := range r.place.nodes {
		g.mu.Lock()
		_, lost := g.lost[n]
		g.mu.Unlock()
		if !lost {
			_ = g.link.Send(n, snapc.LocalRequest{ID: r.id, Kind: snapc.LocalCancel, Ref: g.spec.Ref})
		}
	}
}

// pauseAt is the test hook: it holds the request at point until everyone
// waiting for it has gone (it then goes on) or it is stopped.
func (g *global) pauseAt(r *request, point string, seq int) error {
	if !g.pause.At(point, seq) {
		return nil
	}
	g.log.Warn(PauseMessage(point, seq))
	select {
	case <-r.unwatched:
		g.log.Warn("snapc/full test hook: released: everyone waiting for the checkpoint is gone", "point", point, "seq", seq)
		return nil
	case <-r.abort:
		return r.stopped()
	}
}

// metaStore is where the reference's metadata lives.
func (g *global) metaStore() snapshot.MetaStore {
	if g.spec.Meta != nil {
		return g.spec.Meta
	}
	return snapshot.ThisNode
}

// readMeta reads the reference's metadata, or starts it, and records the
// job as it runs now: a restarted job may run with other parameters.
func (g *global) readMeta(ctx context.Context) (*snapshot.GlobalMeta, error) {
	ref := g.spec.Ref
	meta, err := g.metaStore().ReadGlobal(ctx, ref)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		meta = &snapshot.GlobalMeta{Job: g.spec.Job}
	case err != nil:
		return nil, fmt.Errorf("%w; the reference's metadata is left as it is", err)
	}
	// A job restarted on another rank count (gompi-restart -np) goes on
	// in its reference: each earlier sequence keeps the count it was
	// taken with.
	meta.SetRanks(g.ranks)
	meta.AMCA = append([]string(nil), g.spec.AMCA...)
	meta.Params = storedSettings(g.spec.Settings)
	meta.Launch = g.spec.Launch
	return meta, nil
}

// storedSettings are the settings a snapshot keeps: all but the test
// hooks, which a restarted job must not inherit.
func storedSettings(in []mca.Setting) []mca.Setting {
	var out []mca.Setting
	for _, s := range in {
		if !strings.HasPrefix(s.Name, "snapc_full_test_") {
			out = append(out, s)
		}
	}
	return out
}

var _ snapc.Global = (*global)(nil)

// describeProgress is a drain's progress as a status line shows it.
func describeProgress(p sstore.Progress) string {
	const mib = 1 << 20
	s := fmt.Sprintf("%d/%d files, %.1f/%.1f MiB, %.1f MiB/s", p.FilesDone, p.Files, float64(p.BytesDone)/mib, float64(p.Bytes)/mib, p.Rate()/mib)
	if p.Stored > 0 && p.BytesDone > 0 && p.Stored != p.BytesDone {
		s += fmt.Sprintf(", stored %.1f MiB (%.0f %%)", float64(p.Stored)/mib, float64(p.Stored)/float64(p.BytesDone)*100)
	}
	if eta := p.ETA(); eta > 0 {
		s += fmt.Sprintf(", ETA %.1f s", eta.Seconds())
	}
	return s
}
