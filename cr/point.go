package cr

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"time"

	"gompi/frameworks/crcp"
	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mpi"
)

// replyTimeout bounds an answer to the job's coordinator.
const replyTimeout = 30 * time.Second

// SafePoint marks a point where the rank may be saved: call it where the
// registered state describes the rank's progress and no request is in
// flight, typically at the top of the main loop. It returns at once
// unless a checkpoint wants this point: then it saves the rank first, or
// holds until the job's coordinator says which point it wants (one round
// trip). A failed checkpoint is the coordinator's to report: the rank runs
// on and SafePoint returns nil. Errors are those of a restart (a value
// saved but not registered again) and ErrTerminated.
func (c *Coordinator) SafePoint() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.notQuiesced("safe point"); err != nil {
		return err
	}
	if c.rolling != nil || c.p.RollingBack() {
		return fmt.Errorf("cr: rank %d: safe point: %w", c.p.Rank(), ErrRolledBack)
	}
	c.count++
	n := c.count
	if _, err := c.arrive(n); err != nil {
		return err
	}
	return c.serve(n, nil)
}

// Checkpoint takes a checkpoint of the whole job here: every rank calls
// it at the same program point (it counts as a safe point), and it
// returns the committed snapshot. On a restart from that snapshot it
// returns at once, with the snapshot restarted from.
func (c *Coordinator) Checkpoint(ctx context.Context, opts Options) (Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.notQuiesced("checkpoint (use QuiesceCheckpoint)"); err != nil {
		return Result{}, err
	}
	c.count++
	n := c.count
	if res, err := c.arrive(n); res != nil || err != nil {
		if res != nil {
			return *res, nil
		}
		return Result{}, err
	}
	return c.collective(ctx, n, opts)
}

// notQuiesced refuses a new safe point while the job is quiesced: the
// program is inside the quiesce's point until QuiesceEnd.
func (c *Coordinator) notQuiesced(what string) error {
	if q := c.quiesce; q != nil {
		return fmt.Errorf("cr: %s while quiesced at safe point %d: call QuiesceEnd first", what, q.epoch)
	}
	return nil
}

// collective asks the job's coordinator for a checkpoint at safe point n
// and serves it; c.mu is held.
func (c *Coordinator) collective(ctx context.Context, n uint64, opts Options) (Result, error) {
	if c.link == nil {
		if err := c.serve(n, nil); err != nil {
			return Result{}, err
		}
		return Result{}, fmt.Errorf("cr: checkpoint at safe point %d: %w", n, ErrNoCoordinator)
	}
	done := make(chan struct{})
	var res Result
	var rerr error
	go func() {
		res, rerr = c.link.Checkpoint(ctx, n, opts)
		close(done)
	}()
	if err := c.serve(n, done); err != nil {
		return Result{}, err
	}
	<-done
	if rerr != nil {
		return Result{}, fmt.Errorf("cr: checkpoint at safe point %d: %w", n, rerr)
	}
	return res, nil
}

// arrive handles the restart point: when n is the safe point a restarted
// rank was saved at, the replay of communicator creations ends and the
// INC stack goes up with RESTART. res is the snapshot restarted from, for
// Checkpoint. c.mu is held (and released around the callbacks).
func (c *Coordinator) arrive(n uint64) (res *Result, err error) {
	rs := c.restart
	if rs == nil || rs.resumed || n != rs.at {
		return nil, nil
	}
	rs.resumed = true
	var missing []string
	for _, name := range rs.names {
		if !rs.restored[name] {
			missing = append(missing, name)
		}
	}
	c.mu.Unlock()
	c.p.EndReplay()
	rerr := c.stack.Recover(context.Background(), crs.StateRestart)
	c.mu.Lock()
	c.resetRequestedLocked()
	if len(missing) > 0 {
		return nil, fmt.Errorf("cr: rank %d: restart at safe point %d: saved state %q was not registered again with Protect before this point; its value is lost", c.p.Rank(), n, missing)
	}
	if rerr != nil {
		return nil, fmt.Errorf("cr: rank %d: restart at safe point %d: %w", c.p.Rank(), n, rerr)
	}
	return &Result{Ref: rs.info.Ref.Name, Dir: rs.info.Ref.Dir, Seq: rs.info.Seq}, nil
}

