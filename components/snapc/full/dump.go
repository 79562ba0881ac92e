package full

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
)

// A checkpoint of a job whose CRS saves ranks from outside (JobSpec.
// FromOutside: criu) has no safe point to find: there is no query and no
// target. Every node dumps its ranks now (LocalDump): the local
// coordinator has its Dumper (gompid) quiesce all of them at once, wherever
// their programs are (the ranks drain their channels together, across
// nodes), dump each into its local snapshot directory, and let each go
// on. Storage (sync) and the commit are as for any checkpoint.
//
// With Term the ranks are not let go: they stay quiesced until the
// sequence is committed, when their gompid ends them (Dumper.End, on the
// request's Done) and gompirun the job (NodeLink.Terminate), or until the
// request fails, when they go on: a checkpoint that fails never ends a
// job.
//
// A migration's dump (LocalDump with Ranks) quiesces every rank the same
// way but dumps only the moving ones, and lets none go: every rank is
// held quiesced, with no socket, while the moving ranks are restored on
// their new nodes (gompirun's part, rte/hnp). Its release (LocalRelease)
// ends the moving ranks' old processes (Dumper.End) and lets the others
// go on (Dumper.Resume); each then meets the restored ranks at their new
// addresses in the exchange every rank makes after a suspension (mpi's
// Rejoiner.Remodex). A migration that fails before its release lets every
// rank go on where it was (LocalCancel), the moving ones included.

// errFromOutside refuses what has no meaning for a CRS that saves ranks
// from outside.
var errFromOutside = errors.New("the job's CRS saves its ranks from outside (crs criu)")

// fromOutsideSteps are a checkpoint's steps when the job's CRS saves its
// ranks from outside.
func (c *ckpt) fromOutsideSteps() []func() error {
	return []func() error{c.begin, c.record, c.dumpRound}
}

// dumpRound has every node dump its ranks now. The first rank that
// fails ends the round: the ranks quiesce together, so the others may be
// waiting for the one that failed until the request is withdrawn (fail
// cancels it on every node).
func (c *ckpt) dumpRound() error {
	g, r, seq := c.g, c.r, c.seq
	var gaveUp []string // ranks withdrawn because of another's failure
	err := g.round(r, snapc.LocalRequest{ID: r.id, Kind: snapc.LocalDump, Seq: seq, Ref: c.ref, Options: r.opts, Ranks: r.migrate},
		c.place.nodeRanks,
		func(node string, rr snapc.RankReply) error {
			switch {
			case strings.HasPrefix(rr.Err, withdrawn):
				gaveUp = append(gaveUp, fmt.Sprintf("rank %d on node %s: %s", rr.Rank, node, rr.Err))
			case rr.Err != "":
				return fmt.Errorf("rank %d on node %s: %s", rr.Rank, node, rr.Err)
			}
			return nil
		},
		func(rep snapc.LocalReply) { g.event(r, snapc.PhaseLocalWrite, rep.Node, seq, c.path.written(rep)) },
		func() { g.event(r, snapc.PhaseTarget, "", seq, c.dumpNow()) })
	if err == nil && len(gaveUp) > 0 {
		err = errors.New(strings.Join(gaveUp, "; "))
	}
	if err != nil {
		return err
	}
	return g.pauseAt(r, PauseLocal, seq)
}

// dumpNow describes the dump round once every node was asked.
func (c *ckpt) dumpNow() string {
	if c.r.migrate != nil {
		return fmt.Sprintf("sequence %d recorded in %s for a migration (not a restart point); ranks %v are dumped now, wherever they are, and every rank holds quiesced",
			c.seq, c.ref.Name, c.r.migrate)
	}
	return fmt.Sprintf("sequence %d recorded in %s; every rank is dumped now, wherever it is", c.seq, c.ref.Name)
}

// withdrawn starts a rank's error when it was not saved because of
// another rank's failure (or the request's withdrawal): the request's
// error names the cause first.
const withdrawn = "withdrawn: "

func anyErr(m map[int]error) bool {
	for _, err := range m {
		if err != nil {
			return true
		}
	}
	return false
}

// dump runs a LocalDump on the node: quiesce every rank at once, dump
// each (a migration's: each moving one), let each go on (with Term, or
// for a migration, hold them until the request is done, released or
// withdrawn).
func (l *local) dump(ctx context.Context, req snapc.LocalRequest, ranks []int, cancel <-chan struct{}) []snapc.RankReply {
	if l.spec.Dumper == nil {
		out := map[int]snapc.RankReply{}
		for _, r := range ranks {
			out[r] = snapc.RankReply{Rank: r, Err: fmt.Sprintf("gompid on node %s cannot dump ranks: the job's CRS does not save them from outside", l.spec.Node)}
		}
		return inOrder(ranks, out)
	}
	// A migration's ranks not in req.Ranks hold unsaved: no directory.
	saved := func(r int) bool { return len(req.Ranks) == 0 || slices.Contains(req.Ranks, r) }
	dirs, out := l.localDirs(ctx, req, ranks, saved)
	if len(out) > 0 {
		// The other ranks are not asked; the failed request is withdrawn
		// on every node, which ends the waits of the ranks elsewhere.
		for _, r := range ranks {
			if _, failed := out[r]; !failed {
				out[r] = snapc.RankReply{Rank: r, Dir: dirs[r], Err: "not dumped: another rank of the node has no local snapshot directory"}
			}
		}
		return inOrder(ranks, out)
	}
	quiet, cause := l.quiesceAll(ctx, req, ranks, cancel)
	if anyErr(quiet) {
		for _, r := range ranks {
			rr := snapc.RankReply{Rank: r, Dir: dirs[r]}
			switch {
			case r == cause:
				rr.Err = "not quiesced: " + quiet[r].Error()
			case quiet[r] != nil:
				rr.Err = withdrawn + quiet[r].Error()
			default:
				rr.Err = withdrawn + "another rank could not be quiesced"
			}
			out[r] = rr
		}
		l.resume(req.ID, ranks, quiet)
		return inOrder(ranks, out)
	}
	l.dumpAll(ctx, req, slices.DeleteFunc(slices.Clone(ranks), func(r int) bool { return !saved(r) }), dirs, out)
	for _, r := range ranks {
		if !saved(r) {
			out[r] = snapc.RankReply{Rank: r}
		}
	}
	keep := req.Options.Term || len(req.Ranks) > 0
	if !keep || !l.hold(req.ID, ranks, cancel) {
		l.resume(req.ID, ranks, quiet)
	}
	return inOrder(ranks, out)
}

