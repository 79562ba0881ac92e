package cr

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"gompi/frameworks/snapc"
	"gompi/mpi"
)

// ErrRolledBack is wrapped by every library call a rollback interrupted
// or refused (errmgr rollback): the job goes back to a committed sequence
// in place, and the program must return to its re-entry point, Run, which
// restores the rank and calls its function again. It is mpi.ErrRolledBack.
var ErrRolledBack = mpi.ErrRolledBack

// Run is the program's re-entry point for in-job rollback (errmgr
// rollback): it calls fn, the program's work from its Protect calls to its
// end, and returns what fn returns, but for a rollback. When fn returns
// an error wrapping ErrRolledBack (every library call fails so once the
// runtime rolls the job back), Run waits for the rank's restore: the
// library is put back as the sequence saved it, the communicators the
// program made are freed (its creation calls, made again, get them back),
// and the next Protect calls fill their values from the sequence, as after
// a restart; then Run calls fn again. Under errmgr rollback, an error
// wrapping mpi.ErrProcFailed (a peer's connection broke before the
// runtime's word came) is handled the same way: the runtime either rolls
// the job back or ends this rank.
//
//	c, _ := cr.For(p)
//	err := c.Run(ctx, func() error {
//		step := 0
//		c.Protect("grid", &grid)
//		c.Protect("step", &step)
//		for ; step < steps; step++ {
//			if err := c.SafePoint(); err != nil {
//				return err // ErrRolledBack: Run restores, calls again
//			}
//			... one step ...
//		}
//		return nil
//	})
//
// fn must register again, with Protect, every value it saved, and must
// not hold the communicators it made before a rollback. Values it does not
// protect keep whatever they held: derive them from protected ones.
func (c *Coordinator) Run(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrRolledBack) && !(errors.Is(err, mpi.ErrProcFailed) && c.rollbackOn()) {
			return err
		}
		if rerr := c.rollBack(ctx); rerr != nil {
			return fmt.Errorf("cr: rank %d: roll back (after: %v): %w", c.p.Rank(), err, rerr)
		}
	}
}

// Run is Coordinator.Run on the default Proc.
func Run(ctx context.Context, fn func() error) error {
	c, err := Default()
	if err != nil {
		return err
	}
	return c.Run(ctx, fn)
}

// rollbackOn reports whether the job's ErrMgr may roll it back: the
// errmgr selection names rollback, or errmgr_rollback_enable is on.
func (c *Coordinator) rollbackOn() bool {
	b := c.p.Bootstrap()
	if b == nil || b.Values() == nil {
		return false
	}
	v := b.Values()
	for _, name := range strings.Split(v.String("errmgr"), ",") {
		if strings.TrimSpace(name) == "rollback" {
			return true
		}
	}
	switch v.String("errmgr_rollback_enable") {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// onRollback records the runtime's Rollback request; the library has
// interrupted the rank already (mpi.Proc.RollBack). Checkpoint requests
// of the abandoned epoch are dropped: their safe points are gone.
func (c *Coordinator) onRollback(r snapc.AppRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rolling = &r
	c.pending, c.hold = nil, false
	if t := c.active; t != nil && t.cancel != nil {
		t.cancelled = true
		t.cancel()
	}
	c.wakeLocked()
}

// rollBack waits for the runtime's Rollback request, then restores the
// rank from the local snapshot it names: the library (mpi.Proc.Restore,
// which returns once every rank, restored or started anew, meets in the
// address exchange), the safe-point count and the values fn protects.
func (c *Coordinator) rollBack(ctx context.Context) error {
	c.mu.Lock()
	for c.rolling == nil {
		w := c.wake
		c.mu.Unlock()
		select {
		case <-w:
		case <-c.p.Done():
			return fmt.Errorf("waiting for the runtime's rollback: %w", mpi.ErrStopped)
		case <-ctx.Done():
			return fmt.Errorf("waiting for the runtime's rollback: %w", ctx.Err())
		}
		c.mu.Lock()
	}
	req := *c.rolling
	c.rolling = nil
	c.mu.Unlock()
	state, err := mpi.ReadLibraryState(req.Dir)
	if err != nil {
		return fmt.Errorf("sequence %d: %w", req.Seq, err)
	}
	// The program registers its values and callbacks again in fn.
	r := &c.reg
	r.mu.Lock()
	r.names, r.ptrs, r.dists, r.onCkpt, r.onCont = nil, nil, nil, nil, nil
	r.mu.Unlock()
	// The library first, then the values, in the order of a restarted
	// rank's Init and cr.For: the ranks meet in the address exchange
	// before each reads and verifies its own values, not after the
	// slowest has.
	if err := c.p.Restore(ctx, state); err != nil {
		return err
	}
	c.mu.Lock()
	c.restart = nil
	err = c.loadRestart(snapc.RestartInfo{Seq: req.Seq, Dir: req.Dir})
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.log.Info("rolled back in place", "seq", req.Seq, "epoch", req.Target, "safe_point", c.restart.at)
	return nil
}