// serve runs at safe point n with c.mu held: it runs the checkpoint
// targeted at n, and holds while a query awaits its target or until
// until is closed (nil: no such wait). It returns with c.mu held.
func (c *Coordinator) serve(n uint64, until <-chan struct{}) error {
	c.atPoint = true
	defer func() { c.atPoint = false }()
	for {
		if t := c.pending; t != nil && t.req.Target == n && (c.quiesceAt != n || len(t.req.Migrate) > 0) {
			c.pending, c.active = nil, t
			c.mu.Unlock()
			err := c.run(t, n)
			c.mu.Lock()
			c.active = nil
			if err != nil {
				return err
			}
			continue
		}
		if until != nil {
			select {
			case <-until:
				c.resetRequestedLocked()
				return nil
			default:
			}
		} else if !c.hold || c.finalizing {
			c.resetRequestedLocked()
			return nil
		}
		w := c.wake
		c.mu.Unlock()
		var stopped bool
		select {
		case <-w:
		case <-until:
		case <-c.p.Done():
			stopped = true
		}
		c.mu.Lock()
		if stopped {
			return fmt.Errorf("cr: safe point %d: %w", n, mpi.ErrStopped)
		}
	}
}

// inPoint reports whether the program is inside safe point c.count: waiting
// in it, or quiesced there (until QuiesceEnd).
func (c *Coordinator) inPoint() bool { return c.atPoint || c.quiesce != nil }

// --- requests from the job's coordinator ------------------------------------------

// handle is called by the mpi library's responder, one request at a time.
func (c *Coordinator) handle(r snapc.AppRequest) {
	switch r.Kind {
	case snapc.Query:
		c.onQuery(r)
	case snapc.Target:
		c.onTarget(r)
	case snapc.Cancel:
		c.onCancel(r)
	case snapc.ReleaseHold:
		c.onRelease(r)
	case snapc.Rollback:
		c.onRollback(r)
	default:
		c.log.Warn("unknown request from the checkpoint coordinator", "kind", r.Kind, "id", r.ID)
	}
}

func (c *Coordinator) onQuery(r snapc.AppRequest) {
	c.mu.Lock()
	// The count is of the safe points passed: a rank waiting inside one
	// (holding, or in Checkpoint waiting for its own request) can still
	// be saved there, so its peers may be targeted at it too.
	passed := c.count
	if c.inPoint() {
		passed--
	}
	rep := snapc.AppReply{ID: r.ID, Kind: snapc.Query, Count: max(passed, c.attempted)}
	switch {
	case c.reason != "":
		rep.Reason = c.reason
	case c.finalizing:
		rep.Reason = fmt.Sprintf("rank %d is finalizing", c.p.Rank())
	case c.pending != nil:
		rep.Reason = fmt.Sprintf("rank %d: a checkpoint at safe point %d is in progress", c.p.Rank(), c.pending.req.Target)
	default:
		rep.Checkpointable = true
		c.hold, c.holdID = true, r.ID
		c.signalRequestedLocked()
	}
	c.mu.Unlock()
	c.reply(rep)
}

