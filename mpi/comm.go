package mpi

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// Wildcards and special values.
const (
	AnySource = -1 // Recv/Probe source matching any rank
	AnyTag    = -1 // Recv/Probe tag matching any tag
	Undefined = -1 // Split color of ranks that want no new communicator (any negative color)
	// ProcNull is the rank to or from which messages complete at once,
	// moving nothing: a receive's status says source ProcNull, tag AnyTag,
	// count 0.
	ProcNull = -2
	// TagUB is the largest tag a message may carry.
	TagUB = syncBit - 1
)

// Comm is a communicator: a group of ranks and the contexts their messages
// travel on. It is a virtual handle owned by the library: its Handle is
// assigned deterministically by the members together, recorded in the
// creation log and the same after a restart.
type Comm struct {
	p          *Proc
	handle     uint64
	rank, size int
	members    []int   // comm rank -> world rank
	toComm     []int32 // world rank -> comm rank or -1; nil when identity
	pt, co     *ctxState

	collMu  sync.Mutex
	collSeq uint64                    // collectives started; the tag of the next one
	ftSeq   atomic.Uint64             // agreements and shrinks started (nextFTSeq)
	collTab atomic.Pointer[collTable] // the coll modules' operations (coll_select.go)
	freed   atomic.Bool
	// topo is the virtual topology the communicator was made with
	// (topo.go), nil for none.
	topo atomic.Pointer[Topology]
	// inter is the remote group of an intercommunicator (intercomm.go),
	// nil on an intracommunicator. Then members, rank and size are the
	// local group's, and point-to-point ranks name the remote group.
	inter *remoteGroup

	// ackMu guards acked: how many of the failures GetFailed lists the
	// application acknowledged (AckFailed; ft.go).
	ackMu sync.Mutex
	acked int
	// revokeSent: this process sent c's revoke notice on (revoke.go).
	revokeSent atomic.Bool
}

// newComm builds the local object of a communicator whose members (world
// ranks, in comm rank order) include this process.
func (p *Proc) newComm(handle uint64, members []int) *Comm {
	c := &Comm{p: p, handle: handle, members: members, size: len(members), rank: -1}
	identity := len(members) == p.size
	for i, w := range members {
		if w != i {
			identity = false
		}
		if w == p.rank {
			c.rank = i
		}
	}
	if !identity {
		c.toComm = make([]int32, p.size)
		for i := range c.toComm {
			c.toComm[i] = -1
		}
		for i, w := range members {
			c.toComm[w] = int32(i)
		}
	}
	p.mu.Lock()
	c.pt = p.ctxStateLocked(handle)
	c.co = p.ctxStateLocked(handle + 1)
	p.mu.Unlock()
	return c
}

// Rank returns this process's rank in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks in the communicator.
func (c *Comm) Size() int { return c.size }

// Handle returns the communicator's virtual handle: stable across restart,
// and unique within a process (world is 0).
func (c *Comm) Handle() uint64 { return c.handle }

// Proc returns the process the communicator belongs to.
func (c *Comm) Proc() *Proc { return c.p }

// WorldRank translates a rank of c into a world rank.
func (c *Comm) WorldRank(r int) int { return c.members[r] }

func (c *Comm) commRank(world int) int {
	if c.inter != nil {
		return int(c.inter.toRemote[world])
	}
	if c.toComm == nil {
		return world
	}
	return int(c.toComm[world])
}

func (c *Comm) hasWorld(world int) bool {
	if c.inter != nil && c.inter.toRemote[world] >= 0 {
		return true
	}
	return c.toComm == nil || c.toComm[world] >= 0
}

// check starts every call on a communicator but point-to-point ones and
// those an intercommunicator has (intercomm.go): those start with live.
func (c *Comm) check() error {
	if err := c.live(); err != nil {
		return err
	}
	if c.inter != nil {
		return fmt.Errorf("mpi: communicator %d: %w (gompi has point-to-point, Barrier, Bcast, Merge, Dup, Split, Create, Free and Compare on one)", c.handle, ErrInter)
	}
	return nil
}

