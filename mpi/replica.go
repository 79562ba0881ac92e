package mpi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"gompi/frameworks/btl"
	"gompi/frameworks/errmgr"
)

// Replication (FTHP-MPI's, ../shared/reference/mvapich-fthp-notes.md §2):
// a job of N ranks runs N+M processes, M ranks twice. The application
// sees ranks only: Rank, Size, communicators and their handles are the
// same in both copies of a rank, which run the same program on the same
// messages. Below the rank every process has an index (its rank for the
// runtime: the modex, the hello, the runtime's failure reports; Proc.Copy
// says which), errmgr.Layout says which index is which copy, and this
// file is the physical layer: which process sends a message of rank s to
// rank d to which, and how the job goes on when a copy dies.
//
// Routing (the notes' §2.4). Of each rank one copy is the primary; a rank
// whose two copies live is replicated. A message from s to d goes
//
//	primary(s) → primary(d)                 always
//	replica(s) → replica(d)                 both replicated
//	primary(s) → replica(d)                 only d replicated
//	replica(s) sends nothing                only s replicated
//
// so each process receives exactly one copy of every message sent to its
// rank, from one process per source rank (from), in the order sent: the
// per-pair order of MPI holds. Both copies number their messages the
// same way (per context and destination rank, the sequence numbers the
// matching engine checks), so a message's number is its send id.
// Collectives are point-to-point messages on a context of their own, so
// the copies of every rank run each collective over the same messages;
// a reduction's result is the primary's, handed to its replica
// (replica_coll.go), whatever tree the coll modules chose. AnySource
// receives are decided by the primary and followed by the replica
// (replica_any.go).
//
// Each process keeps what it sent to each rank (the sender-side log),
// copies and all, and sends from the log: a send is complete once
// logged. When a copy dies (replica_repair.go), the survivors agree on
// the processes lost with the fault-tolerant agreement of agreemachine.go,
// over all processes, on the library's own goroutine; a dead primary's
// replica becomes the primary in place, a dead replica is dropped, and
// the routes are computed again. A process whose source for some rank
// changed subscribes to the new one with the sequence numbers it holds,
// and the new source resends from its log what came after; whatever
// arrives twice is dropped by its number (ctxState.dedup). The log is
// trimmed by the receivers' acknowledgements, asked for when it grows
// past half its bound (errmgr_replica_log_limit); a send that would take
// it past the bound waits for them: the copies of a rank drift apart by
// at most the bound. The application hears nothing of a copy's loss; only
// when both copies of a rank are lost is the rank failed (failPeer, the
// usual ErrProcFailed).
//
// With replication off p.rep is nil and the message path costs one nil
// check.

// Replicator is implemented by a Bootstrap whose job is replicated: Rank
// and Size are then the process's index and the number of processes, and
// Replication says how many ranks the job has and how many of them run
// twice (the first ones: errmgr.Layout).
type Replicator interface {
	Replication() (ranks, replicated int)
}

// Sub-kinds of a kindRep frame (its header's ctx).
const (
	repAgree   = 1 // an agreement message of a repair; seq: the repair's epoch
	repSub     = 2 // subscribe: send me your messages to my rank after these numbers
	repAckReq  = 3 // tell me the numbers you hold of my rank's messages
	repAck     = 4 // the numbers held (payload as repSub's)
	repAny     = 5 // an AnySource match of the primary (replica_any.go)
	repAnyAck  = 6 // the replica has it
	repHand    = 7 // a reduction's result, primary to replica (replica_coll.go)
	repPing    = 8 // repair seq started: join it (and a connection opened)
	repLeave   = 9 // the sender finalized its rank: it waits for every process to
	maxRepKind = repLeave
)

// maxRepFrame bounds a kindRep frame that is not a handed result.
const maxRepFrame = 1 << 20

// defaultLogLimit is the log bound when the job's parameters give none.
const defaultLogLimit = 64 << 20

