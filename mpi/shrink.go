package mpi

import (
	"context"
	"errors"
	"fmt"
)

// OpShrink is the creation log entry of a Shrink: its result (members and
// handle) is recorded like a Dup's, so a replay needs no agreement.
const OpShrink LogOp = 4

// Shrink returns a communicator of the members of c that have not failed,
// in c's order: what an application uses to go on after a failure (the
// job runs on with errmgr sustain). It is collective over the members of
// c still running; each may know of a different set of failed ranks when
// it calls Shrink, so they first agree on one set, and every survivor gets
// the same communicator, with the same handle: the agreement is Agree's
// (agreemachine.go), deciding the failed set and the new handle (the
// largest next free context id of the members). A rank that fails during
// the agreement may or may not be left out (operations with it then fail
// with ErrProcFailed, and a later Shrink removes it), but the members
// always agree. Afterwards every rank the agreement found failed is
// marked failed in this process too.
//
// As in ULFM's MPI_Comm_shrink, every surviving member must call it, in
// the same order relative to c's other collectives; it blocks until they
// have. Failures are assumed to be fail-stop: a rank reported failed (by
// a broken connection or by the runtime) does not come back.
func (c *Comm) Shrink() (*Comm, error) { return c.ShrinkCtx(context.Background()) }

// ShrinkCtx is Shrink bounded by ctx. When ctx has ended already it
// returns an error at once, before taking part; when it ends during the
// agreement, the call returns an error and creates nothing, and the other
// members may wait for this rank forever (as with any collective one
// member abandons): end them too.
func (c *Comm) ShrinkCtx(ctx context.Context) (*Comm, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mpi: shrink: %w", err)
	}
	p := c.p
	if nc, ok, err := p.replayCreate(LogEntry{Op: OpShrink, Parent: c.handle}); ok || err != nil {
		return nc, err
	}
	next, err := p.beginCreate("shrink")
	if err != nil {
		return nil, err
	}
	defer p.creating.Store(false)
	return c.shrink(ctx, c.nextFTSeq(), next)
}

// Ishrink starts a Shrink; when the request completes without error,
// *newcomm is the new communicator. Like every communicator creation it
// runs alone in the process: start no other creation before it
// completes.
//
//	req, _ := c.Ishrink(&nc)
//	if _, err := req.Wait(); err == nil {
//		c = nc
//	}
func (c *Comm) Ishrink(newcomm **Comm) (*Request, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	p := c.p
	if nc, ok, err := p.replayCreate(LogEntry{Op: OpShrink, Parent: c.handle}); ok || err != nil {
		if err != nil {
			return nil, err
		}
		*newcomm = nc
		return c.async(func() error { return nil }), nil
	}
	next, err := p.beginCreate("ishrink")
	if err != nil {
		return nil, err
	}
	seq := c.nextFTSeq()
	return c.async(func() error {
		defer p.creating.Store(false)
		nc, err := c.shrink(context.Background(), seq, next)
		if err == nil {
			*newcomm = nc
		}
		return err
	}), nil
}

// shrink agrees on the failed members (contribution: every failure
// known here, acknowledged or not) and the largest next free context id,
// and creates the communicator of the others.
func (c *Comm) shrink(ctx context.Context, seq int, next uint64) (*Comm, error) {
	p := c.p
	mine := func() agreeVal { return agreeVal{flag: ^uint64(0), next: next, failed: c.knownFailed()} }
	d, err := c.runAgreement(ctx, agreeTag(c.handle, seq), mine, true)
	if err != nil {
		return nil, fmt.Errorf("mpi: shrink: %w", err)
	}
	failed, handle := d.failed, d.next
	var members []int
	for r, w := range c.members {
		switch {
		case !failed.has(r):
			members = append(members, w)
		case w == p.rank:
			return nil, fmt.Errorf("mpi: shrink: %w: the other survivors agreed that this rank (%d) failed", ErrProcFailed, c.rank)
		default:
			p.failPeer(w, errors.New("found failed by the survivors' agreement (Shrink)"))
		}
	}
	e := LogEntry{Op: OpShrink, Parent: c.handle, Handle: handle, Members: members}
	return p.applyCreate(e), nil
}
