package mpi

import (
	"context"
	"errors"
	"fmt"

	"gompi/frameworks/coll"
	"gompi/mca"
)

// Barrier, Bcast, Reduce and Allreduce run on the coll modules the rank
// selected (boot.App.Coll, best first): each communicator asks every
// module for its operations once, at its first collective, and each call
// runs on the first module that implements the operation and does not
// decline the call (coll.ErrDecline). When none takes it, the flat
// algorithm of package coll runs here, as component basic would run it.
//
// The operations are never asked for again: a member that asked after a
// change of layout (a restore on other nodes, a migration) while the others
// asked before would run another algorithm than they do. That is why han,
// whose algorithm follows the layout, is not selected in a job with C/R.

// collTable is one communicator's operations: per operation, the modules
// that implement it, best first.
type collTable struct {
	barrier   []namedOp[coll.Barrierer]
	bcast     []namedOp[coll.Bcaster]
	reduce    []namedOp[coll.Reducer]
	allreduce []namedOp[coll.Allreducer]
}

type namedOp[T any] struct {
	name string // the component's
	op   T
}

// collView is a communicator as the coll modules see it (coll.Comm): the
// same object, with the methods of that interface.
type collView Comm

func (c *Comm) view() *collView { return (*collView)(c) }

func (v *collView) Rank() int { return v.rank }
func (v *collView) Size() int { return v.size }

// Node names the node member r runs on, as this rank learned it from the
// modex: the same answer on every member (in a replicated job, the node
// of the rank's first copy, whichever copy asks).
func (v *collView) Node(r int) string {
	p := v.p
	w := v.members[r]
	if p.rep != nil {
		// Both copies of a rank run the same algorithm (replica.go).
		return p.rep.nodeOf(w)
	}
	if w == p.rank {
		return p.Node()
	}
	pe := p.peers[w]
	pe.mu.Lock()
	defer pe.mu.Unlock()
	return pe.ep.Node
}

func (v *collView) Send(_ context.Context, dst, tag int, data []byte) error {
	return (*Comm)(v).csend(dst, tag, data)
}

func (v *collView) Recv(ctx context.Context, buf []byte, src, tag int) error {
	return (*Comm)(v).crecv(ctx, buf, src, tag)
}

func (v *collView) SendRecv(ctx context.Context, sbuf []byte, dst int, rbuf []byte, src, tag int) error {
	return (*Comm)(v).csendrecv(ctx, sbuf, dst, rbuf, src, tag)
}

// colls returns c's operations, asking the modules at the first call (two
// goroutines may both ask: they get the same answers).
func (c *Comm) colls() *collTable {
	if t := c.collTab.Load(); t != nil {
		return t
	}
	t := c.buildColls()
	c.collTab.Store(t)
	return t
}

func (c *Comm) buildColls() *collTable {
	t := &collTable{}
	if c.p.modset == nil {
		return t
	}
	for _, cand := range c.p.modset.Coll {
		ops, err := cand.Module.Comm(c.view())
		if err != nil {
			if !errors.Is(err, mca.ErrSkip) {
				c.p.log.Warn("collective component unavailable on a communicator", "coll", cand.Info.Name, "comm", c.handle, "err", err)
			}
			continue
		}
		name := cand.Info.Name
		if o, ok := ops.(coll.Barrierer); ok {
			t.barrier = append(t.barrier, namedOp[coll.Barrierer]{name, o})
		}
		if o, ok := ops.(coll.Bcaster); ok {
			t.bcast = append(t.bcast, namedOp[coll.Bcaster]{name, o})
		}
		if o, ok := ops.(coll.Reducer); ok {
			t.reduce = append(t.reduce, namedOp[coll.Reducer]{name, o})
		}
		if o, ok := ops.(coll.Allreducer); ok {
			t.allreduce = append(t.allreduce, namedOp[coll.Allreducer]{name, o})
		}
	}
	return t
}

// CollComponents names the coll components that offer operation op
// ("barrier", "bcast", "reduce" or "allreduce") on c, in the order they
// are asked; a call any of them declines runs the flat algorithm, as
// basic would.
func (c *Comm) CollComponents(op string) ([]string, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	t := c.colls()
	switch op {
	case "barrier":
		return names(t.barrier), nil
	case "bcast":
		return names(t.bcast), nil
	case "reduce":
		return names(t.reduce), nil
	case "allreduce":
		return names(t.allreduce), nil
	}
	return nil, fmt.Errorf("mpi: %w: no collective operation %q", ErrArg, op)
}

func names[T any](ops []namedOp[T]) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = o.name
	}
	return out
}

// declined reports whether a module's answer passes the call on to the
// next one.
func declined(err error) bool { return err != nil && errors.Is(err, coll.ErrDecline) }

func (c *Comm) barrier(tag int) error {
	ctx, v := context.Background(), c.view()
	err := errDeclined
	for _, o := range c.colls().barrier {
		if err = o.op.Barrier(ctx, v, tag); !declined(err) {
			break
		}
	}
	if declined(err) {
		err = coll.Barrier(ctx, v, tag)
	}
	if err != nil {
		return fmt.Errorf("mpi: barrier: %w", err)
	}
	return nil
}

func (c *Comm) bcast(tag int, buf []byte, root int) error {
	ctx, v := context.Background(), c.view()
	err := errDeclined
	for _, o := range c.colls().bcast {
		if err = o.op.Bcast(ctx, v, tag, buf, root); !declined(err) {
			break
		}
	}
	if declined(err) {
		err = coll.Bcast(ctx, v, tag, buf, root)
	}
	if err != nil {
		return fmt.Errorf("mpi: bcast: %w", err)
	}
	return nil
}

func (c *Comm) reduce(tag int, send, recv []byte, red coll.Reduction, root int) error {
	ctx, v := context.Background(), c.view()
	err := errDeclined
	for _, o := range c.colls().reduce {
		if err = o.op.Reduce(ctx, v, tag, send, recv, red, root); !declined(err) {
			break
		}
	}
	if declined(err) {
		err = coll.Reduce(ctx, v, tag, send, recv, red, root)
	}
	if err == nil && c.p.rep != nil && c.rank == root {
		err = c.p.rep.handoff(c, tag, recv)
	}
	if err != nil {
		return fmt.Errorf("mpi: reduce: %w", err)
	}
	return nil
}

func (c *Comm) allreduce(tag int, send, recv []byte, red coll.Reduction) error {
	ctx, v := context.Background(), c.view()
	err := errDeclined
	for _, o := range c.colls().allreduce {
		if err = o.op.Allreduce(ctx, v, tag, send, recv, red); !declined(err) {
			break
		}
	}
	if declined(err) {
		err = coll.Allreduce(ctx, v, tag, send, recv, red)
	}
	if err == nil && c.p.rep != nil {
		err = c.p.rep.handoff(c, tag, recv)
	}
	if err != nil {
		return fmt.Errorf("mpi: allreduce: %w", err)
	}
	return nil
}

// errDeclined starts each dispatch: no module has taken the call yet.
var errDeclined = coll.ErrDecline