func (c *Coordinator) onTarget(r snapc.AppRequest) {
	c.mu.Lock()
	rank, n := c.p.Rank(), r.Target
	var why string
	var resave bool
	switch {
	case c.reason != "":
		why = c.reason
	case c.finalizing:
		why = fmt.Sprintf("rank %d finished before safe point %d", rank, n)
	case r.Options.Stop:
		why = fmt.Sprintf("rank %d: crs=%s cannot stop a process once saved (--stop; Open MPI's self could not either): checkpoint without --stop, or with --term", rank, c.crsName)
	case r.Dir == "" && (len(r.Migrate) == 0 || slices.Contains(r.Migrate, rank)):
		why = fmt.Sprintf("rank %d: target safe point %d without a snapshot directory", rank, n)
	case len(r.Migrate) > 0 && c.quiesce != nil:
		why = fmt.Sprintf("rank %d is quiesced (since safe point %d): a migration waits until QuiesceEnd; ask again after it", rank, c.quiesce.epoch)
	case len(r.Migrate) == 0 && n == c.attempted && n == c.count && c.inPoint() && c.drainedAt == n && c.pending == nil:
		// Still inside the point it was saved at (perhaps finishing that
		// checkpoint), its channels drained there and quiet since (no
		// rank passes a point it waits in for its own request): it can
		// be saved there again, without the protocol. The job's
		// coordinator asks this when a rank's Checkpoint request waited
		// behind a checkpoint that chose its point.
		resave = true
	case n <= c.attempted:
		why = fmt.Sprintf("rank %d was already saved at (or restarted from) safe point %d; target a later one", rank, c.attempted)
	case n < c.count || (n == c.count && !c.inPoint()):
		why = fmt.Sprintf("rank %d passed safe point %d before the request arrived (it is past %d)", rank, n, c.count)
	case c.pending != nil:
		why = fmt.Sprintf("rank %d: a checkpoint at safe point %d is already pending", rank, c.pending.req.Target)
	}
	if why != "" {
		c.hold = false
		c.wakeLocked()
		c.mu.Unlock()
		c.reply(snapc.AppReply{ID: r.ID, Kind: snapc.Target, Err: why})
		return
	}
	c.pending = &target{req: r, queryID: c.holdID, resave: resave}
	c.hold = false
	c.signalRequestedLocked()
	c.wakeLocked()
	c.mu.Unlock()
}

func (c *Coordinator) onCancel(r snapc.AppRequest) {
	c.mu.Lock()
	if c.hold && c.holdID == r.ID {
		c.hold = false
	}
	if t := c.active; t != nil && (t.req.ID == r.ID || t.queryID == r.ID) {
		t.cancelled = true
		if t.cancel != nil {
			t.cancel()
		}
	}
	var rep *snapc.AppReply
	if t := c.pending; t != nil && (t.req.ID == r.ID || t.queryID == r.ID) {
		c.pending = nil
		rep = &snapc.AppReply{ID: t.req.ID, Kind: snapc.Target, Err: fmt.Sprintf("rank %d: checkpoint at safe point %d cancelled before the rank reached it", c.p.Rank(), t.req.Target)}
	}
	c.wakeLocked()
	c.mu.Unlock()
	if rep != nil {
		c.reply(*rep)
	}
}

// onFinalize runs when the rank enters mpi.Finalize.
func (c *Coordinator) onFinalize() {
	c.mu.Lock()
	c.finalizing = true
	c.hold = false
	var rep *snapc.AppReply
	if t := c.pending; t != nil {
		c.pending = nil
		rep = &snapc.AppReply{ID: t.req.ID, Kind: snapc.Target, Err: fmt.Sprintf("rank %d finished before safe point %d", c.p.Rank(), t.req.Target)}
	}
	c.wakeLocked()
	c.mu.Unlock()
	if rep != nil {
		c.reply(*rep)
	}
	c.undo()
	regMu.Lock()
	if registry[c.p] == c {
		delete(registry, c.p)
	}
	regMu.Unlock()
}

func (c *Coordinator) reply(r snapc.AppReply) {
	if c.link == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), replyTimeout)
	defer cancel()
	if err := c.link.Reply(ctx, r); err != nil {
		c.log.Warn("could not answer the checkpoint coordinator", "request", r.ID, "err", err)
	}
}

func (c *Coordinator) wakeLocked() {
	close(c.wake)
	c.wake = make(chan struct{})
}

func (c *Coordinator) signalRequestedLocked() {
	if !c.reqClosed {
		close(c.requested)
		c.reqClosed = true
	}
}

func (c *Coordinator) resetRequestedLocked() {
	wanted := c.hold || c.pending != nil || (c.restart != nil && !c.restart.resumed)
	if c.reqClosed && !wanted {
		c.requested = make(chan struct{})
		c.reqClosed = false
	}
}

// --- one checkpoint ------------------------------------------------------------------

