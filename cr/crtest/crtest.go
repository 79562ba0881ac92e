// Package crtest is an in-process stand-in for a job's checkpoint
// coordinators (gompirun's global SnapC and the daemons' local ones), for
// testing ranks that use package cr with mpitest: it gives each rank a
// snapc.AppLink (Wrap), takes checkpoints the way the real coordinator
// does (query every rank, target the largest count plus one, cancel
// everyone when one fails), writes the local snapshots under a reference
// directory, commits sequences in the global metadata, and starts jobs
// that restart from a sequence.
package crtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	crcpbkmrk "gompi/components/crcp/bkmrk"
	crsself "gompi/components/crs/self"
	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// Register adds crs/self and crcp/bkmrk to set unless already there (the
// built-in list may carry them).
func Register(set *frameworks.Set) {
	if !slices.Contains(set.CRS.Names(), crsself.Name) {
		set.CRS.Register(crsself.New())
	}
	if !slices.Contains(set.CRCP.Names(), crcpbkmrk.Name) {
		set.CRCP.Register(crcpbkmrk.New())
	}
}

// Settings turn checkpoint/restart on, as -am ft-enable-cr does.
var Settings = []mca.Setting{{Name: "ft_cr_enabled", Value: "1"}}

// Job is the coordinator of one job.
type Job struct {
	// NoJoin makes a rank's Checkpoint request for a safe point another
	// checkpoint already took run a checkpoint of its own there (a
	// coordinator that does not merge them): the ranks, still waiting at
	// that point, are saved there again.
	NoJoin bool

	n   int
	ref snapshot.Ref
	// from is the sequence this job restarts from (-1: a fresh start).
	from int

	mu      sync.Mutex
	links   []*Link
	replies chan reply
	nextID  uint64
	colls   map[uint64]*collective
	// inflight is the checkpoint whose targets were sent (nil: none).
	inflight *pendingCkpt
	// committed are the checkpoints committed, by safe point.
	committed map[uint64]snapc.Result

	ckpt sync.Mutex // one checkpoint at a time
}

type reply struct {
	rank int
	r    snapc.AppReply
}

type collective struct {
	done chan struct{}
	res  snapc.Result
	err  error
}

// NewJob returns the coordinator of a job of n ranks whose snapshots go
// to a reference in dir.
func NewJob(n int, dir string, name string) *Job {
	j := &Job{n: n, ref: snapshot.Ref{Dir: dir, Name: snapshot.RefName(name)}, from: -1,
		replies: make(chan reply, 64*n), colls: map[uint64]*collective{}, committed: map[uint64]snapc.Result{}}
	for r := range n {
		j.links = append(j.links, &Link{job: j, rank: r, reqs: make(chan snapc.AppRequest, 64)})
	}
	return j
}

// Ref is the job's snapshot reference.
func (j *Job) Ref() snapshot.Ref { return j.ref }

// Restart returns the coordinator of a new job of the same ranks that
// restarts from sequence seq of j's reference (its local snapshots
// verified first) and takes its own checkpoints under the same reference.
func (j *Job) Restart(seq int) (*Job, error) { return j.RestartOn(seq, j.n) }

// Config returns an mpitest configuration for the job: n ranks over btl
// with crs/self and crcp/bkmrk registered, C/R on, and each rank linked.
func (j *Job) Config(btl string) mpitest.Config {
	return mpitest.Config{N: j.n, BTL: btl, Settings: slices.Clone(Settings), Register: func(_ int, set *frameworks.Set) { Register(set) }, Wrap: j.Wrap}
}

// Wrap links rank's bootstrap to the job.
func (j *Job) Wrap(rank int, b mpi.Bootstrap) mpi.Bootstrap {
	return &bootstrap{Bootstrap: b, Link: j.links[rank]}
}

type bootstrap struct {
	mpi.Bootstrap
	*Link
}

// Finalize closes the rank's link, as the rank client does when the rank
// finalizes, after the wrapped bootstrap's own Finalize if it has one.
func (b *bootstrap) Finalize(ctx context.Context) error {
	var err error
	if f, ok := b.Bootstrap.(interface{ Finalize(context.Context) error }); ok {
		err = f.Finalize(ctx)
	}
	b.Link.close()
	return err
}

// Remodex forwards the address exchange of a suspension or an in-job
// rollback (mpi.Rejoiner) to the wrapped bootstrap.
func (b *bootstrap) Remodex(ctx context.Context, epoch uint64, mine map[string]string) ([]map[string]string, error) {
	r, ok := b.Bootstrap.(mpi.Rejoiner)
	if !ok {
		return nil, fmt.Errorf("crtest: the wrapped bootstrap %T exchanges no addresses again", b.Bootstrap)
	}
	return r.Remodex(ctx, epoch, mine)
}

