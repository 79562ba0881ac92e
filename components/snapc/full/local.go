package full

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
)

// local is a node's local coordinator: it turns each request of the global
// coordinator into application requests to the node's ranks, gathers
// their answers, and runs the SStore steps of the node.
type local struct {
	spec       snapc.NodeSpec
	port       snapc.AppPort
	log        *slog.Logger
	pause      PausePoint
	queryBound time.Duration // bound on a rank's answer to a query (0 = none)

	mu        sync.Mutex
	ranks     []int // the node's ranks now (SetRanks); each Handle uses those of its start
	waits     map[waitKey]chan appAnswer
	cancelled map[uint64]chan struct{} // closed when a request is withdrawn
	dirs      map[uint64]map[int]string
	// targeted are the ranks each request's Target went to: those a
	// Cancel or a migration's release must reach, even if SetRanks has
	// moved them out of the node meanwhile.
	targeted map[uint64][]int
	// held are the ranks a Term dump keeps quiesced until the request
	// is done (the job ends) or withdrawn (they go on): dump.go.
	held   map[uint64][]int
	newest uint64
}

type waitKey struct {
	id   uint64
	kind snapc.AppRequestKind
	rank int
}

type appAnswer struct {
	reply snapc.AppReply
	gone  string // the rank's coordinator went away: why
}

func newLocal(spec snapc.NodeSpec, port snapc.AppPort) (*local, error) {
	if spec.Store == nil {
		return nil, fmt.Errorf("snapc/full: node %s: no SStore module", spec.Node)
	}
	l := &local{spec: spec, port: port, log: logger(spec.Log), pause: PausePoint{Seq: -1}, ranks: sortedRanks(spec.Ranks),
		waits: map[waitKey]chan appAnswer{}, cancelled: map[uint64]chan struct{}{}, dirs: map[uint64]map[int]string{},
		targeted: map[uint64][]int{}, held: map[uint64][]int{}}
	if v := spec.Values; v != nil {
		var err error
		if v.Has(ParamPauseAt) {
			if l.pause, err = ParsePausePoint(v.String(ParamPauseAt)); err != nil {
				return nil, err
			}
		}
		if v.Has(ParamQueryTimeout) {
			l.queryBound = v.Duration(ParamQueryTimeout)
		}
	}
	return l, nil
}

// cancelChan returns the channel closed when request id is withdrawn. A
// new request id means the global coordinator is done with older ones.
func (l *local) cancelChan(id uint64) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if id > l.newest {
		for old := range l.cancelled {
			if old < id {
				delete(l.cancelled, old)
				delete(l.dirs, old)
				delete(l.targeted, old)
			}
		}
		l.newest = id
	}
	c, ok := l.cancelled[id]
	if !ok {
		c = make(chan struct{})
		l.cancelled[id] = c
	}
	return c
}

// sortedRanks is a sorted copy of ranks.
func sortedRanks(ranks []int) []int {
	out := slices.Clone(ranks)
	slices.Sort(out)
	return out
}

// SetRanks records the node's ranks after a migration moved some in or
// out. Requests already running go on with the ranks they started with.
func (l *local) SetRanks(ranks []int) {
	rs := sortedRanks(ranks)
	l.mu.Lock()
	l.ranks = rs
	l.mu.Unlock()
}

// nodeRanks are the node's ranks now; the slice is never changed.
func (l *local) nodeRanks() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ranks
}