// replication is a Proc's physical layer (see above).
type replication struct {
	p     *Proc
	ready chan struct{} // closed once every process's path is known (connect)
	lay   errmgr.Layout
	me    int     // this process's index
	links []*peer // per process index; links[me] is the rank's own peer
	nodes []string

	mu   sync.Mutex // guards the roles and routes below
	prim []int      // per rank: its primary's index
	sec  []int      // per rank: its replica's index, -1 when it has none
	from []int      // per rank: the process this one receives its messages from
	dead bitset     // processes whose loss a repair applied
	// out is per destination rank what this process sends it; each entry
	// is guarded by that rank's peer mu (the send path's lock).
	out []repOut

	limit    int64
	logBytes atomic.Int64
	room     wakeup // woken when the log shrank
	askMu    sync.Mutex
	asking   bool // an acknowledgement round is out

	repair repairState // replica_repair.go
	anyst  anyState    // replica_any.go
	hand   handState   // replica_coll.go

	stats repCounters
}

// repOut is what a process sends one destination rank: to which copies,
// and the log of it.
type repOut struct {
	targets []*peer  // the copies messages go to now
	waiting []int    // copies that will get them once they subscribed
	copies  []int    // the rank's live copies, whose acknowledgements trim the log
	log     []ctxLog // per context, oldest first
	acked   map[[2]uint64]uint64
}

// ctxLog is the messages sent on one context to one rank.
type ctxLog struct {
	ctx  uint64
	ents []logEnt
}

type logEnt struct {
	tag  int
	seq  uint64
	data []byte
}

type repCounters struct {
	dups, resent, repairs, promoted atomic.Uint64
}

// replicate sets the Proc up as one process of a replicated job, when its
// Bootstrap says it is one (Replicator): rank and size become the rank's,
// phys and physN the process's.
func (p *Proc) replicate(b Bootstrap) error {
	rb, ok := b.(Replicator)
	if !ok {
		return nil
	}
	n, m := rb.Replication()
	if m == 0 {
		return nil
	}
	lay := errmgr.Layout{N: n, M: m}
	if err := lay.Check(); err != nil {
		return err
	}
	if lay.Procs() != p.physN {
		return fmt.Errorf("a replicated job of %d ranks, %d of them twice, is %d processes, not %d", n, m, lay.Procs(), p.physN)
	}
	p.rank, _ = lay.Rank(p.phys)
	p.size = n
	r := &replication{p: p, ready: make(chan struct{}), lay: lay, me: p.phys, prim: make([]int, n), sec: make([]int, n), from: make([]int, n),
		dead: newBitset(p.physN), out: make([]repOut, n), limit: defaultLogLimit}
	if v := b.Values(); v != nil && v.Has(errmgr.ParamReplicaLogLimit) {
		if l := v.Size(errmgr.ParamReplicaLogLimit); l > 0 {
			r.limit = l
		}
	}
	for k := range n {
		r.prim[k], r.sec[k] = lay.Proc(k, 0), lay.Proc(k, 1)
	}
	p.rep = r
	return nil
}

// start makes the links once the Proc's peers exist and computes the
// routes of the launch.
func (r *replication) start() {
	p := r.p
	r.links = make([]*peer, p.physN)
	for i := range r.links {
		k, _ := r.lay.Rank(i)
		if i == r.me {
			r.links[i] = p.peers[p.rank]
			continue
		}
		r.links[i] = &peer{rank: k, phys: i}
	}
	r.mu.Lock()
	from, targets := r.routesLocked()
	r.from = from
	r.mu.Unlock()
	for d := range r.out {
		o := &r.out[d]
		o.copies = r.copiesOf(d)
		for _, t := range targets[d] {
			o.targets = append(o.targets, r.links[t])
		}
	}
	r.repair.init(r)
	r.anyst.init()
	r.hand.init()
}

