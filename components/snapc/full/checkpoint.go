package full

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
)

// ckpt is one run of a request through the steps of a checkpoint: begin,
// query, record the sequence, target, sync, commit. The steps are the same
// for a checkpoint of the whole job and for a migration's; what differs is
// the request's path (jobPath here, migrationPath in migration.go).
type ckpt struct {
	g     *global
	r     *request
	path  path
	ctx   context.Context // ends when the request is stopped
	start time.Time
	ref   snapshot.Ref
	place *placement
	meta  *snapshot.GlobalMeta
	// planned is the sequence the query announces; seq the one recorded
	// (-1 until then: a failure before it leaves nothing uncommitted).
	planned, seq int
	target       uint64
}

// path is what a checkpoint's kind decides at its steps.
type path interface {
	// requested, queried, targeted and written are the details of the
	// request's events.
	requested(id uint64) string
	queried(ranks int, target uint64) string
	targeted(seq int, refName string, target uint64) string
	written(rep snapc.LocalReply) string
	// saved is the nodes that sync, each with its saved ranks.
	saved(p *placement) map[string][]int
	// committed reports the commit (a migration starts its hold first).
	committed(c *ckpt, res snapc.Result)
	// end runs once the commit is reported and past its pause point.
	end(c *ckpt)
}

// path is the request's path: a migration's when it names ranks.
func (r *request) path() path {
	if r.migrate != nil {
		return migrationPath{ranks: r.migrate}
	}
	return jobPath{}
}

// steps runs the checkpoint's steps in order; an error is the step's, for
// fail to report.
func (c *ckpt) steps() (snapc.Result, error) {
	steps := []func() error{c.begin, c.query, c.record, c.targetRound}
	if c.g.spec.FromOutside {
		steps = c.fromOutsideSteps()
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return snapc.Result{}, err
		}
	}
	procs, err := c.sync()
	if err != nil {
		return snapc.Result{}, err
	}
	return c.commit(procs)
}

// fail withdraws the request on the nodes and reports err: a failure
// before the sequence was recorded, or one that leaves it uncommitted.
func (c *ckpt) fail(err error) (snapc.Result, error) {
	g, r := c.g, c.r
	g.cancelAll(r)
	if c.seq < 0 {
		if !errors.Is(err, snapc.ErrRefused) {
			err = fmt.Errorf("%w: %w", snapc.ErrFailed, err)
		}
		err = fmt.Errorf("snapc/full: %w", err)
	} else {
		err = fmt.Errorf("snapc/full: %w: sequence %d of %s stays uncommitted (earlier sequences are intact): %w", snapc.ErrFailed, c.seq, c.ref.Name, err)
	}
	g.event(r, snapc.PhaseFailed, "", c.seq, err.Error())
	g.log.Warn("checkpoint failed", "request", r.id, "migrate", r.migrate, "err", err)
	return snapc.Result{}, err
}

// begin announces the request, refuses it when one of its nodes is lost,
// and reads the reference's metadata.
func (c *ckpt) begin() error {
	g := c.g
	g.event(c.r, snapc.PhaseRequested, "", -1, c.path.requested(c.r.id))
	g.mu.Lock()
	for _, n := range c.place.nodes {
		if why, ok := g.lost[n]; ok {
			g.mu.Unlock()
			return fmt.Errorf("node %s was lost: %s", n, why)
		}
	}
	g.mu.Unlock()
	meta, err := g.readMeta(c.ctx)
	if err != nil {
		return err
	}
	c.meta, c.planned = meta, meta.NextSeq()
	return nil
}

// query asks every rank for its count, and whether it can be saved at
// all, and chooses the target. A migration asks every rank too: the held
// ones must reach the same safe point with their channels drained.
func (c *ckpt) query() error {
	g, r := c.g, c.r
	var refusals []string
	var maxCount uint64
	err := g.round(r, snapc.LocalRequest{ID: r.id, Kind: snapc.LocalQuery, Seq: c.planned, Ref: c.ref, Options: r.opts}, c.place.nodeRanks,
		func(node string, rr snapc.RankReply) error {
			if !rr.Checkpointable {
				reason := rr.Reason
				if reason == "" {
					reason = "it gave no reason"
				}
				refusals = append(refusals, fmt.Sprintf("rank %d on node %s cannot be checkpointed: %s", rr.Rank, node, reason))
			}
			maxCount = max(maxCount, rr.Count)
			return nil
		}, nil, nil)
	if err != nil {
		return err
	}
	if len(refusals) > 0 {
		sort.Strings(refusals)
		return fmt.Errorf("%w: %s; no rank was affected", snapc.ErrRefused, strings.Join(refusals, "; "))
	}
	c.target = maxCount + 1
	if r.app {
		c.target = r.want
	}
	r.mu.Lock()
	r.target = c.target
	r.mu.Unlock()
	g.event(r, snapc.PhaseQuery, "", -1, c.path.queried(g.ranks, c.target))
	return g.pauseAt(r, PauseQuery, c.planned)
}

// record writes the sequence, uncommitted, before anything is written.
func (c *ckpt) record() error {
	c.seq = c.meta.NextSeq()
	c.meta.Seqs = append(c.meta.Seqs, snapshot.SeqRecord{Seq: c.seq, Migrate: c.r.migrate != nil, Started: time.Now()})
	if !c.ref.IsRemote() { // a new reference takes the access sstore_base_group_readable asks for
		if err := snapshot.MkdirRef(c.ref, sstore.GroupReadable(c.g.spec.Values)); err != nil {
			c.seq = -1
			return fmt.Errorf("%w (check %s)", err, snapc.ParamGlobalDir)
		}
	}
	if err := c.g.metaStore().WriteGlobal(c.ctx, c.ref, c.meta); err != nil {
		c.seq = -1
		return fmt.Errorf("%w (check %s)", err, snapc.ParamGlobalDir)
	}
	return c.g.pauseAt(c.r, PauseSeq, c.seq)
}