// live checks that c can be used at all.
func (c *Comm) live() error {
	if c == nil {
		return fmt.Errorf("mpi: %w: nil communicator", ErrArg)
	}
	if c.freed.Load() {
		return fmt.Errorf("mpi: %w: communicator %d was freed", ErrArg, c.handle)
	}
	// Every public call on a communicator checks it first: during a
	// suspension new calls wait here, holding nothing.
	return c.p.pass()
}

// peerRank checks a point-to-point peer rank and returns its world rank:
// on an intercommunicator, a rank of the remote group.
func (c *Comm) peerRank(r int, what string) (int, error) {
	if err := c.usable(); err != nil {
		return 0, err
	}
	peers := c.members
	if c.inter != nil {
		peers = c.inter.members
	}
	if r < 0 || r >= len(peers) {
		return 0, fmt.Errorf("mpi: %w: %s rank %d outside communicator of size %d", ErrArg, what, r, len(peers))
	}
	return peers[r], nil
}

func (c *Comm) srcRank(src int) (int, error) {
	if src == AnySource {
		return AnySource, c.usable()
	}
	return c.peerRank(src, "source")
}

// dest checks a send's destination and tag and returns its world rank.
func (c *Comm) dest(dst, tag int) (int, error) {
	w, err := c.peerRank(dst, "destination")
	if err != nil {
		return 0, err
	}
	return w, checkTag(tag, false)
}

func checkTag(tag int, wild bool) error {
	if (tag < 0 && !(wild && tag == AnyTag)) || tag > TagUB {
		return fmt.Errorf("mpi: %w: tag %d (tags are 0..TagUB)", ErrArg, tag)
	}
	return nil
}

// nextTag numbers a collective: every member starts the collectives of a
// communicator in the same order, so the number is the same everywhere and
// concurrent non-blocking collectives never match each other's messages.
func (c *Comm) nextTag() int {
	c.collMu.Lock()
	defer c.collMu.Unlock()
	c.collSeq++
	return int(c.collSeq)
}

// nextFTSeq numbers the calls of Agree, Iagree, Shrink and Ishrink on c,
// apart from the collectives: a member that was inside a collective when
// c was revoked, or when a member failed, has taken a collective number
// the others have not, and they must still meet in the same agreement.
func (c *Comm) nextFTSeq() int { return int(c.ftSeq.Add(1)) }

// --- point-to-point --------------------------------------------------------

// Send sends buf to rank dst with tag. It returns once buf may be reused.
func (c *Comm) Send(buf []byte, dst, tag int) error {
	if dst == ProcNull {
		return c.usable()
	}
	w, err := c.peerRank(dst, "destination")
	if err != nil {
		return err
	}
	if err := checkTag(tag, false); err != nil {
		return err
	}
	return c.p.send(c.pt, w, tag, buf, nil)
}

// Isend starts sending buf to dst; buf must not change until the request
// completes.
func (c *Comm) Isend(buf []byte, dst, tag int) (*Request, error) {
	if dst == ProcNull {
		return c.nullRequest()
	}
	w, err := c.dest(dst, tag)
	if err != nil {
		return nil, err
	}
	r := newRequest(c.p, reqSend)
	if err := c.p.send(c.pt, w, tag, buf, r); err != nil {
		return nil, err
	}
	return r, nil
}

// Recv receives into buf the first message from src (or AnySource) with
// tag (or AnyTag). A longer message fills buf and fails with ErrTruncate.
func (c *Comm) Recv(buf []byte, src, tag int) (Status, error) {
	return c.RecvCtx(context.Background(), buf, src, tag)
}

// RecvCtx is Recv bounded by ctx; when ctx ends first the receive is
// withdrawn (unless a message already matched it, which is then returned).
func (c *Comm) RecvCtx(ctx context.Context, buf []byte, src, tag int) (Status, error) {
	if src == ProcNull {
		return nullStatus, c.usable()
	}
	w, err := c.srcRank(src)
	if err != nil {
		return Status{}, err
	}
	if err := checkTag(tag, true); err != nil {
		return Status{}, err
	}
	return c.recvOn(ctx, c.pt, buf, w, tag)
}