// connect chooses a transport to every other process from the modex (its
// entries are per process) and notes each rank's node.
func (r *replication) connect(all []map[string]string) error {
	p := r.p
	r.nodes = make([]string, p.size)
	for i, info := range all {
		if k, c := r.lay.Rank(i); c == 0 && info != nil {
			r.nodes[k] = info["node"]
		}
		if i == r.me {
			continue
		}
		if info == nil {
			r.lost(i, errors.New("it failed before the job started"))
			continue
		}
		if err := p.choosePath(r.links[i], info); err != nil {
			return fmt.Errorf("mpi: init: %w", err)
		}
	}
	close(r.ready)
	return nil
}

// connected waits until connect chose the paths to the other processes.
func (r *replication) connected() error {
	select {
	case <-r.ready:
		return nil
	case <-r.p.done:
		return r.p.stopErr()
	}
}

// nodeOf names the node of rank k's first copy, the same for every
// process: both copies of a rank must choose the same collective
// algorithms.
func (r *replication) nodeOf(k int) string { return r.nodes[k] }

// copiesOf returns the live copies of rank k, primary first.
func (r *replication) copiesOf(k int) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.copiesLocked(k)
}

func (r *replication) copiesLocked(k int) []int {
	out := []int{r.prim[k]}
	if r.sec[k] >= 0 {
		out = append(out, r.sec[k])
	}
	return out
}

// routesLocked applies the routing rules to the roles: per source rank
// the process this one receives from, per destination rank the processes
// it sends to.
func (r *replication) routesLocked() (from []int, targets [][]int) {
	n := len(r.prim)
	me, s := r.me, r.p.rank
	from, targets = make([]int, n), make([][]int, n)
	primary := r.prim[s] == me
	for k := range n {
		if k == s {
			from[k] = me
			continue
		}
		// Receiving from k.
		switch {
		case primary:
			from[k] = r.prim[k]
		case r.sec[k] >= 0:
			from[k] = r.sec[k]
		default:
			from[k] = r.prim[k]
		}
		// Sending to k.
		switch {
		case primary:
			targets[k] = append(targets[k], r.prim[k])
			if r.sec[k] >= 0 && r.sec[s] < 0 {
				targets[k] = append(targets[k], r.sec[k])
			}
		case r.sec[k] >= 0:
			targets[k] = append(targets[k], r.sec[k])
		}
	}
	return from, targets
}

// links returns every process's connection state, this one's included.
func (p *Proc) links() []*peer {
	if p.rep != nil {
		return p.rep.links
	}
	return p.peers
}

// Copy says which process serves this rank: its index among the job's
// processes and whether it is the rank's primary. Without replication
// the index is the rank and every process is primary.
func (p *Proc) Copy() (index int, primary bool) {
	if p.rep == nil {
		return p.rank, true
	}
	p.rep.mu.Lock()
	defer p.rep.mu.Unlock()
	return p.phys, p.rep.prim[p.rank] == p.phys
}

// ReplicaStats is what the physical layer of a replicated job did.
type ReplicaStats struct {
	// Processes and Ranks are the job's; Index is this process's.
	Processes, Ranks, Index int
	// Primary: this process is its rank's primary.
	Primary bool
	// Epoch counts the repairs applied; Promoted says this process became
	// its rank's primary in one.
	Epoch    uint64
	Promoted bool
	// Received[i] is how many messages arrived from process i (every
	// context, the library's control traffic excluded), Duplicates how
	// many of them were dropped as received already, Resent how many
	// messages this process sent again from its log.
	Received   []uint64
	Duplicates uint64
	Resent     uint64
	// LogBytes is the sender-side log's size now.
	LogBytes int64
	// Live[i] says whether process i is alive as far as the repairs know.
	Live []bool
}