// run takes the checkpoint t at safe point n on the program's goroutine.
// Its outcome goes to the coordinator; only ErrTerminated (or a failure
// to terminate) is returned.
func (c *Coordinator) run(t *target, n uint64) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := t.req
	c.mu.Lock()
	t.cancel = cancel
	if t.cancelled {
		cancel()
	}
	c.attempted = n
	q := c.quiesce
	ch := c.p.ChannelsAt(checkpointEpoch(n))
	if q != nil {
		ch = q.ch
	}
	c.ch = ch
	c.mu.Unlock()
	if t.resave {
		return c.resave(ctx, req, n)
	}
	defer func() {
		c.mu.Lock()
		c.ch = nil
		c.mu.Unlock()
	}()
	cause := func(err error) error {
		if ctx.Err() != nil && t.cancelledNow(c) {
			return fmt.Errorf("cancelled by the coordinator: %w", err)
		}
		return err
	}

	if q == nil {
		if err := c.stack.Prepare(ctx); err != nil {
			c.replyTarget(req, fmt.Errorf("rank %d: prepare for safe point %d: %w", c.p.Rank(), n, cause(err)))
			return nil
		}
		c.mu.Lock()
		c.drainedAt = n
		c.mu.Unlock()
	}
	serr, release := c.saveAt(ctx, req, n, cause)
	c.replyTarget(req, serr)
	// Agree that every rank saved: no rank sends again before all saved
	// (a message sent after a rank's save must not be captured by a peer
	// still saving), and --term ends the job only if the snapshot is whole.
	allOK := serr == nil
	if q == nil || req.Options.Term {
		allOK = c.allSaved(ctx, ch, n, serr == nil)
	}
	if len(req.Migrate) > 0 {
		return c.migrationEnd(ctx, req, n, serr, allOK, release)
	}
	return c.afterSave(ctx, req, n, serr, allOK, q == nil)
}

// saveAt saves this rank at safe point n. A migration saves only the
// moving ranks (the others hold); for one, the returned channel brings
// the release once every rank saved.
func (c *Coordinator) saveAt(ctx context.Context, req snapc.AppRequest, n uint64, cause func(error) error) (serr error, release chan snapc.AppRequest) {
	rank := c.p.Rank()
	mig := len(req.Migrate) > 0
	if !mig || slices.Contains(req.Migrate, rank) {
		if serr = c.saveLocal(ctx, req, n); serr != nil {
			serr = fmt.Errorf("rank %d: save at safe point %d: %w", rank, n, cause(serr))
		}
	}
	if mig && serr == nil {
		// Before anyone may learn that all saved: the moving ranks end
		// soon after, and the release may come at once.
		if err := c.p.PeersMoving(req.Migrate); err != nil {
			serr = fmt.Errorf("rank %d: migration at safe point %d: %w", rank, n, err)
		} else {
			release = c.awaitRelease(req.ID)
		}
	}
	return serr, release
}

// allSaved tells every rank whether this one saved (ok) and reports
// whether all did; not learning it counts as not all.
func (c *Coordinator) allSaved(ctx context.Context, ch crcp.Channels, n uint64, ok bool) bool {
	allOK, err := ch.Agree(ctx, ok)
	if err != nil {
		c.log.Warn("checkpoint: could not learn whether every rank saved", "safepoint", n, "err", err)
		return false
	}
	return allOK
}

// afterSave ends a checkpoint that is no migration: the INC stack
// recovers if run prepared it (recoverStack; it does not while the job
// is quiesced), then the rank terminates (--term, every rank saved) or
// continues.
func (c *Coordinator) afterSave(ctx context.Context, req snapc.AppRequest, n uint64, serr error, allOK, recoverStack bool) error {
	state := crs.StateContinue
	switch {
	case serr != nil:
		state = crs.StateError
	case allOK && req.Options.Term:
		state = crs.StateTerm
	}
	if recoverStack {
		if err := c.stack.Recover(context.WithoutCancel(ctx), state); err != nil {
			c.log.Warn("checkpoint: recovering the INC stack", "state", state, "err", err)
		}
	}
	switch state {
	case crs.StateTerm:
		if err := c.cfg.terminate(); err != nil {
			return fmt.Errorf("cr: terminate after the checkpoint at safe point %d: %w", n, err)
		}
		return ErrTerminated
	case crs.StateContinue:
		c.continued()
	}
	return nil
}