func (l *local) Handle(ctx context.Context, req snapc.LocalRequest) snapc.LocalReply {
	rep := snapc.LocalReply{ID: req.ID, Kind: req.Kind, Node: l.spec.Node}
	cancel := l.cancelChan(req.ID)
	ranks := l.nodeRanks()
	switch req.Kind {
	case snapc.LocalQuery:
		rep.Ranks = l.query(ctx, req, ranks, cancel)
	case snapc.LocalTarget:
		rep.Ranks = l.target(ctx, req, ranks, cancel)
	case snapc.LocalDump:
		rep.Ranks = l.dump(ctx, req, ranks, cancel)
	case snapc.LocalSync:
		rep.Ranks, rep.Err = l.sync(ctx, req, l.targetedRanks(req.ID, ranks), cancel)
	case snapc.LocalCancel:
		l.mu.Lock()
		select {
		case <-cancel:
		default:
			close(cancel)
		}
		l.mu.Unlock()
		for _, r := range l.forget(req.ID, ranks) {
			// A rank without a coordinator has nothing to withdraw.
			_ = l.port.Send(r, snapc.AppRequest{ID: req.ID, Kind: snapc.Cancel, Seq: req.Seq})
		}
		l.releaseHeld(req.ID)
	case snapc.LocalDone:
		l.forget(req.ID, nil)
		l.endHeld(req.ID) // a Term checkpoint committed: the job ends
	case snapc.LocalRelease:
		ranks = l.forget(req.ID, ranks)
		if l.spec.Dumper != nil {
			l.releaseMoved(req)
		} else {
			l.release(req, ranks)
		}
	default:
		rep.Err = fmt.Sprintf("snapc/full: node %s: unknown request kind %v (a newer gompirun?)", l.spec.Node, req.Kind)
	}
	return rep
}

// targetedRanks are the ranks the Target of request id went to, or, if
// it never went out, ranks.
func (l *local) targetedRanks(id uint64, ranks []int) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.targeted[id]; ok {
		return t
	}
	return ranks
}

// forget drops what the node keeps of request id and returns the ranks
// its Target went to, or, if it never went out, ranks.
func (l *local) forget(id uint64, ranks []int) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.targeted[id]; ok {
		ranks = t
	}
	delete(l.dirs, id)
	delete(l.targeted, id)
	return ranks
}

// release ends a migration's hold on the ranks that were held: those in
// req.Leave end, the others resume. It does not wait for them: a rank
// that leaves is gone, and one that resumes has nothing to answer.
func (l *local) release(req snapc.LocalRequest, ranks []int) {
	for _, r := range ranks {
		leave := slices.Contains(req.Leave, r)
		if err := l.port.Send(r, snapc.AppRequest{ID: req.ID, Kind: snapc.ReleaseHold, Seq: req.Seq, Leave: leave, Peers: req.Peers}); err != nil {
			l.log.Warn("could not release a held rank", "rank", r, "request", req.ID, "leave", leave, "err", err)
		}
	}
}

