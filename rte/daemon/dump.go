package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/rte/lifeline"
)

// The daemon as its local coordinator's snapc.Dumper, for a job whose CRS
// saves ranks from outside (criu, a crs.Restorer; the ranks run under the
// rank init with a lifeline, lifeline.go). A rank is quiesced through its
// application coordinator (AppRequest Quiesce) and says it is ready on
// its lifeline; its process tree, rooted at its init, is dumped by the
// job's CRS into the local snapshot's directory with the metadata every
// local snapshot has; and it is given the word to go on (Continue).
//
// A rank that detaches from gompid to be dumped ends its checkpoint
// coordinator's stream: while it is asked to quiesce or is quiesced that
// is no AppGone (its end is its lifeline's, and its process's).
//
// After a dump with Stop the tree stays stopped (CRIU's leave-stopped):
// the Continue waits in the pipe until a SIGCONT, which the daemon sends
// to the init's group (signalAll) and the init forwards to the rank. With
// Term the CRS ends the tree once dumped (SIGKILL): that end is reported
// as a rank that saved and ended itself (reap), as under crs=self.

// dumper is the daemon as a snapc.Dumper.
type dumper daemon

// dumper returns the daemon as its ranks' Dumper, nil when the job's CRS
// does not save ranks from outside (its ranks have no lifeline).
func (d *daemon) dumper() snapc.Dumper {
	if !d.underInit || d.initErr != nil {
		return nil
	}
	if _, ok := d.cr.crs.(crs.Restorer); !ok {
		return nil
	}
	return (*dumper)(d)
}

// lifeOf is rank's lifeline.
func (d *daemon) lifeOf(rank int) (*rankLife, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rk, ok := d.ranks[rank]
	switch {
	case !ok || rk.pid == 0:
		return nil, fmt.Errorf("gompid: rank %d does not run on node %s", rank, d.node)
	case rk.life == nil:
		return nil, fmt.Errorf("gompid: rank %d has no lifeline (its job's CRS does not save ranks from outside)", rank)
	}
	return rk.life, nil
}

// Quiesce asks rank to suspend itself for request id (its library's
// suspension numbered by sequence seq) and waits for its
// word on its lifeline: Ready (nil), Refused (an error wrapping
// snapc.ErrRefused with the rank's reason), or the lifeline's end (the
// rank ended). It returns once the rank's connection to gompid is gone
// too, so that its reconnection after the word is not taken for a second
// coordinator of the same rank. A rank that says Ready when Quiesce has
// given up (ctx) is let go at once (Continue): nothing else would.
func (p *dumper) Quiesce(ctx context.Context, rank int, id uint64, seq int) error {
	d := (*daemon)(p)
	life, err := d.lifeOf(rank)
	if err != nil {
		return err
	}
	c, stop, err := life.expect(id)
	if err != nil {
		return fmt.Errorf("gompid: quiesce rank %d for request %d: %w", rank, id, err)
	}
	defer stop()
	if err := (*appPort)(d).Send(rank, snapc.AppRequest{ID: id, Kind: snapc.Quiesce, Seq: seq}); err != nil {
		return fmt.Errorf("gompid: quiesce rank %d for request %d: %w", rank, id, err)
	}
	select {
	case m, ok := <-c:
		switch {
		case !ok:
			return fmt.Errorf("gompid: quiesce rank %d for request %d: %w", rank, id, life.ended())
		case m.Kind == lifeline.Refused:
			return fmt.Errorf("gompid: %w: rank %d could not quiesce for request %d: %s", snapc.ErrRefused, rank, id, m.Reason)
		}
	case <-ctx.Done():
		return fmt.Errorf("gompid: quiesce rank %d for request %d: %w", rank, id, ctx.Err())
	}
	if err := d.cr.appLeft(ctx, rank); err != nil {
		life.letGo(id)
		return fmt.Errorf("gompid: rank %d said it is quiesced for request %d: %w", rank, id, err)
	}
	return nil
}

