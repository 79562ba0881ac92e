package mpi

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Intercommunicators: two disjoint groups, local and remote. An
// intercommunicator is a Comm whose Rank, Size and Group are the local
// group's and whose point-to-point ranks (destinations, sources, a
// status's Source) name the remote group; AnySource means any remote
// rank. Both groups share its contexts: point-to-point messages travel on
// its handle's, and what gompi runs on it collectively (Barrier, Bcast,
// Merge, Dup) on the next one, between world ranks of both groups.
//
// What an intercommunicator has: point-to-point in every form, Barrier,
// Ibarrier, Bcast and Ibcast (the root passes Root, the rest of its group
// ProcNull), RemoteSize, RemoteGroup, IsInter, Merge, Dup, Split, Create
// (a Split), Free and Compare. Every other collective and constructor
// (topologies, Shrink, the reductions, gathers and scatters) fails with
// ErrInter: MPI defines them on intercommunicators, gompi does not run
// them.
//
// IntercommCreate, Merge, Dup and Split are recorded in the creation log
// with their results (OpInter, OpMerge, OpDup and OpSplit with Remote
// set), so a restart
// rebuilds them as it rebuilds Splits.

// Root is the root's own argument in a Bcast on an intercommunicator.
const Root = -3

// ErrInter is wrapped by the calls gompi does not run on an
// intercommunicator; it is an errors.ErrUnsupported.
var ErrInter = fmt.Errorf("%w on an intercommunicator", errors.ErrUnsupported)

// The creation log's intercommunicator entries.
const (
	// OpMerge is a Merge: Parent is the intercommunicator, Color 1 for
	// high, Members the merged order.
	OpMerge LogOp = 5
	// OpInter is an IntercommCreate: Parent is the local communicator,
	// Members the local group and Remote the remote one.
	OpInter LogOp = 6
)

// remoteGroup is an intercommunicator's remote group.
type remoteGroup struct {
	members  []int   // remote rank -> world rank
	toRemote []int32 // world rank -> remote rank or -1
}

// newInter builds the local object of an intercommunicator.
func (p *Proc) newInter(handle uint64, local, remote []int) *Comm {
	c := p.newComm(handle, local)
	g := &remoteGroup{members: remote, toRemote: make([]int32, p.size)}
	for i := range g.toRemote {
		g.toRemote[i] = -1
	}
	for i, w := range remote {
		g.toRemote[w] = int32(i)
	}
	c.inter = g
	return c
}

// IsInter reports whether c is an intercommunicator.
func (c *Comm) IsInter() bool { return c.inter != nil }

// RemoteSize returns the size of an intercommunicator's remote group (0
// on an intracommunicator).
func (c *Comm) RemoteSize() int {
	if c.inter == nil {
		return 0
	}
	return len(c.inter.members)
}

// RemoteGroup returns an intercommunicator's remote group (this process
// is no member of it), or an error on an intracommunicator.
func (c *Comm) RemoteGroup() (Group, error) {
	if err := c.live(); err != nil {
		return Group{}, err
	}
	if c.inter == nil {
		return Group{}, fmt.Errorf("mpi: remote group: %w: communicator %d is no intercommunicator", ErrArg, c.handle)
	}
	return Group{members: slices.Clone(c.inter.members), self: c.p.rank}, nil
}

// IntercommCreate makes an intercommunicator between c's members (the
// local group) and another group, disjoint from it, doing the same: the
// groups' leaders (localLeader in c, remoteLeader in peer) exchange their
// groups on peer with tag. Collective over c; only the local leader uses
// peer and remoteLeader.
func (c *Comm) IntercommCreate(localLeader int, peer *Comm, remoteLeader, tag int) (*Comm, error) {
	if err := c.checkOp(); err != nil {
		return nil, err
	}
	if err := c.checkRoot(localLeader); err != nil {
		return nil, fmt.Errorf("mpi: intercomm_create: local leader: %w", err)
	}
	return c.p.create(LogEntry{Op: OpInter, Parent: c.handle}, "intercomm_create", func(next uint64) (*Comm, error) {
		agreed := []uint64{next}
		if err := Allreduce(c, agreed, agreed, Max); err != nil {
			return nil, fmt.Errorf("mpi: intercomm_create: agree on a context: %w", err)
		}
		ctx, remote, err := c.learnRemote(agreed[0], localLeader, peer, remoteLeader, tag)
		if err != nil {
			return nil, err
		}
		e := LogEntry{Op: OpInter, Parent: c.handle, Handle: ctx, Members: slices.Clone(c.members), Remote: remote}
		return c.p.applyCreate(e), nil
	})
}