// recvOn is the blocking receive of both user and collective traffic.
func (c *Comm) recvOn(ctx context.Context, cs *ctxState, buf []byte, src, tag int) (Status, error) {
	p := c.p
	r := recvPool.Get().(*Request)
	r.p, r.comm, r.cs, r.src, r.tag, r.buf = p, c, cs, src, tag, buf
	if !p.postRecv(r) {
		p.waiting.Add(1)
		if p.spin(r.done) {
			p.waiting.Add(-1)
			return c.recvDone(r)
		}
		select {
		case <-r.done:
		case <-p.done:
			if p.cancelRecv(r) {
				r.status, r.err = Status{}, p.stopErr()
			} else {
				<-r.done
			}
		case <-ctx.Done():
			if p.cancelRecv(r) {
				r.status, r.err = Status{}, fmt.Errorf("mpi: receive: %w", ctx.Err())
			} else {
				<-r.done
			}
		}
		p.waiting.Add(-1)
	}
	return c.recvDone(r)
}

// recvDone returns a completed pooled receive's outcome and pools it.
func (c *Comm) recvDone(r *Request) (Status, error) {
	st, err := r.status, r.err
	r.comm, r.cs, r.buf, r.err, r.anyN = nil, nil, nil, nil, 0
	recvPool.Put(r)
	return st, err
}

// Irecv starts a receive into buf; buf belongs to the library until the
// request completes.
func (c *Comm) Irecv(buf []byte, src, tag int) (*Request, error) {
	if src == ProcNull {
		return c.nullRequest()
	}
	w, err := c.srcRank(src)
	if err != nil {
		return nil, err
	}
	if err := checkTag(tag, true); err != nil {
		return nil, err
	}
	return c.irecvOn(c.pt, buf, w, tag), nil
}

func (c *Comm) irecvOn(cs *ctxState, buf []byte, src, tag int) *Request {
	r := newRequest(c.p, reqRecv)
	r.comm, r.cs, r.src, r.tag, r.buf = c, cs, src, tag, buf
	if c.p.postRecv(r) {
		close(r.done)
	}
	return r
}

// Sendrecv sends sendbuf to dst and receives into recvbuf from src at once,
// so pairs of ranks can exchange without ordering their calls.
func (c *Comm) Sendrecv(sendbuf []byte, dst, sendtag int, recvbuf []byte, src, recvtag int) (Status, error) {
	sr, err := c.Isend(sendbuf, dst, sendtag)
	if err != nil {
		return Status{}, err
	}
	st, rerr := c.Recv(recvbuf, src, recvtag)
	if _, err := sr.Wait(); err != nil {
		return st, err
	}
	return st, rerr
}

// Probe waits until a message from src with tag can be received and
// returns its status without receiving it.
func (c *Comm) Probe(src, tag int) (Status, error) {
	st, _, err := c.probe(context.Background(), src, tag, true)
	return st, err
}

// ProbeCtx is Probe bounded by ctx.
func (c *Comm) ProbeCtx(ctx context.Context, src, tag int) (Status, error) {
	st, _, err := c.probe(ctx, src, tag, true)
	return st, err
}

// Iprobe reports whether a message from src with tag can be received now.
func (c *Comm) Iprobe(src, tag int) (Status, bool, error) {
	return c.probe(context.Background(), src, tag, false)
}

func (c *Comm) probe(ctx context.Context, src, tag int, block bool) (Status, bool, error) {
	st, _, ok, err := c.probeTake(ctx, src, tag, block, false)
	return st, ok, err
}