// RollBack sends every rank the runtime's request of an in-job rollback
// (errmgr rollback) numbered epoch to sequence seq, as gompid does: each
// rank's local snapshot of seq is its directory under the reference.
func (j *Job) RollBack(epoch uint64, seq int) {
	for _, l := range j.links {
		l.send(snapc.AppRequest{ID: epoch, Kind: snapc.Rollback, Target: epoch, Seq: seq, Dir: j.ref.LocalPath(seq, l.rank)})
	}
}

// Link is one rank's snapc.AppLink.
type Link struct {
	job    *Job
	rank   int
	mu     sync.Mutex
	reqs   chan snapc.AppRequest
	closed bool
}

// Requests implements snapc.AppLink.
func (l *Link) Requests() <-chan snapc.AppRequest { return l.reqs }

// Reply implements snapc.AppLink.
func (l *Link) Reply(ctx context.Context, r snapc.AppReply) error {
	select {
	case l.job.replies <- reply{l.rank, r}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Checkpoint implements snapc.AppLink: the first rank asking for target
// starts the checkpoint, the others join it. A request for the safe point
// the checkpoint in progress targets joins that one: a rank reaching the
// point with both requests is saved once and learns the outcome (what the
// job's real coordinator must do too).
func (l *Link) Checkpoint(ctx context.Context, target uint64, opts crs.Options) (snapc.Result, error) {
	j := l.job
	j.mu.Lock()
	c := j.colls[target]
	if c == nil && !j.NoJoin && j.inflight != nil && j.inflight.target == target {
		// The checkpoint in progress is at this very point: join it.
		c = j.inflight.coll
	}
	if c == nil {
		c = &collective{done: make(chan struct{})}
		j.colls[target] = c
		go func() {
			c.res, c.err = j.joinOrCheckpointAt(context.WithoutCancel(ctx), target, opts)
			close(c.done)
		}()
	}
	j.mu.Unlock()
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return snapc.Result{}, ctx.Err()
	}
}

// Restart implements snapc.AppLink.
func (l *Link) Restart() (snapc.RestartInfo, bool) {
	j := l.job
	if j.from < 0 {
		return snapc.RestartInfo{}, false
	}
	return snapc.RestartInfo{Ref: j.ref, Seq: j.from, Dir: j.ref.LocalPath(j.from, l.rank)}, true
}

func (l *Link) send(r snapc.AppRequest) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.reqs <- r
	return true
}

func (l *Link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.reqs)
	}
}

// ErrRefused is wrapped when a rank cannot be checkpointed (its answer to
// the query).
var ErrRefused = errors.New("not checkpointable")

// Checkpoint takes a checkpoint as gompi-checkpoint does: every rank is
// asked for its safe-point count, and all are saved at the largest plus
// one. It returns once the sequence is committed.
func (j *Job) Checkpoint(ctx context.Context, opts crs.Options) (snapc.Result, error) {
	j.ckpt.Lock()
	defer j.ckpt.Unlock()
	id := j.id()
	for r, l := range j.links {
		if !l.send(snapc.AppRequest{ID: id, Kind: snapc.Query}) {
			j.cancel(id)
			return snapc.Result{}, fmt.Errorf("crtest: query: rank %d has ended", r)
		}
	}
	var target uint64
	var refused []string
	for got := 0; got < j.n; {
		rep, err := j.await(ctx, id, snapc.Query)
		if err != nil {
			j.cancel(id)
			return snapc.Result{}, err
		}
		got++
		if !rep.r.Checkpointable {
			refused = append(refused, rep.r.Reason)
		}
		target = max(target, rep.r.Count+1)
	}
	if len(refused) > 0 {
		j.cancel(id)
		return snapc.Result{}, fmt.Errorf("crtest: %w: %v", ErrRefused, refused)
	}
	return j.target(ctx, id, target, opts)
}

// CheckpointAt saves every rank at safe point target, without a query
// (what cr.Checkpoint asks for).
func (j *Job) CheckpointAt(ctx context.Context, target uint64, opts crs.Options) (snapc.Result, error) {
	j.ckpt.Lock()
	defer j.ckpt.Unlock()
	return j.target(ctx, j.id(), target, opts)
}

// joinOrCheckpointAt is CheckpointAt for cr.Checkpoint: a checkpoint
// committed at target meanwhile (an asynchronous one that reached the
// point first) is the answer.
func (j *Job) joinOrCheckpointAt(ctx context.Context, target uint64, opts crs.Options) (snapc.Result, error) {
	j.ckpt.Lock()
	defer j.ckpt.Unlock()
	j.mu.Lock()
	res, ok := j.committed[target]
	j.mu.Unlock()
	if ok && !j.NoJoin {
		return res, nil
	}
	return j.target(ctx, j.id(), target, opts)
}

// StartAt sends every rank a target at safe point target before it
// returns (a rank that has not started yet finds it waiting), and returns
// a function that waits for the outcome. Tests use it to checkpoint at an
// exact program point.
func (j *Job) StartAt(target uint64, opts crs.Options) func() (snapc.Result, error) {
	j.ckpt.Lock()
	pc, err := j.sendTargets(j.id(), target, opts)
	if err != nil {
		j.ckpt.Unlock()
		return func() (snapc.Result, error) { return snapc.Result{}, err }
	}
	done := make(chan struct{})
	var res snapc.Result
	go func() {
		defer close(done)
		defer j.ckpt.Unlock()
		res, err = j.finish(context.Background(), pc)
	}()
	return func() (snapc.Result, error) {
		<-done
		return res, err
	}
}