// learnRemote is where the leader learns the remote group and the
// context, and passes them on to its group as uint64s: [context, remote
// world ranks...], or nothing when its exchange failed, so that every
// member fails with it.
func (c *Comm) learnRemote(ctx uint64, localLeader int, peer *Comm, remoteLeader, tag int) (uint64, []int, error) {
	var msg []uint64
	var lerr error
	if c.rank == localLeader {
		msg, lerr = c.leaderExchange(ctx, peer, remoteLeader, tag)
	}
	n := []uint64{uint64(len(msg))}
	if err := BcastT(c, n, localLeader); err != nil {
		return 0, nil, fmt.Errorf("mpi: intercomm_create: %w", err)
	}
	if lerr != nil {
		return 0, nil, lerr
	}
	if n[0] == 0 {
		return 0, nil, fmt.Errorf("mpi: intercomm_create: the local leader's exchange with the remote leader failed")
	}
	msg = slices.Grow(msg, int(n[0]))[:n[0]]
	if err := BcastT(c, msg, localLeader); err != nil {
		return 0, nil, fmt.Errorf("mpi: intercomm_create: %w", err)
	}
	remote := make([]int, len(msg)-1)
	for i, w := range msg[1:] {
		remote[i] = int(w)
		if w >= uint64(c.p.size) || c.hasWorld(int(w)) {
			return 0, nil, fmt.Errorf("mpi: intercomm_create: %w: world rank %d is in both groups or none (the groups must be disjoint)", ErrArg, w)
		}
	}
	return msg[0], remote, nil
}

// leaderExchange sends this group's agreed context and world ranks to the
// remote leader on peer and returns the context both agree on (the
// larger) followed by the remote group's world ranks.
func (c *Comm) leaderExchange(ctx uint64, peer *Comm, remoteLeader, tag int) ([]uint64, error) {
	mine := append([]uint64{ctx}, toU64(c.members)...)
	sr, err := peer.Isend(u64Bytes(mine), remoteLeader, tag)
	if err != nil {
		return nil, fmt.Errorf("mpi: intercomm_create: to the remote leader: %w", err)
	}
	st, err := peer.Probe(remoteLeader, tag)
	if err != nil {
		return nil, fmt.Errorf("mpi: intercomm_create: from the remote leader: %w", err)
	}
	buf := make([]byte, st.Count)
	if _, err := peer.Recv(buf, remoteLeader, tag); err != nil {
		return nil, fmt.Errorf("mpi: intercomm_create: from the remote leader: %w", err)
	}
	if _, err := sr.Wait(); err != nil {
		return nil, fmt.Errorf("mpi: intercomm_create: to the remote leader: %w", err)
	}
	theirs := bytesU64(buf)
	if len(theirs) < 2 {
		return nil, fmt.Errorf("mpi: intercomm_create: %w: the remote leader sent %d bytes", ErrArg, len(buf))
	}
	theirs[0] = max(theirs[0], ctx)
	return theirs, nil
}

func toU64(s []int) []uint64 {
	out := make([]uint64, len(s))
	for i, v := range s {
		out[i] = uint64(v)
	}
	return out
}