// ReplicaStats returns the physical layer's counters; false without
// replication.
func (p *Proc) ReplicaStats() (ReplicaStats, bool) {
	r := p.rep
	if r == nil {
		return ReplicaStats{}, false
	}
	_, recvd := p.Counts()
	st := ReplicaStats{Processes: p.physN, Ranks: p.size, Index: p.phys, Received: recvd,
		Duplicates: r.stats.dups.Load(), Resent: r.stats.resent.Load(), LogBytes: r.logBytes.Load(),
		Promoted: r.stats.promoted.Load() > 0}
	r.mu.Lock()
	st.Primary, st.Epoch = r.prim[p.rank] == p.phys, r.repair.applied
	for i := range p.physN {
		st.Live = append(st.Live, !r.dead.has(i))
	}
	r.mu.Unlock()
	return st, true
}

// --- sending -----------------------------------------------------------------

// send is Proc.send's path in a replicated job for a message to another
// rank: numbered, logged and handed to the copies the routes name. It is
// complete once logged: the copies' connections write from the log, and
// a copy lost meanwhile is no failure of the send.
//
// A rank that finalized is no error: the sending copy may lag behind the
// other, which sent the same message before.
func (r *replication) send(lp *peer, cs *ctxState, dst, tag int, data []byte, req *Request) error {
	p := r.p
	if err := lp.failure(); err != nil {
		return err
	}
	if p.isStopped() {
		return p.stopErr()
	}
	r.waitRoom(len(data))
	buf := append([]byte(nil), data...)
	lp.mu.Lock()
	cs.sendSeq[dst]++
	seq := cs.sendSeq[dst]
	o := &r.out[dst]
	o.add(cs.ctx, tag, seq, buf)
	r.logBytes.Add(int64(len(buf)))
	var inline *peer
	for _, pe := range o.targets {
		pe.mu.Lock()
		if inline == nil && len(o.targets) == 1 && !pe.writing && (req == nil || len(buf) <= inlineMax) {
			pe.writing = true
			pe.mu.Unlock()
			inline = pe
			continue
		}
		p.enqueueLocked(pe, &sendOp{kind: kindData, ctx: cs.ctx, tag: tag, seq: seq, data: buf})
	}
	lp.mu.Unlock()
	if inline != nil {
		p.release(inline, p.transmit(inline, kindData, cs.ctx, tag, seq, buf))
	}
	if req != nil {
		req.complete(Status{}, nil)
	}
	if r.logBytes.Load() > r.limit/2 {
		r.askAcks()
	}
	return nil
}

func (o *repOut) add(ctx uint64, tag int, seq uint64, data []byte) {
	for i := range o.log {
		if o.log[i].ctx == ctx {
			o.log[i].ents = append(o.log[i].ents, logEnt{tag: tag, seq: seq, data: data})
			return
		}
	}
	o.log = append(o.log, ctxLog{ctx: ctx, ents: []logEnt{{tag: tag, seq: seq, data: data}}})
}

// waitRoom waits until the log has room for n more bytes (or is empty: a
// message larger than the bound goes alone), asking the receivers for
// acknowledgements meanwhile. It never runs on a reader goroutine: the
// acknowledgements arrive there.
func (r *replication) waitRoom(n int) {
	for {
		w := r.room.watch()
		b := r.logBytes.Load()
		if b == 0 || b+int64(n) <= r.limit {
			return
		}
		r.askAcks()
		select {
		case <-w:
		case <-r.p.done:
			return
		}
	}
}

// askAcks asks every live copy of every rank this process has logged
// messages for which of them it holds, unless a round is out already.
func (r *replication) askAcks() {
	r.askMu.Lock()
	if r.asking {
		r.askMu.Unlock()
		return
	}
	r.asking = true
	r.askMu.Unlock()
	p := r.p
	var to []int
	for d := range r.out {
		if d == p.rank {
			continue
		}
		lp := p.peers[d]
		lp.mu.Lock()
		if len(r.out[d].log) > 0 {
			to = append(to, r.out[d].copies...)
		}
		lp.mu.Unlock()
	}
	if len(to) == 0 {
		r.askMu.Lock()
		r.asking = false
		r.askMu.Unlock()
		return
	}
	for _, i := range to {
		r.ctl(i, repAckReq, 0, 0, nil)
	}
}