// continued runs the OnContinue callbacks.
func (c *Coordinator) continued() {
	c.reg.mu.Lock()
	cbs := slices.Clone(c.reg.onCont)
	c.reg.mu.Unlock()
	for i, f := range cbs {
		if err := f(); err != nil {
			c.log.Warn("OnContinue callback failed", "callback", i+1, "err", err)
		}
	}
}

// resave saves the rank again at the safe point it was saved at and
// still waits in (see onTarget): the library's state has not changed.
func (c *Coordinator) resave(ctx context.Context, req snapc.AppRequest, n uint64) error {
	if err := c.saveLocal(ctx, req, n); err != nil {
		c.replyTarget(req, fmt.Errorf("rank %d: save again at safe point %d: %w", c.p.Rank(), n, err))
		return nil
	}
	c.replyTarget(req, nil)
	if req.Options.Term {
		if err := c.cfg.terminate(); err != nil {
			return fmt.Errorf("cr: terminate after the checkpoint at safe point %d: %w", n, err)
		}
		return ErrTerminated
	}
	return nil
}

func (t *target) cancelledNow(c *Coordinator) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return t.cancelled
}

func (c *Coordinator) replyTarget(req snapc.AppRequest, err error) {
	rep := snapc.AppReply{ID: req.ID, Kind: snapc.Target}
	if err != nil {
		rep.Err = err.Error()
		c.log.Warn("checkpoint failed on this rank", "safepoint", req.Target, "err", err)
	}
	c.reply(rep)
}