func u64Bytes(s []uint64) []byte {
	b := make([]byte, 0, 8*len(s))
	for _, v := range s {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

func bytesU64(b []byte) []uint64 {
	out := make([]uint64, len(b)/8)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return out
}

// --- what runs over both groups ----------------------------------------------

// The collectives of an intercommunicator run on its collective context
// between world ranks, in three flat steps, all with the collective's tag:
// the local group's members report to their leader (local rank 0), the
// two leaders exchange, the leader answers its members. Messages of one
// step never match another's: each step has its own pair directions.

// leader returns the world ranks of the local and the remote leader.
func (c *Comm) leaders() (int, int) { return c.members[0], c.inter.members[0] }

func (c *Comm) wsend(world, tag int, data []byte) error {
	return c.p.send(c.co, world, tag, data, nil)
}

// wrecv receives exactly len(buf) bytes from world rank src.
func (c *Comm) wrecv(world, tag int, buf []byte) error {
	st, err := c.recvOn(context.Background(), c.co, buf, world, tag)
	if err != nil {
		return err
	}
	if st.Count != len(buf) {
		return fmt.Errorf("mpi: intercommunicator collective: %w: world rank %d sent %d bytes, %d expected (buffers differ between ranks)", ErrArg, world, st.Count, len(buf))
	}
	return nil
}

// interAgree runs the three steps: each member contributes an 8-byte
// value; the local leader takes the largest of its group's, swaps it with
// the remote leader for theirs, and every member gets both back (local,
// remote). A Barrier is interAgree of nothing.
func (c *Comm) interAgree(tag int, v uint64) (local, remote uint64, err error) {
	lw, rw := c.leaders()
	b := binary.LittleEndian.AppendUint64(nil, v)
	if c.rank != 0 {
		if err := c.wsend(lw, tag, b); err != nil {
			return 0, 0, err
		}
		both := make([]byte, 16)
		if err := c.wrecv(lw, tag, both); err != nil {
			return 0, 0, err
		}
		return binary.LittleEndian.Uint64(both), binary.LittleEndian.Uint64(both[8:]), nil
	}
	local = v
	for r := 1; r < c.size; r++ {
		if err := c.wrecv(c.members[r], tag, b); err != nil {
			return 0, 0, err
		}
		local = max(local, binary.LittleEndian.Uint64(b))
	}
	theirs := make([]byte, 8)
	sr, err := c.cisendWorld(rw, tag, binary.LittleEndian.AppendUint64(nil, local))
	if err != nil {
		return 0, 0, err
	}
	rerr := c.wrecv(rw, tag, theirs)
	if _, err := sr.Wait(); err != nil {
		return 0, 0, err
	}
	if rerr != nil {
		return 0, 0, rerr
	}
	remote = binary.LittleEndian.Uint64(theirs)
	both := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, local), remote)
	for r := 1; r < c.size; r++ {
		if err := c.wsend(c.members[r], tag, both); err != nil {
			return 0, 0, err
		}
	}
	return local, remote, nil
}

func (c *Comm) cisendWorld(world, tag int, data []byte) (*Request, error) {
	r := newRequest(c.p, reqSend)
	if err := c.p.send(c.co, world, tag, data, r); err != nil {
		return nil, err
	}
	return r, nil
}

func (c *Comm) interBarrier() error {
	if err := c.live(); err != nil {
		return err
	}
	_, _, err := c.interAgree(c.nextTag(), 0)
	return err
}

func (c *Comm) interIbarrier() (*Request, error) {
	if err := c.live(); err != nil {
		return nil, err
	}
	tag := c.nextTag()
	return c.async(func() error { _, _, err := c.interAgree(tag, 0); return err }), nil
}

// checkInterRoot checks a Bcast root on an intercommunicator.
func (c *Comm) checkInterRoot(root int) error {
	if err := c.live(); err != nil {
		return err
	}
	if root == Root || root == ProcNull || (root >= 0 && root < len(c.inter.members)) {
		return nil
	}
	return fmt.Errorf("mpi: bcast: %w: root %d on an intercommunicator (Root, ProcNull or a remote rank below %d)", ErrArg, root, len(c.inter.members))
}