// ctl queues a kindRep frame to process i, behind what its connection
// carries already; it never waits.
func (r *replication) ctl(i int, kind uint64, tag int, seq uint64, payload []byte) {
	pe := r.links[i]
	if i == r.me || pe.failure() != nil {
		return
	}
	pe.mu.Lock()
	r.p.enqueueLocked(pe, &sendOp{kind: kindRep, ctx: kind, tag: tag, seq: seq, data: payload})
}

// revokeTo sends a revoke notice of communicator handle to every live
// copy of rank k.
func (r *replication) revokeTo(k int, handle uint64) {
	for _, i := range r.copiesOf(k) {
		pe := r.links[i]
		if i == r.me || pe.failure() != nil {
			continue
		}
		pe.mu.Lock()
		r.p.enqueueLocked(pe, &sendOp{kind: kindRevoke, ctx: handle})
	}
}

// --- receiving -------------------------------------------------------------------

// errDuplicate is a message whose number its receiver holds already: it
// came again from a copy its sender's source changed to (replica.go).
var errDuplicate = errors.New("duplicate message")

// dropDuplicate takes a duplicate's payload off c (nil when it is off
// already) and counts it; any other error is returned.
func (p *Proc) dropDuplicate(c btl.Conn, from *peer, h *header, n int, err error) error {
	if !errors.Is(err, errDuplicate) {
		return err
	}
	if c != nil {
		if err := c.Discard(n); err != nil {
			return err
		}
	}
	p.received(from, h, n)
	p.rep.stats.dups.Add(1)
	return nil
}

// frame handles a kindRep frame from process pe.phys on its reader
// goroutine: nothing here waits.
func (r *replication) frame(c btl.Conn, pe *peer, h *header, n int) error {
	kind := h.ctx
	if kind < 1 || kind > maxRepKind || (kind != repHand && n > maxRepFrame) {
		return fmt.Errorf("replication frame of kind %d with %d bytes", kind, n)
	}
	data := make([]byte, n)
	if err := c.ReadPayload(data); err != nil {
		return err
	}
	switch kind {
	case repAgree:
		r.repair.deliver(pe.phys, h.seq, data)
	case repSub:
		return r.subscribed(pe, h.seq, data)
	case repAckReq:
		r.ctl(pe.phys, repAck, 0, 0, r.held(pe.rank))
	case repAck:
		return r.acked(pe, data)
	case repAny:
		return r.anyDecided(pe, h, data)
	case repAnyAck:
		return r.anyAcked(h.seq, data)
	case repHand:
		r.hand.put(pe, h, data)
	case repPing:
		r.repair.notice(h.seq)
	case repLeave:
		r.repair.left(pe.phys)
	}
	return nil
}

// held encodes the numbers this process holds of rank s's messages: per
// context it received any on, the last number.
func (r *replication) held(s int) []byte {
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	var b []byte
	for ctx, cs := range p.ctxs {
		if n := cs.recvSeq[s]; n > 0 {
			b = binary.LittleEndian.AppendUint64(b, ctx)
			b = binary.LittleEndian.AppendUint64(b, n)
		}
	}
	return b
}

// parseHeld reads held's encoding.
func parseHeld(b []byte) (map[uint64]uint64, error) {
	if len(b)%16 != 0 {
		return nil, fmt.Errorf("replication: %d bytes of sequence numbers", len(b))
	}
	out := make(map[uint64]uint64, len(b)/16)
	for ; len(b) > 0; b = b[16:] {
		out[binary.LittleEndian.Uint64(b)] = binary.LittleEndian.Uint64(b[8:])
	}
	return out, nil
}

