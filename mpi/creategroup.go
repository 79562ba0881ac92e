package mpi

import (
	"context"
	"encoding/binary"
	"fmt"
)

// CreateGroup returns a communicator of g's members, in g's order
// (MPI_Comm_create_group): unlike Create it is collective over g's members
// only, so the other members of c do not take part. g must be a subgroup
// of c's that includes this process, the same on every member of g; tag
// tells apart calls that may run at once on c (any non-negative int,
// the same on every member). It is recorded in the creation log as a
// Split (color 0, key: rank in g), as Create is, so a restart rebuilds it
// and replays the call.
//
// The members agree on a context id through g's first member: each sends
// it its next free id, it sends back the largest. The messages travel on
// the library's control context, tagged with c's handle and tag (see
// createGroupTag), not on c, so they never match c's traffic.
func (c *Comm) CreateGroup(ctx context.Context, g Group, tag int) (*Comm, error) {
	if err := c.checkOp(); err != nil {
		return nil, err
	}
	if tag < 0 || tag > TagUB {
		return nil, fmt.Errorf("mpi: create group: %w: tag %d", ErrArg, tag)
	}
	me := g.Rank()
	if me == Undefined {
		return nil, fmt.Errorf("mpi: create group: %w: this process (world rank %d) is no member of the group", ErrArg, c.p.rank)
	}
	for _, w := range g.members {
		if !c.hasWorld(w) {
			return nil, fmt.Errorf("mpi: create group: %w: world rank %d of the group is no member of communicator %d", ErrArg, w, c.handle)
		}
	}
	p := c.p
	if nc, ok, err := p.replayCreate(LogEntry{Op: OpSplit, Parent: c.handle, Color: 0, Key: me}); ok || err != nil {
		return nc, err
	}
	next, err := p.beginCreate("create group")
	if err != nil {
		return nil, err
	}
	defer p.creating.Store(false)
	handle, err := c.agreeGroupCtx(ctx, g, createGroupTag(c.handle, tag), next)
	if err != nil {
		return nil, fmt.Errorf("mpi: create group: %w", err)
	}
	e := LogEntry{Op: OpSplit, Parent: c.handle, Color: 0, Key: me, Handle: handle, Members: g.Members()}
	return p.applyCreate(e), nil
}

// agreeGroupCtx returns the largest next free context id of g's members:
// the first member gathers them and sends the result back.
func (c *Comm) agreeGroupCtx(ctx context.Context, g Group, tag int, next uint64) (uint64, error) {
	p := c.p
	leader := g.members[0]
	buf := make([]byte, 8)
	if p.rank != leader {
		if err := p.send(p.control.pt, leader, tag, binary.LittleEndian.AppendUint64(nil, next), nil); err != nil {
			return 0, err
		}
		if _, err := p.control.recvOn(ctx, p.control.pt, buf, leader, tag); err != nil {
			return 0, err
		}
		return binary.LittleEndian.Uint64(buf), nil
	}
	agreed := next
	for _, w := range g.members[1:] {
		st, err := p.control.recvOn(ctx, p.control.pt, buf, w, tag)
		if err != nil {
			return 0, err
		}
		if st.Count != 8 {
			return 0, fmt.Errorf("world rank %d sent %d bytes for its context id, want 8", w, st.Count)
		}
		agreed = max(agreed, binary.LittleEndian.Uint64(buf))
	}
	out := binary.LittleEndian.AppendUint64(nil, agreed)
	for _, w := range g.members[1:] {
		if err := p.send(p.control.pt, w, tag, out, nil); err != nil {
			return 0, err
		}
	}
	return agreed, nil
}

// createGroupTag is the control-context tag of a CreateGroup on the
// communicator with handle: laid out as shrinkTag (bit 62 set, the
// handle's bits above bit 31), with bit 30 set and the user's tag in bits
// 0-29, where Shrink puts its collective number (below 2^30 in practice).
func createGroupTag(handle uint64, tag int) int {
	const bits = 31
	return 1<<62 | int((handle>>1)&(1<<bits-1))<<bits | 1<<30 | tag&(1<<30-1)
}