// probeTake is Probe, and Mprobe when take is set: then the message found
// leaves the unexpected queue (it is matched) and is returned.
func (c *Comm) probeTake(ctx context.Context, src, tag int, block, take bool) (Status, *message, bool, error) {
	if src == ProcNull {
		return nullStatus, nil, true, c.usable()
	}
	w, err := c.srcRank(src)
	if err != nil {
		return Status{}, nil, false, err
	}
	if err := checkTag(tag, true); err != nil {
		return Status{}, nil, false, err
	}
	p := c.p
	for {
		p.mu.Lock()
		if i := c.pt.findUnexpected(w, tag); i >= 0 {
			m := c.pt.unexp[i]
			st := Status{Source: c.commRank(m.src), Tag: c.pt.plainTag(m.tag), Count: len(m.data)}
			if !take {
				p.mu.Unlock()
				return st, nil, true, nil
			}
			c.pt.removeUnexpected(i)
			p.mu.Unlock()
			if st.Tag != m.tag {
				c.matchedSync(m.src, m.tag)
			}
			return st, m, true, nil
		}
		if err := p.recvFailureLocked(c.pt, c, w, true); err != nil {
			p.mu.Unlock()
			return Status{}, nil, false, err
		}
		if !block {
			p.mu.Unlock()
			return Status{}, nil, false, nil
		}
		pw := &probeWait{src: w, tag: tag, ch: make(chan struct{})}
		c.pt.probes = append(c.pt.probes, pw)
		p.mu.Unlock()
		if err := p.parkProbe(ctx, c.pt, pw); err != nil {
			if !p.isStopped() {
				err = fmt.Errorf("mpi: probe: %w", err)
			}
			return Status{}, nil, false, err
		}
	}
}

// --- communicator management -------------------------------------------------

// LogOp is the kind of a communicator creation log entry.
type LogOp uint8

const (
	OpDup   LogOp = 1
	OpSplit LogOp = 2
	OpFree  LogOp = 3
)

func (o LogOp) String() string {
	switch o {
	case OpDup:
		return "dup"
	case OpSplit:
		return "split"
	case OpFree:
		return "free"
	case OpShrink:
		return "shrink"
	case OpInter:
		return "intercomm_create"
	case OpMerge:
		return "intercomm_merge"
	}
	return fmt.Sprintf("LogOp(%d)", uint8(o))
}

// LogEntry is one communicator creation or release, with its arguments and
// result. Replaying the log rebuilds every communicator without any
// communication (the result is recorded), which is how a restart gets the
// same handles back.
type LogEntry struct {
	Op     LogOp
	Parent uint64 // Dup/Split: the parent's handle; Free: the freed handle
	Color  int    // Split only
	Key    int    // Split only
	Handle uint64 // the new communicator's handle; 0 when Split gave none
	// Members are the new communicator's world ranks in rank order (of
	// an intercommunicator: its local group's).
	Members []int
	// Remote is an intercommunicator's remote group (world ranks in rank
	// order); nil for an intracommunicator.
	Remote []int
	// NextCtx is the process's next free context id after the call.
	NextCtx uint64
}

// CreationLog returns a copy of the communicator creation log.
func (p *Proc) CreationLog() []LogEntry {
	p.commMu.Lock()
	defer p.commMu.Unlock()
	out := make([]LogEntry, len(p.clog))
	for i, e := range p.clog {
		e.Members = slices.Clone(e.Members)
		e.Remote = slices.Clone(e.Remote)
		out[i] = e
	}
	return out
}

// Comm returns the live communicator with a handle (world is 0).
func (p *Proc) Comm(handle uint64) (*Comm, bool) {
	p.commMu.Lock()
	defer p.commMu.Unlock()
	c, ok := p.comms[handle]
	return c, ok
}

func (p *Proc) beginCreate(op string) (uint64, error) {
	if !p.creating.CompareAndSwap(false, true) {
		return 0, fmt.Errorf("mpi: %s: %w: another communicator creation is running in this process; create communicators from one goroutine at a time", op, ErrArg)
	}
	p.commMu.Lock()
	defer p.commMu.Unlock()
	return p.nextCtx, nil
}

// create runs a communicator creation: while a restart replays, the
// result the log holds for want; else make's, given this process's next
// free context id, with no other creation running in the process.
func (p *Proc) create(want LogEntry, op string, make func(next uint64) (*Comm, error)) (*Comm, error) {
	if nc, ok, err := p.replayCreate(want); ok || err != nil {
		return nc, err
	}
	next, err := p.beginCreate(op)
	if err != nil {
		return nil, err
	}
	defer p.creating.Store(false)
	return make(next)
}