// quiesceAll asks every rank to quiesce at once and returns each one's
// outcome, and the rank whose failure made the node give up (-1: none,
// or the request was withdrawn from outside). When one cannot be
// quiesced, the others still suspending are withdrawn (AppRequest
// Cancel): they drain with every rank, and would otherwise wait for it. A
// withdrawal of the request does the same for all.
func (l *local) quiesceAll(ctx context.Context, req snapc.LocalRequest, ranks []int, cancel <-chan struct{}) (map[int]error, int) {
	qctx, stop := context.WithCancel(ctx)
	defer stop()
	var mu sync.Mutex
	quiet := map[int]error{}
	cause, given := -1, false
	withdraw := func(rank int) {
		mu.Lock()
		first := !given
		if first {
			given, cause = true, rank
		}
		mu.Unlock()
		if !first {
			return
		}
		for _, r := range ranks {
			// A rank already quiet or gone ignores it.
			_ = l.port.Send(r, snapc.AppRequest{ID: req.ID, Kind: snapc.Cancel, Seq: req.Seq})
		}
	}
	go func() {
		select {
		case <-cancel:
			withdraw(-1)
		case <-qctx.Done():
		}
	}()
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := l.spec.Dumper.Quiesce(qctx, r, req.ID, req.Seq)
			if err != nil {
				withdraw(r)
			}
			mu.Lock()
			quiet[r] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return quiet, cause
}

// hold keeps the dumped ranks of a Term request (every rank of a
// migration's) quiesced until the request is done, released or
// withdrawn, and reports whether it does; a request
// withdrawn already is not held (the caller lets its ranks go). The
// check is made under the lock Handle closes cancel with, before
// releaseHeld looks, so no withdrawal is missed.
func (l *local) hold(id uint64, ranks []int, cancel <-chan struct{}) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-cancel:
		return false
	default:
	}
	l.held[id] = ranks
	return true
}

// dumpAll dumps every quiesced rank into its directory, at once; a
// failure is that rank's error in out.
func (l *local) dumpAll(ctx context.Context, req snapc.LocalRequest, ranks []int, dirs map[int]string, out map[int]snapc.RankReply) {
	// Term is not passed on: the ranks end when the sequence is
	// committed, not when their dump is written (held, see dump).
	opts := crs.Options{Stop: req.Options.Stop}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rr := snapc.RankReply{Rank: r, Dir: dirs[r]}
			if err := l.spec.Dumper.Dump(ctx, r, dirs[r], opts); err != nil {
				rr.Err = err.Error()
			}
			mu.Lock()
			out[r] = rr
			mu.Unlock()
		}()
	}
	wg.Wait()
}

// resume lets the quiesced ranks of request id go on.
func (l *local) resume(id uint64, ranks []int, quiet map[int]error) {
	for _, r := range ranks {
		if quiet != nil && quiet[r] != nil {
			continue
		}
		if err := l.spec.Dumper.Resume(r, id); err != nil {
			l.log.Warn("could not let a dumped rank go on", "rank", r, "request", id, "err", err)
		}
	}
}

// endHeld ends the ranks a Term dump of request id held, once the
// request is done (its sequence committed).
func (l *local) endHeld(id uint64) {
	for _, r := range l.takeHeld(id) {
		if err := l.spec.Dumper.End(r, id); err != nil {
			l.log.Warn("could not end a rank saved by a checkpoint-and-terminate", "rank", r, "request", id, "err", err)
		}
	}
}

// releaseHeld lets go the ranks a Term dump of request id held, when the
// request is withdrawn (the job goes on).
func (l *local) releaseHeld(id uint64) {
	if ranks := l.takeHeld(id); len(ranks) > 0 {
		l.resume(id, ranks, nil)
	}
}

// releaseMoved ends a migration's dump on the node (LocalRelease): its
// held ranks in req.Leave, saved and restored elsewhere by now, end; the
// others go on.
func (l *local) releaseMoved(req snapc.LocalRequest) {
	for _, r := range l.takeHeld(req.ID) {
		var err error
		if slices.Contains(req.Leave, r) {
			err = l.spec.Dumper.End(r, req.ID)
		} else {
			err = l.spec.Dumper.Resume(r, req.ID)
		}
		if err != nil {
			l.log.Warn("could not release a rank a migration held", "rank", r, "request", req.ID, "leave", slices.Contains(req.Leave, r), "err", err)
		}
	}
}

// takeHeld returns and forgets the ranks request id holds.
func (l *local) takeHeld(id uint64) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	ranks := l.held[id]
	delete(l.held, id)
	return ranks
}