// Dump saves the quiesced rank's process tree (its init's) with the
// job's CRS into dir and writes the local snapshot's metadata there.
func (p *dumper) Dump(ctx context.Context, rank int, dir string, opts crs.Options) error {
	d := (*daemon)(p)
	if d.cr.crs == nil {
		return fmt.Errorf("gompid: dump rank %d: the job has no CRS: %w", rank, d.cr.crsErr)
	}
	rk, err := d.dumpable(rank, opts.Term)
	if err != nil {
		return err
	}
	// The CRS runs one CRIU at a time on the host (crs criu's host lock).
	res, err := d.cr.crs.Checkpoint(ctx, crs.CheckpointRequest{PID: rk.pid, Dir: dir, Options: opts})
	if err != nil {
		if opts.Term {
			// The CRS ends a tree only once it is saved.
			d.mu.Lock()
			rk.termDumped = false
			d.mu.Unlock()
		}
		return fmt.Errorf("gompid: dump rank %d: %w", rank, err)
	}
	files := make([]snapshot.FileRecord, 0, len(res.Files))
	for _, name := range res.Files {
		size, sum, err := snapshot.ChecksumFileContext(ctx, filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("gompid: dump rank %d: %w", rank, err)
		}
		files = append(files, snapshot.FileRecord{Name: name, Size: size, Checksum: sum})
	}
	err = snapshot.WriteLocal(dir, &snapshot.LocalMeta{Rank: rank, PID: rk.pid, Node: d.node, CRS: d.cr.crsName,
		Created: time.Now(), CRSMeta: res.Meta, Files: files})
	if err != nil {
		return fmt.Errorf("gompid: dump rank %d: %w", rank, err)
	}
	return nil
}

// dumpable returns rank's record when it runs and is quiesced, marking
// it dumped with Term when term (before the dump: the CRS may end it
// before Checkpoint returns).
func (d *daemon) dumpable(rank int, term bool) (*rank, error) {
	life, err := d.lifeOf(rank)
	if err != nil {
		return nil, err
	}
	if life.readyFor() == 0 {
		return nil, fmt.Errorf("gompid: dump rank %d: it is not quiesced (no lifeline ready since its last word)", rank)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	rk := d.ranks[rank]
	if rk.phase == rankExited || rk.life != life {
		return nil, fmt.Errorf("gompid: dump rank %d: it ended", rank)
	}
	if term {
		rk.termDumped = true
	}
	return rk, nil
}

// Resume gives rank the word to go on after request id: Continue on its
// lifeline.
func (p *dumper) Resume(rank int, id uint64) error {
	life, err := (*daemon)(p).lifeOf(rank)
	if err != nil {
		return err
	}
	if err := life.ended(); err != nil {
		return fmt.Errorf("gompid: resume rank %d after request %d: %w", rank, id, err)
	}
	if err := life.say(lifeline.Message{Kind: lifeline.Continue, Request: id}); err != nil {
		return fmt.Errorf("gompid: resume rank %d after request %d: %w", rank, id, err)
	}
	return nil
}

// End ends rank, held quiesced by a checkpoint-and-terminate dump whose
// sequence is committed: its tree (its init's PID namespace) is killed,
// and its end reported as a rank that saved and ended (termDumped), as
// when the CRS ends it.
func (p *dumper) End(rank int, id uint64) error {
	d := (*daemon)(p)
	d.mu.Lock()
	rk, ok := d.ranks[rank]
	if !ok || rk.phase == rankExited {
		d.mu.Unlock()
		return fmt.Errorf("gompid: end rank %d after request %d: it has ended already", rank, id)
	}
	rk.termDumped = true
	pid := rk.pid
	d.mu.Unlock()
	if err := d.ports.signal(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("gompid: end rank %d after request %d: %w", rank, id, err)
	}
	return nil
}

var _ snapc.Dumper = (*dumper)(nil)