// ask sends req to every rank of the node at once and waits for each
// answer. The wait ends early for a rank whose coordinator goes away, when
// the request is withdrawn, when ctx ends, or after bound (0 = none).
func (l *local) ask(ctx context.Context, cancel <-chan struct{}, bound time.Duration, reqs map[int]snapc.AppRequest) map[int]appAnswer {
	out := map[int]appAnswer{}
	chans := map[int]chan appAnswer{}
	ranks := make([]int, 0, len(reqs))
	for r := range reqs {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	for _, r := range ranks {
		req := reqs[r]
		k := waitKey{req.ID, req.Kind, r}
		c := make(chan appAnswer, 1)
		l.mu.Lock()
		l.waits[k] = c
		l.mu.Unlock()
		if err := l.port.Send(r, req); err != nil {
			l.unwait(k)
			out[r] = appAnswer{gone: err.Error()}
			continue
		}
		chans[r] = c
	}
	var timeout <-chan time.Time
	if bound > 0 {
		t := time.NewTimer(bound)
		defer t.Stop()
		timeout = t.C
	}
	for _, r := range ranks {
		c, ok := chans[r]
		if !ok {
			continue
		}
		k := waitKey{reqs[r].ID, reqs[r].Kind, r}
		select {
		case a := <-c:
			out[r] = a
		case <-cancel:
			out[r] = appAnswer{gone: "the checkpoint was cancelled"}
		case <-ctx.Done():
			out[r] = appAnswer{gone: fmt.Sprintf("gompid on node %s is ending", l.spec.Node)}
		case <-timeout:
			out[r] = appAnswer{gone: fmt.Sprintf("no answer within %v (%s)", bound, ParamQueryTimeout)}
		}
		l.unwait(k)
	}
	return out
}

func (l *local) unwait(k waitKey) {
	l.mu.Lock()
	delete(l.waits, k)
	l.mu.Unlock()
}

func (l *local) query(ctx context.Context, req snapc.LocalRequest, ranks []int, cancel <-chan struct{}) []snapc.RankReply {
	reqs := map[int]snapc.AppRequest{}
	for _, r := range ranks {
		reqs[r] = snapc.AppRequest{ID: req.ID, Kind: snapc.Query, Seq: req.Seq, Options: req.Options}
	}
	answers := l.ask(ctx, cancel, l.queryBound, reqs)
	out := make([]snapc.RankReply, 0, len(ranks))
	for _, r := range ranks {
		a := answers[r]
		rr := snapc.RankReply{Rank: r}
		switch {
		case a.gone != "":
			rr.Reason = a.gone
		case a.reply.Err != "":
			rr.Reason = a.reply.Err
		default:
			rr.Count, rr.Checkpointable, rr.Reason = a.reply.Count, a.reply.Checkpointable, a.reply.Reason
		}
		out = append(out, rr)
	}
	return out
}

func (l *local) target(ctx context.Context, req snapc.LocalRequest, ranks []int, cancel <-chan struct{}) []snapc.RankReply {
	select {
	case <-cancel:
		out := map[int]snapc.RankReply{}
		for _, r := range ranks {
			out[r] = snapc.RankReply{Rank: r, Err: "the checkpoint was cancelled"}
		}
		return inOrder(ranks, out)
	default:
	}
	var migrate []int // nil unless a migration: the ranks it saves
	if len(req.Ranks) > 0 {
		migrate = req.Ranks
	}
	// A migration's ranks not in req.Ranks hold unsaved: no directory.
	saved := func(r int) bool { return migrate == nil || slices.Contains(migrate, r) }
	dirs, out := l.localDirs(ctx, req, ranks, saved)
	reqs := map[int]snapc.AppRequest{}
	for _, r := range ranks {
		if _, failed := out[r]; !failed {
			reqs[r] = snapc.AppRequest{ID: req.ID, Kind: snapc.Target, Target: req.Target, Seq: req.Seq, Dir: dirs[r], Options: req.Options, Migrate: migrate}
		}
	}
	for r, a := range l.ask(ctx, cancel, 0, reqs) {
		rr := snapc.RankReply{Rank: r, Dir: dirs[r]}
		switch {
		case a.gone != "":
			rr.Err = "no local snapshot: " + a.gone
		case a.reply.Err != "":
			rr.Err = a.reply.Err
		}
		out[r] = rr
	}
	return inOrder(ranks, out)
}

// localDirs makes the local snapshot directory of request req for each
// of ranks that saved says is saved, and records the directories and the
// ranks the request goes to: all of them, so that a Cancel reaches every
// rank of the node, even one whose directory could not be made (it is
// not asked, but the request fails). It returns the directories, and a
// reply with the error of each rank whose directory could not be made.
func (l *local) localDirs(ctx context.Context, req snapc.LocalRequest, ranks []int, saved func(int) bool) (map[int]string, map[int]snapc.RankReply) {
	dirs := map[int]string{}
	failed := map[int]snapc.RankReply{}
	for _, r := range ranks {
		if !saved(r) {
			continue
		}
		dir, err := l.spec.Store.LocalDir(ctx, req.Ref, req.Seq, r)
		if err != nil {
			failed[r] = snapc.RankReply{Rank: r, Err: err.Error()}
			continue
		}
		dirs[r] = dir
	}
	l.mu.Lock()
	l.dirs[req.ID] = dirs
	l.targeted[req.ID] = ranks
	l.mu.Unlock()
	return dirs, failed
}

func (l *local) sync(ctx context.Context, req snapc.LocalRequest, ranks []int, cancel <-chan struct{}) ([]snapc.RankReply, string) {
	if l.pause.At(PauseSync, req.Seq) {
		l.log.Warn(PauseMessage(PauseSync, req.Seq))
		select {
		case <-cancel:
		case <-ctx.Done():
		}
		return nil, "the checkpoint was cancelled while paused by " + ParamPauseAt
	}
	l.mu.Lock()
	dirs := l.dirs[req.ID]
	l.mu.Unlock()
	var locals []sstore.Local
	for _, r := range ranks {
		if len(req.Ranks) > 0 && !slices.Contains(req.Ranks, r) {
			continue // held by a migration, unsaved
		}
		d, ok := dirs[r]
		if !ok {
			return nil, fmt.Sprintf("snapc/full: node %s: sync of request %d, whose local snapshot of rank %d it never started", l.spec.Node, req.ID, r)
		}
		locals = append(locals, sstore.Local{Rank: r, Dir: d})
	}
	// The CRS of each rank is read before the sync: a store that moves the
	// local snapshots (stage with no cache) may not keep them after.
	out := make([]snapc.RankReply, 0, len(locals))
	for _, lc := range locals {
		rr := snapc.RankReply{Rank: lc.Rank, Dir: lc.Dir}
		if m, err := snapshot.ReadLocal(lc.Dir); err != nil {
			rr.Err = err.Error()
		} else {
			rr.CRS = m.CRS
		}
		out = append(out, rr)
	}
	if notify := l.spec.Notify; notify != nil {
		ctx = sstore.WithProgress(ctx, l.progressSender(req, notify))
	}
	if len(req.Ranks) > 0 {
		ctx = sstore.ForMigration(ctx)
	}
	if err := l.spec.Store.Sync(ctx, req.Ref, req.Seq, locals); err != nil {
		return nil, err.Error()
	}
	return out, ""
}

// progressEvery bounds how often a node reports its drain's progress: a
// status line a second is plenty, and the control stream stays quiet.
const progressEvery = 500 * time.Millisecond

// progressSender returns a progress callback for the sync of req that
// passes on the first report, the last (every file done) and at most one
// in between per progressEvery.
func (l *local) progressSender(req snapc.LocalRequest, notify func(snapc.LocalReply)) func(sstore.Progress) {
	var mu sync.Mutex
	var last time.Time
	return func(p sstore.Progress) {
		mu.Lock()
		now := time.Now()
		send := last.IsZero() || p.FilesDone == p.Files || now.Sub(last) >= progressEvery
		if send {
			last = now
		}
		mu.Unlock()
		if send {
			p.Node = l.spec.Node
			notify(snapc.LocalReply{ID: req.ID, Kind: snapc.LocalProgress, Node: l.spec.Node, Progress: &p})
		}
	}
}

func inOrder(ranks []int, m map[int]snapc.RankReply) []snapc.RankReply {
	out := make([]snapc.RankReply, 0, len(ranks))
	for _, r := range ranks {
		out = append(out, m[r])
	}
	return out
}

func (l *local) AppReply(rank int, r snapc.AppReply) {
	l.mu.Lock()
	c, ok := l.waits[waitKey{r.ID, r.Kind, rank}]
	l.mu.Unlock()
	if !ok {
		if r.Kind != snapc.Cancel {
			l.log.Debug("answer to no pending request", "rank", rank, "request", r.ID, "kind", r.Kind)
		}
		return
	}
	select {
	case c <- appAnswer{reply: r}:
	default: // answered twice: the first answer stands
	}
}

func (l *local) AppGone(rank int, why string) {
	l.mu.Lock()
	var cs []chan appAnswer
	for k, c := range l.waits {
		if k.rank == rank {
			cs = append(cs, c)
		}
	}
	l.mu.Unlock()
	for _, c := range cs {
		select {
		case c <- appAnswer{gone: why}:
		default:
		}
	}
}

var _ snapc.Local = (*local)(nil)