// acked trims the log of pe's rank by what its copy pe.phys holds.
func (r *replication) acked(pe *peer, data []byte) error {
	held, err := parseHeld(data)
	if err != nil {
		return err
	}
	p := r.p
	d := pe.rank
	lp := p.peers[d]
	lp.mu.Lock()
	o := &r.out[d]
	if o.acked == nil {
		o.acked = map[[2]uint64]uint64{}
	}
	for ctx, n := range held {
		k := [2]uint64{uint64(pe.phys), ctx}
		o.acked[k] = max(o.acked[k], n)
	}
	freed := o.trim()
	lp.mu.Unlock()
	r.freed(freed)
	r.askMu.Lock()
	r.asking = false
	r.askMu.Unlock()
	return nil
}

// trim drops the log's messages every live copy of the rank holds and
// returns the bytes freed; the caller holds the rank's peer mu.
func (o *repOut) trim() int64 {
	var freed int64
	for i := range o.log {
		l := &o.log[i]
		floor := uint64(0)
		for j, c := range o.copies {
			n := o.acked[[2]uint64{uint64(c), l.ctx}]
			if j == 0 || n < floor {
				floor = n
			}
		}
		k := 0
		for k < len(l.ents) && l.ents[k].seq <= floor {
			freed += int64(len(l.ents[k].data))
			l.ents[k] = logEnt{}
			k++
		}
		l.ents = l.ents[k:]
	}
	o.log = slices.DeleteFunc(o.log, func(l ctxLog) bool { return len(l.ents) == 0 })
	return freed
}

func (r *replication) freed(n int64) {
	if n > 0 {
		r.logBytes.Add(-n)
		r.room.wake()
	}
}

// subscribed handles a subscription of process pe.phys (epoch: the repair
// after which it subscribed): it wants this process's messages to its
// rank after the numbers it holds. Unless this process sends them to it
// already, it resends from the log what came after, in order, and sends
// it everything new. A subscription from before a later repair that gave
// the subscriber another source is stale and ignored.
func (r *replication) subscribed(pe *peer, epoch uint64, data []byte) error {
	held, err := parseHeld(data)
	if err != nil {
		return err
	}
	p := r.p
	d := pe.rank
	r.mu.Lock()
	stale := epoch < r.repair.applied && !slices.Contains(r.targetsLocked(d), pe.phys)
	r.mu.Unlock()
	if stale {
		return nil
	}
	lp := p.peers[d]
	lp.mu.Lock()
	defer lp.mu.Unlock()
	o := &r.out[d]
	o.waiting = slices.DeleteFunc(o.waiting, func(i int) bool { return i == pe.phys })
	if slices.Contains(o.targets, pe) {
		return nil
	}
	pe.mu.Lock()
	for _, l := range o.log {
		from := held[l.ctx]
		for _, e := range l.ents {
			if e.seq <= from {
				continue
			}
			if e.seq > from+1 && from > 0 {
				p.log.Error("replication: the log lacks messages a copy needs", "to", pe.phys, "ctx", l.ctx, "has", from, "first", e.seq)
			}
			from = e.seq
			pe.queue = append(pe.queue, &sendOp{kind: kindData, ctx: l.ctx, tag: e.tag, seq: e.seq, data: e.data})
			r.stats.resent.Add(1)
		}
	}
	o.targets = append(o.targets, pe)
	p.log.Debug("replication: subscribed", "by", pe.phys, "held", held, "queued", len(pe.queue), "writing", pe.writing)
	if len(pe.queue) > 0 && !pe.writing {
		pe.writing = true
		go p.writer(pe)
	}
	pe.mu.Unlock()
	return nil
}

// targetsLocked returns the processes the routes send rank d's messages
// to.
func (r *replication) targetsLocked(d int) []int {
	_, targets := r.routesLocked()
	return targets[d]
}

// bye handles a goodbye from process pe.phys: once the copy this process
// receives pe's rank from said it, everything that rank sent has arrived.
func (r *replication) bye(pe *peer) {
	e := &ProcFailedError{Rank: pe.rank, Cause: errFinalized}
	pe.gone.Store(e)
	r.mu.Lock()
	mine := r.from[pe.rank] == pe.phys
	r.mu.Unlock()
	if mine {
		r.p.peerGone(pe.rank)
	}
}