func (c *Comm) interBcast(buf []byte, root int) error {
	if err := c.checkInterRoot(root); err != nil {
		return err
	}
	return c.interBcastTag(c.nextTag(), buf, root)
}

func (c *Comm) interIbcast(buf []byte, root int) (*Request, error) {
	if err := c.checkInterRoot(root); err != nil {
		return nil, err
	}
	tag := c.nextTag()
	return c.async(func() error { return c.interBcastTag(tag, buf, root) }), nil
}

// interBcastTag: the root sends to the remote leader, which passes it on
// to its group.
func (c *Comm) interBcastTag(tag int, buf []byte, root int) error {
	switch {
	case root == Root:
		return c.wsend(c.inter.members[0], tag, buf)
	case root == ProcNull:
		return nil
	case c.rank != 0:
		return c.wrecv(c.members[0], tag, buf)
	}
	if err := c.wrecv(c.inter.members[root], tag, buf); err != nil {
		return err
	}
	for r := 1; r < c.size; r++ {
		if err := c.wsend(c.members[r], tag, buf); err != nil {
			return err
		}
	}
	return nil
}

// --- constructors over an intercommunicator ------------------------------------

// agreeCtx agrees with both groups on a context id free in all of them,
// and learns whether the remote group asked for high (Merge).
func (c *Comm) agreeCtx(op string, next uint64, high bool) (ctx uint64, remoteHigh bool, err error) {
	// The value exchanged is next<<1 | high: a group's high flag travels
	// with its largest next context (MPI asks all of a group for the same
	// flag).
	v := next << 1
	if high {
		v |= 1
	}
	l, r, err := c.interAgree(c.nextTag(), v)
	if err != nil {
		return 0, false, fmt.Errorf("mpi: %s: agree on a context: %w", op, err)
	}
	return max(l, r) >> 1, r&1 == 1, nil
}

// Merge makes an intracommunicator of both groups of intercommunicator c:
// the group that passed high=false first, each in its own order; when
// both passed the same, the group whose leader has the lower world rank.
// Collective over both groups.
func (c *Comm) Merge(high bool) (*Comm, error) {
	if err := c.live(); err != nil {
		return nil, err
	}
	if c.inter == nil {
		return nil, fmt.Errorf("mpi: intercomm_merge: %w: communicator %d is no intercommunicator", ErrArg, c.handle)
	}
	color := 0
	if high {
		color = 1
	}
	return c.p.create(LogEntry{Op: OpMerge, Parent: c.handle, Color: color}, "intercomm_merge", func(next uint64) (*Comm, error) {
		ctx, remoteHigh, err := c.agreeCtx("intercomm_merge", next, high)
		if err != nil {
			return nil, err
		}
		lw, rw := c.leaders()
		first, second := c.members, c.inter.members
		if high && !remoteHigh || high == remoteHigh && lw > rw {
			first, second = second, first
		}
		e := LogEntry{Op: OpMerge, Parent: c.handle, Color: color, Handle: ctx, Members: slices.Concat(first, second)}
		return c.p.applyCreate(e), nil
	})
}

// interDup is Dup of an intercommunicator: the same groups on a new
// context.
func (c *Comm) interDup() (*Comm, error) {
	if err := c.live(); err != nil {
		return nil, err
	}
	return c.p.create(LogEntry{Op: OpDup, Parent: c.handle}, "dup", func(next uint64) (*Comm, error) {
		ctx, _, err := c.agreeCtx("dup", next, false)
		if err != nil {
			return nil, err
		}
		e := LogEntry{Op: OpDup, Parent: c.handle, Handle: ctx, Members: slices.Clone(c.members), Remote: slices.Clone(c.inter.members)}
		return c.p.applyCreate(e), nil
	})
}