// targetRound has each node ask its ranks to save at the target (a
// migration: its ranks of r.migrate save, the others hold there).
func (c *ckpt) targetRound() error {
	g, r, seq := c.g, c.r, c.seq
	var rankErrs []string
	err := g.round(r, snapc.LocalRequest{ID: r.id, Kind: snapc.LocalTarget, Seq: seq, Ref: c.ref, Target: c.target, Options: r.opts, Ranks: r.migrate},
		c.place.nodeRanks,
		func(node string, rr snapc.RankReply) error {
			if rr.Err != "" {
				rankErrs = append(rankErrs, fmt.Sprintf("rank %d on node %s: %s", rr.Rank, node, rr.Err))
			}
			return nil
		},
		func(rep snapc.LocalReply) {
			for _, rr := range rep.Ranks {
				if rr.Err != "" {
					return
				}
			}
			g.event(r, snapc.PhaseLocalWrite, rep.Node, seq, c.path.written(rep))
		},
		func() { g.event(r, snapc.PhaseTarget, "", seq, c.path.targeted(seq, c.ref.Name, c.target)) })
	if err == nil && len(rankErrs) > 0 {
		sort.Strings(rankErrs)
		err = errors.New(strings.Join(rankErrs, "; "))
	}
	if err != nil {
		return err
	}
	return g.pauseAt(r, PauseLocal, seq)
}

// sync has every node with saved ranks make their local snapshots stable,
// and returns the ranks' records, by rank.
func (c *ckpt) sync() ([]snapshot.ProcRecord, error) {
	g, r := c.g, c.r
	got := map[int]snapshot.ProcRecord{}
	err := g.round(r, snapc.LocalRequest{ID: r.id, Kind: snapc.LocalSync, Seq: c.seq, Ref: c.ref, Options: r.opts, Ranks: r.migrate}, c.path.saved(c.place),
		func(node string, rr snapc.RankReply) error {
			if rr.Err != "" {
				return fmt.Errorf("rank %d on node %s: %s", rr.Rank, node, rr.Err)
			}
			got[rr.Rank] = snapshot.ProcRecord{Rank: rr.Rank, Node: node, CRS: rr.CRS}
			return nil
		}, nil, nil)
	if err != nil {
		return nil, err
	}
	procs := make([]snapshot.ProcRecord, 0, len(got))
	for _, p := range got {
		procs = append(procs, p)
	}
	slices.SortFunc(procs, func(a, b snapshot.ProcRecord) int { return a.Rank - b.Rank })
	g.event(r, snapc.PhaseSync, "", c.seq, fmt.Sprintf("%d local snapshots stable", len(procs)))
	if err := g.pauseAt(r, PauseCommit, c.seq); err != nil {
		return nil, err
	}
	return procs, r.stopped()
}

// commit writes the ranks' records and the commit mark, last, atomically,
// then lets the path report it and end the request.
func (c *ckpt) commit(procs []snapshot.ProcRecord) (snapc.Result, error) {
	g := c.g
	rec, _ := c.meta.Seq(c.seq)
	rec.Procs, rec.Committed, rec.Finished = procs, true, time.Now()
	if err := g.metaStore().WriteGlobal(c.ctx, c.ref, c.meta); err != nil {
		return snapc.Result{}, err
	}
	res := snapc.Result{Ref: c.ref.Name, Dir: c.ref.Dir, Seq: c.seq, Duration: time.Since(c.start)}
	c.path.committed(c, res)
	if err := g.pauseAt(c.r, PauseCommitted, c.seq); err != nil {
		g.log.Warn("checkpoint committed, but the job is ending", "seq", c.seq, "err", err)
	}
	c.path.end(c)
	return res, nil
}

// jobPath is the checkpoint of the whole job: every rank saves, and once
// committed the ranks go on (or the job ends, with term).
type jobPath struct{}

func (jobPath) requested(id uint64) string { return fmt.Sprintf("request %d", id) }

func (jobPath) queried(ranks int, target uint64) string {
	return fmt.Sprintf("%d ranks can be checkpointed; target safe point %d", ranks, target)
}

func (jobPath) targeted(seq int, refName string, target uint64) string {
	return fmt.Sprintf("sequence %d recorded in %s; ranks save at safe point %d", seq, refName, target)
}

func (jobPath) written(rep snapc.LocalReply) string {
	return fmt.Sprintf("%d local snapshots written", len(rep.Ranks))
}

func (jobPath) saved(p *placement) map[string][]int { return p.nodeRanks }

func (jobPath) committed(c *ckpt, res snapc.Result) {
	c.g.event(c.r, snapc.PhaseCommit, "", c.seq, fmt.Sprintf("sequence %d committed: %s", c.seq, c.ref))
	c.g.log.Info("checkpoint committed", "ref", c.ref.String(), "seq", c.seq, "took", res.Duration)
	c.retain()
}

// end tells every node the request is done, and ends the job for term.
func (jobPath) end(c *ckpt) {
	for _, n := range c.place.nodes {
		_ = c.g.link.Send(n, snapc.LocalRequest{ID: c.r.id, Kind: snapc.LocalDone, Seq: c.seq, Ref: c.ref})
	}
	if c.r.opts.Term {
		c.g.link.Terminate()
	}
}

var _ path = jobPath{}