// Dup returns a new communicator with the same members and ranks, whose
// messages never match c's. Collective over c.
func (c *Comm) Dup() (*Comm, error) {
	if c != nil && c.inter != nil {
		return c.interDup()
	}
	if err := c.checkOp(); err != nil {
		return nil, err
	}
	return c.p.create(LogEntry{Op: OpDup, Parent: c.handle}, "dup", func(next uint64) (*Comm, error) {
		agreed := []uint64{next}
		if err := Allreduce(c, agreed, agreed, Max); err != nil {
			return nil, fmt.Errorf("mpi: dup: agree on a context: %w", err)
		}
		e := LogEntry{Op: OpDup, Parent: c.handle, Handle: agreed[0], Members: slices.Clone(c.members)}
		return c.p.applyCreate(e), nil
	})
}

// Split partitions c: ranks giving the same color get a communicator
// together, ordered by key and then by their rank in c. A negative color
// (Undefined) gives nil. Collective over c.
func (c *Comm) Split(color, key int) (*Comm, error) {
	if c != nil && c.inter != nil {
		return c.interSplit(color, key)
	}
	if err := c.checkOp(); err != nil {
		return nil, err
	}
	if color < 0 {
		color = Undefined
	}
	p := c.p
	if nc, ok, err := p.replayCreate(LogEntry{Op: OpSplit, Parent: c.handle, Color: color, Key: key}); ok || err != nil {
		return nc, err
	}
	next, err := p.beginCreate("split")
	if err != nil {
		return nil, err
	}
	defer p.creating.Store(false)
	all := make([]int64, 3*c.size)
	if err := AllgatherT(c, []int64{int64(color), int64(key), int64(next)}, all); err != nil {
		return nil, fmt.Errorf("mpi: split: exchange colors: %w", err)
	}
	var ctx uint64
	type member struct{ key, rank int }
	var group []member
	for r := 0; r < c.size; r++ {
		ctx = max(ctx, uint64(all[3*r+2]))
		if color != Undefined && int(all[3*r]) == color {
			group = append(group, member{int(all[3*r+1]), r})
		}
	}
	slices.SortStableFunc(group, func(a, b member) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.rank, b.rank)
	})
	e := LogEntry{Op: OpSplit, Parent: c.handle, Color: color, Key: key}
	if color != Undefined {
		e.Handle = ctx
		for _, m := range group {
			e.Members = append(e.Members, c.members[m.rank])
		}
	} else {
		e.NextCtx = ctx + 2
	}
	nc := p.applyCreate(e)
	if nc == nil {
		return nil, nil
	}
	return nc, nil
}

// applyCreate records a creation and builds its communicator (nil for a
// Split with no color). Replay at restart calls it with logged entries.
func (p *Proc) applyCreate(e LogEntry) *Comm {
	if e.Handle != 0 {
		e.NextCtx = e.Handle + 2
	}
	var nc *Comm
	switch {
	case e.Handle != 0 && e.Remote != nil:
		nc = p.newInter(e.Handle, e.Members, e.Remote)
	case e.Handle != 0:
		nc = p.newComm(e.Handle, e.Members)
	}
	p.commMu.Lock()
	p.nextCtx = max(p.nextCtx, e.NextCtx)
	if nc != nil {
		p.comms[e.Handle] = nc
	}
	p.clog = append(p.clog, e)
	p.commMu.Unlock()
	if nc.IsRevoked() {
		// A member revoked it before this process had created it: the
		// notice may have to go on (revoke.go).
		p.maybeForward(nc)
	}
	return nc
}

// Free releases the communicator; its handle is never reused. Messages
// still pending on it are dropped with it. The world cannot be freed.
func (c *Comm) Free() error {
	if err := c.live(); err != nil {
		return err
	}
	if c.handle == ctxWorld {
		return fmt.Errorf("mpi: free: %w: the world communicator cannot be freed", ErrArg)
	}
	p := c.p
	if ok, err := p.replayFree(c); ok || err != nil {
		return err
	}
	if !c.freed.CompareAndSwap(false, true) {
		return fmt.Errorf("mpi: free: %w: communicator %d already freed", ErrArg, c.handle)
	}
	p.forgetAgreements(c.handle)
	p.commMu.Lock()
	delete(p.comms, c.handle)
	p.clog = append(p.clog, LogEntry{Op: OpFree, Parent: c.handle, NextCtx: p.nextCtx})
	p.commMu.Unlock()
	return nil
}