// saveLocal writes the local snapshot: the CRS's files, the library
// state, and snapshot_meta last.
func (c *Coordinator) saveLocal(ctx context.Context, req snapc.AppRequest, n uint64) error {
	lib, err := c.p.SaveState()
	if err != nil {
		if errors.Is(err, mpi.ErrBusy) {
			return fmt.Errorf("%w (at a safe point the program must have waited for every request it started)", err)
		}
		return err
	}
	c.reg.mu.Lock()
	c.reg.savingAt, c.reg.lastFiles = n, nil
	c.reg.mu.Unlock()
	res, err := c.crs.Checkpoint(ctx, crs.CheckpointRequest{PID: os.Getpid(), Dir: req.Dir, Options: req.Options})
	if err != nil {
		return err
	}
	c.reg.mu.Lock()
	known := slices.Clone(c.reg.lastFiles)
	c.reg.mu.Unlock()
	var files []snapshot.FileRecord
	for _, name := range res.Files {
		if i := slices.IndexFunc(known, func(r snapshot.FileRecord) bool { return r.Name == name }); i >= 0 {
			files = append(files, known[i])
			continue
		}
		size, sum, err := snapshot.ChecksumFile(req.Dir + string(os.PathSeparator) + name)
		if err != nil {
			return err
		}
		files = append(files, snapshot.FileRecord{Name: name, Size: size, Checksum: sum})
	}
	w, err := snapshot.CreateFile(req.Dir, snapc.LibraryStateFile)
	if err != nil {
		return err
	}
	if _, err := w.Write(lib); err != nil {
		w.Abort()
		return err
	}
	rec, err := w.Close()
	if err != nil {
		return err
	}
	files = append(files, rec)
	meta := maps.Clone(res.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	meta["cr_safepoint"] = strconv.FormatUint(n, 10)
	return snapshot.WriteLocal(req.Dir, &snapshot.LocalMeta{
		Rank: c.p.Rank(), PID: os.Getpid(), Node: c.p.Node(), CRS: c.crsName,
		Created: time.Now(), CRSMeta: meta, Files: files,
	})
}

// --- quiesce -----------------------------------------------------------------------------

// QuiesceStart brings every rank to a consistent point with the channels
// between them drained, without saving: every rank calls it at the same
// program point (it counts as a safe point). Until QuiesceEnd the program
// must not send messages (point-to-point or collective); it may write
// files of its own, or call QuiesceCheckpoint.
func (c *Coordinator) QuiesceStart(ctx context.Context) error {
	c.mu.Lock()
	if c.quiesce != nil {
		c.mu.Unlock()
		return fmt.Errorf("cr: quiesce start: already quiesced (since safe point %d)", c.quiesce.epoch)
	}
	c.count++
	n := c.count
	if _, err := c.arrive(n); err != nil {
		c.mu.Unlock()
		return err
	}
	// A checkpoint targeted at this point is taken once quiesced (at
	// QuiesceEnd or QuiesceCheckpoint), as ranks that quiesced before the
	// target reached them take it: every rank must take it the same way.
	c.quiesceAt = n
	err := c.serve(n, nil)
	c.quiesceAt = 0
	if err != nil {
		c.mu.Unlock()
		return err
	}
	q := &quiesceState{epoch: n, ch: c.p.ChannelsAt(quiesceEpoch(n))}
	c.quiesce = q
	c.mu.Unlock()
	if err := c.protocol(ctx, crs.StateCheckpoint, q); err != nil {
		c.mu.Lock()
		c.quiesce = nil
		c.mu.Unlock()
		return fmt.Errorf("cr: quiesce at safe point %d: %w", n, err)
	}
	c.mu.Lock()
	c.drainedAt = n
	c.mu.Unlock()
	q.sent, q.recvd = c.p.Counts()
	return nil
}

func (c *Coordinator) protocol(ctx context.Context, state crs.State, q *quiesceState) error {
	m := c.p.CRCP()
	if m == nil {
		if c.p.Size() > 1 && state == crs.StateCheckpoint {
			return errors.New("no coordination protocol (crcp=none): the channels cannot be drained; run with -am ft-enable-cr")
		}
		return nil
	}
	return m.FTEvent(ctx, state, q.ch)
}

// QuiesceEnd ends a quiesce: every rank calls it; it returns once all
// did, and messages may flow again.
func (c *Coordinator) QuiesceEnd(ctx context.Context) error {
	c.mu.Lock()
	q := c.quiesce
	if q == nil {
		c.mu.Unlock()
		return errors.New("cr: quiesce end: not quiesced (call QuiesceStart first)")
	}
	// A checkpoint targeted at the quiesced point (an asynchronous one,
	// when the program does not call QuiesceCheckpoint) is taken here.
	if t := c.pending; c.hold || t != nil && t.req.Target == q.epoch {
		if err := c.serve(q.epoch, nil); err != nil {
			c.mu.Unlock()
			return err
		}
	}
	c.mu.Unlock()
	var errs []error
	if sent, recvd := c.p.Counts(); !slices.Equal(sent, q.sent) || !slices.Equal(recvd, q.recvd) {
		errs = append(errs, fmt.Errorf("cr: quiesce end: messages moved while the job was quiesced (sent %v, received %v since the quiesce began with %v, %v); a quiesced program must not communicate", sent, recvd, q.sent, q.recvd))
	}
	if _, err := q.ch.Agree(ctx, true); err != nil {
		errs = append(errs, fmt.Errorf("cr: quiesce end: %w", err))
	}
	if err := c.protocol(ctx, crs.StateContinue, q); err != nil {
		errs = append(errs, fmt.Errorf("cr: quiesce end: %w", err))
	}
	c.mu.Lock()
	c.quiesce = nil
	c.mu.Unlock()
	return errors.Join(errs...)
}

// QuiesceCheckpoint checkpoints the quiesced job (every rank calls it
// between QuiesceStart and QuiesceEnd) and returns the committed snapshot;
// on a restart from it, it returns at once with the snapshot restarted
// from.
func (c *Coordinator) QuiesceCheckpoint(ctx context.Context, opts Options) (Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.quiesce
	if q == nil {
		return Result{}, errors.New("cr: quiesce checkpoint: not quiesced (call QuiesceStart first)")
	}
	if rs := c.restart; rs != nil && rs.at == q.epoch && !q.restartShown {
		q.restartShown = true
		return Result{Ref: rs.info.Ref.Name, Dir: rs.info.Ref.Dir, Seq: rs.info.Seq}, nil
	}
	return c.collective(ctx, q.epoch, opts)
}