// compareInter is Compare when c or d is an intercommunicator: Congruent
// when both are and their local and remote groups are the same in the
// same order, Similar when the same as sets, else Unequal.
func compareInter(c, d *Comm) int {
	if c.inter == nil || d.inter == nil {
		return Unequal
	}
	rl, _ := c.RemoteGroup()
	rr, _ := d.RemoteGroup()
	l, r := c.Group().Compare(d.Group()), rl.Compare(rr)
	switch {
	case l == Ident && r == Ident:
		return Congruent
	case l != Unequal && r != Unequal:
		return Similar
	}
	return Unequal
}

// interAllgather gives every member of both groups every member's w-byte
// contribution, in rank order: its own group's and the remote group's.
// The three steps of interAgree, carrying whole lists.
func (c *Comm) interAllgather(tag int, mine []byte) (local, remote []byte, err error) {
	w, lw, rw := len(mine), c.members[0], c.inter.members[0]
	local, remote = make([]byte, w*c.size), make([]byte, w*len(c.inter.members))
	if c.rank != 0 {
		if err := c.wsend(lw, tag, mine); err != nil {
			return nil, nil, err
		}
		both := make([]byte, len(local)+len(remote))
		if err := c.wrecv(lw, tag, both); err != nil {
			return nil, nil, err
		}
		return both[:len(local)], both[len(local):], nil
	}
	copy(local, mine)
	for r := 1; r < c.size; r++ {
		if err := c.wrecv(c.members[r], tag, local[r*w:(r+1)*w]); err != nil {
			return nil, nil, err
		}
	}
	sr, err := c.cisendWorld(rw, tag, local)
	if err != nil {
		return nil, nil, err
	}
	rerr := c.wrecv(rw, tag, remote)
	if _, err := sr.Wait(); err != nil {
		return nil, nil, err
	}
	if rerr != nil {
		return nil, nil, rerr
	}
	both := slices.Concat(local, remote)
	for r := 1; r < c.size; r++ {
		if err := c.wsend(c.members[r], tag, both); err != nil {
			return nil, nil, err
		}
	}
	return local, remote, nil
}

// interSplit is Split of an intercommunicator: the members of each group
// giving the same color, ordered by key and then rank, make a new
// intercommunicator with those of the other group giving that color; nil
// for Undefined or when the other group has no member of the color.
func (c *Comm) interSplit(color, key int) (*Comm, error) {
	if err := c.live(); err != nil {
		return nil, err
	}
	if color < 0 {
		color = Undefined
	}
	want := LogEntry{Op: OpSplit, Parent: c.handle, Color: color, Key: key}
	return c.p.create(want, "split", func(next uint64) (*Comm, error) {
		mine := u64Bytes([]uint64{uint64(int64(color)), uint64(int64(key)), next})
		lb, rb, err := c.interAllgather(c.nextTag(), mine)
		if err != nil {
			return nil, fmt.Errorf("mpi: split: exchange colors: %w", err)
		}
		l, r := bytesU64(lb), bytesU64(rb)
		ctx := uint64(0)
		for i := 2; i < len(l); i += 3 {
			ctx = max(ctx, l[i])
		}
		for i := 2; i < len(r); i += 3 {
			ctx = max(ctx, r[i])
		}
		e := want
		e.Members, e.Remote = colored(l, c.members, color), colored(r, c.inter.members, color)
		if color == Undefined || len(e.Remote) == 0 {
			e.Members, e.Remote, e.NextCtx = nil, nil, ctx+2
		} else {
			e.Handle = ctx
		}
		return c.p.applyCreate(e), nil
	})
}

// colored returns the world ranks of the members whose [color, key, next]
// triples (in all) give color, ordered by key and then rank; nil for
// Undefined.
func colored(all []uint64, members []int, color int) []int {
	if color == Undefined {
		return nil
	}
	type member struct{ key, rank int }
	var g []member
	for r := range members {
		if int(int64(all[3*r])) == color {
			g = append(g, member{int(int64(all[3*r+1])), r})
		}
	}
	slices.SortStableFunc(g, func(a, b member) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.rank, b.rank))
	})
	out := make([]int, len(g))
	for i, m := range g {
		out[i] = members[m.rank]
	}
	return out
}