func (j *Job) id() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.nextID++
	return j.nextID
}

func (j *Job) cancel(id uint64) {
	for _, l := range j.links {
		l.send(snapc.AppRequest{ID: id, Kind: snapc.Cancel})
	}
}

// await returns the next reply of kind to request id, dropping others
// (answers to requests given up on).
func (j *Job) await(ctx context.Context, id uint64, kind snapc.AppRequestKind) (reply, error) {
	for {
		select {
		case rep := <-j.replies:
			if rep.r.ID == id && rep.r.Kind == kind {
				return rep, nil
			}
		case <-ctx.Done():
			return reply{}, fmt.Errorf("crtest: waiting for the ranks: %w", ctx.Err())
		}
	}
}

func (j *Job) target(ctx context.Context, id uint64, target uint64, opts crs.Options) (snapc.Result, error) {
	pc, err := j.sendTargets(id, target, opts)
	if err != nil {
		return snapc.Result{}, err
	}
	return j.finish(ctx, pc)
}

// pendingCkpt is a checkpoint whose targets were sent.
type pendingCkpt struct {
	coll   *collective // its outcome, for requests that join it
	id     uint64
	target uint64
	start  time.Time
	g      *snapshot.GlobalMeta
	seq    int
	sent   int
	errs   []error
}

func (j *Job) sendTargets(id uint64, target uint64, opts crs.Options) (*pendingCkpt, error) {
	pc := &pendingCkpt{id: id, target: target, start: time.Now(), coll: &collective{done: make(chan struct{})}}
	g, err := snapshot.ReadGlobal(j.ref)
	if err != nil {
		if err := os.MkdirAll(j.ref.Path(), 0o755); err != nil {
			return nil, err
		}
		g = &snapshot.GlobalMeta{Job: j.ref.Name, Ranks: j.n}
	}
	g.SetRanks(j.n) // a job restarted on another rank count (RestartOn)
	pc.g, pc.seq = g, g.NextSeq()
	g.Seqs = append(g.Seqs, snapshot.SeqRecord{Seq: pc.seq, Started: pc.start})
	if err := snapshot.WriteGlobal(j.ref, g); err != nil {
		return nil, err
	}
	for r, l := range j.links {
		dir := j.ref.LocalPath(pc.seq, r)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if !l.send(snapc.AppRequest{ID: id, Kind: snapc.Target, Target: target, Seq: pc.seq, Dir: dir, Options: opts}) {
			pc.errs = append(pc.errs, fmt.Errorf("rank %d has ended", r))
			continue
		}
		pc.sent++
	}
	if len(pc.errs) > 0 {
		j.cancel(id)
	}
	j.mu.Lock()
	j.inflight = pc
	j.mu.Unlock()
	return pc, nil
}

func (j *Job) finish(ctx context.Context, pc *pendingCkpt) (res snapc.Result, err error) {
	defer func() {
		j.mu.Lock()
		if j.inflight == pc {
			j.inflight = nil
		}
		j.mu.Unlock()
		pc.coll.res, pc.coll.err = res, err
		close(pc.coll.done)
	}()
	g, errs := pc.g, pc.errs
	s := &g.Seqs[len(g.Seqs)-1]
	// Every target is answered once: saved, failed, or cancelled.
	for got := 0; got < pc.sent; got++ {
		rep, err := j.await(ctx, pc.id, snapc.Target)
		if err != nil {
			j.cancel(pc.id)
			return snapc.Result{}, err
		}
		if rep.r.Err != "" {
			if len(errs) == 0 {
				j.cancel(pc.id)
			}
			errs = append(errs, errors.New(rep.r.Err))
			continue
		}
		s.Procs = append(s.Procs, snapshot.ProcRecord{Rank: rep.rank, Node: "node0", CRS: crsself.Name})
	}
	if len(errs) > 0 {
		return snapc.Result{}, fmt.Errorf("crtest: checkpoint at safe point %d (sequence %d) failed: %w", pc.target, pc.seq, errors.Join(errs...))
	}
	slices.SortFunc(s.Procs, func(a, b snapshot.ProcRecord) int { return a.Rank - b.Rank })
	s.Committed, s.Finished = true, time.Now()
	if err := snapshot.WriteGlobal(j.ref, g); err != nil {
		return snapc.Result{}, err
	}
	res = snapc.Result{Ref: j.ref.Name, Dir: j.ref.Dir, Seq: pc.seq, Duration: time.Since(pc.start)}
	j.mu.Lock()
	j.committed[pc.target] = res
	j.mu.Unlock()
	return res, nil
}

var _ snapc.AppLink = (*Link)(nil)
