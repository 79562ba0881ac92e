package mpi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"gompi/boot"
	"gompi/frameworks/btl"
	"gompi/frameworks/crcp"
	"gompi/mca"
)

// Reserved context ids. A communicator with handle h sends point-to-point
// messages on context h and runs its collectives on h+1, so the two never
// match each other.
const (
	ctxWorld     = 0 // MPI_COMM_WORLD
	ctxControl   = 2 // the library's own traffic (crcp.Channels), never counted or watched
	firstUserCtx = 4
)

const (
	// inlineMax is the largest Isend written on the caller's goroutine;
	// larger ones go to the peer's writer so Isend returns at once.
	inlineMax = 64 << 10
	// directMin is the smallest message read straight into a posted
	// receive's buffer instead of being copied from a library buffer.
	directMin = 32 << 10

	dialTimeout     = 30 * time.Second
	finalizeTimeout = 30 * time.Second
)

// Proc is one MPI process: its transports, matching engine and
// communicators. Applications use the default Proc through Init and World;
// tests run several Procs in one address space (package mpitest).
type Proc struct {
	rank, size int
	// phys and physN are this process's index and the number of
	// processes: rank and size, but in a replicated job (rep, replica.go),
	// where several processes serve one rank.
	phys, physN int
	rep         *replication // nil when the job is not replicated
	bsend       bsendState   // the buffer attached for buffered sends (p2p.go)
	job         string
	// node is this process's node name: the Bootstrap's at Init, and
	// again at each Resume (a restored process may run elsewhere).
	node atomic.Pointer[string]
	boot Bootstrap
	log  *slog.Logger

	modset  *boot.App // the rank's selected modules (boot.AssembleApp)
	mods    []btl.Module
	modName []string
	selfEP  []btl.Endpoint // per module, with the address it published
	peers   []*peer

	mu   sync.Mutex // matching state: ctxs and their queues
	ctxs map[uint64]*ctxState

	commMu   sync.Mutex // communicators, creation log, context allocation
	comms    map[uint64]*Comm
	clog     []LogEntry
	nextCtx  uint64
	creating atomic.Bool

	world   *Comm
	control *Comm
	agrees  agreeTable // agreements' messages and decisions (agree.go)

	hook     atomic.Pointer[hookBox]
	waiting  atomic.Int32 // goroutines blocked waiting for a message: readers busy-poll
	pollOK   atomic.Bool  // this node is not oversubscribed: polling may use the processor
	spinOK   atomic.Bool  // waiters poll too: GOMAXPROCS > 1 and a processor for each (see waitSpin)
	osYield  atomic.Bool  // waiters are C threads: they poll yielding the thread (CalledFromC)
	activeNB atomic.Int32 // non-blocking collectives in flight
	nFailed  atomic.Int32
	fails    failLog // the failed ranks in the order learned (ft.go)
	failWake wakeup  // woken at every failure: Waits on AnySource receives (revoke.go)

	drainMu sync.Mutex
	drains  []*drainWait
	nDrains atomic.Int32

	inMu     sync.Mutex
	inFrom   []btl.Conn            // accepted connection per source rank
	pending  map[btl.Conn]struct{} // accepted, still in the hello
	inClosed bool
	refusals btl.Refusals           // refused hellos, by peer address
	helloKey atomic.Pointer[[]byte] // the hello's MAC key, from the data-plane secret and the rollback epoch (hello.go)
	readers  sync.WaitGroup

	app appState // the link to the job's checkpoint coordinators
	// quiesce is the transparent checkpoints under way (transparent.go)
	quiesce quiesceState
	replay  *replayState // restarted: creation calls replay the saved log

	done       chan struct{}
	stopOnce   sync.Once
	stopErrV   error
	stopCtx    func() bool
	finalizing atomic.Bool
	leaving    atomic.Bool // this rank is migrating: peers drop their connections to this process (migrate.go)

	gate  gate       // library entries wait here during a suspension (suspend.go)
	susp  suspension // Suspend and Resume
	flags flagState  // the peers' flags of suspensions by crcp flag (flag.go)
	// ctlFrames counts the library's own frames written to peers (control
	// context messages and flags): what a suspension's protocol cost.
	ctlFrames atomic.Uint64

	events failureEvents // the application's subscribers to failures (events.go)
	rb     rollbackState // an in-job rollback (rollback.go)
}

// hookBox holds the active coordination protocol; a nil box means none, and
// the message path then costs one pointer load.
type hookBox struct{ m crcp.Module }

type drainWait struct {
	peer  int
	total uint64
	ch    chan struct{}
}

// peer is the connection state toward one world rank. Sends are ordered
// by a writer token (writing): whoever holds it owns out and hdr and
// writes; others queue behind it, so messages leave in the order their
// sequence numbers were assigned.
type peer struct {
	rank int
	// phys is the process the connection reaches: rank, but for the
	// links of a replicated job (replica.go), one per copy of a rank.
	phys     int
	mod      btl.Module
	self, ep btl.Endpoint

	mu       sync.Mutex
	writing  bool
	queue    []*sendOp
	out      btl.Conn // set under mu by the token holder, or by anyone under mu while nobody holds it
	hdr      [hdrLen]byte
	dropIdle bool // out was closed while the token was held: forget it when the holder gives the token back

	failErr atomic.Pointer[ProcFailedError] // failed: every operation with it fails
	gone    atomic.Pointer[ProcFailedError] // said goodbye: receives from it fail
	moving  atomic.Bool                     // migrating: its connections may close (migrate.go)
	oldIn   btl.Conn                        // migrating: the old process's connection; under Proc.inMu

	sent, recvd atomic.Uint64 // messages, not counting the library's control traffic
}

type sendOp struct {
	kind uint8
	ctx  uint64
	tag  int
	seq  uint64
	data []byte
	req  *Request   // non-blocking: completed once written
	wake chan error // blocking: receives the outcome
}

func (op *sendOp) finish(err error) {
	if op.req != nil {
		op.req.complete(Status{}, err)
	} else if op.wake != nil {
		op.wake <- err
	}
}

// failure returns the error of a failed peer, nil when it is alive.
func (pe *peer) failure() error {
	if e := pe.failErr.Load(); e != nil {
		return e
	}
	return nil
}

// goneOrFailed also counts a peer that finalized.
func (pe *peer) goneOrFailed() error {
	if e := pe.failErr.Load(); e != nil {
		return e
	}
	if e := pe.gone.Load(); e != nil {
		return e
	}
	return nil
}

// Option changes how InitWith starts a Proc.
type Option func(*options)

type options struct {
	state  []byte
	replay bool
	log    *slog.Logger
}

// WithState restores library state saved by SaveState (a restart).
func WithState(state []byte) Option { return func(o *options) { o.state = state } }

// WithLogger sets the logger; the Proc's records add its rank and node.
// By default a rank of a job logs through its runtime's handler (a
// Bootstrap with a LogHandler method, as rankclient's: the job's one
// format, naming the rank and node already), anything else through
// slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// procLog returns the handler the rank's components log through (each
// filtered by its framework's verbosity, boot.AssembleApp) and the
// library's own logger. The runtime's handler passes every level; the
// library's records pass from Info up, as slog.Default's did.
func procLog(b Bootstrap, given *slog.Logger) (slog.Handler, *slog.Logger) {
	ls, ok := b.(interface{ LogHandler() slog.Handler })
	switch {
	case given == nil && ok:
		h := ls.LogHandler()
		return h, slog.New(mca.MinLevel(h, slog.LevelInfo))
	case given == nil:
		given = slog.Default()
	}
	h := given.Handler().WithAttrs([]slog.Attr{slog.Int("rank", b.Rank()), slog.String("node", b.Node())})
	return h, slog.New(h)
}

// newProc builds a Proc with its world and control communicators and no
// transports; log is its own logger (procLog).
func newProc(b Bootstrap, log *slog.Logger) (*Proc, error) {
	rank, size := b.Rank(), b.Size()
	if size < 1 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("mpi: init: bootstrap gives rank %d of %d", rank, size)
	}

	p := &Proc{
		rank: rank, size: size, phys: rank, physN: size, job: b.Job(), boot: b,
		log:     log,
		ctxs:    map[uint64]*ctxState{},
		comms:   map[uint64]*Comm{},
		nextCtx: firstUserCtx,
		pending: map[btl.Conn]struct{}{},
		done:    make(chan struct{}),
	}
	if err := p.replicate(b); err != nil {
		return nil, fmt.Errorf("mpi: init: %w", err)
	}
	p.inFrom = make([]btl.Conn, p.physN)
	p.gate.init()
	node := b.Node()
	p.node.Store(&node)
	// A rank an in-job rollback started anew joins the rollback's epoch.
	var epoch uint64
	if re, ok := b.(RollbackEpocher); ok {
		epoch = re.RollbackEpoch()
	}
	p.rb.epoch.Store(epoch)
	key, err := helloKeyAt(b.Secret(), p.job, epoch)
	if err != nil {
		return nil, fmt.Errorf("mpi: init: %w", err)
	}
	p.helloKey.Store(&key)
	p.peers = make([]*peer, p.size)
	for r := range p.peers {
		p.peers[r] = &peer{rank: r, phys: r}
	}
	if p.rep != nil {
		p.peers[p.rank].phys = p.phys
		p.rep.start()
	}
	all := make([]int, p.size)
	for i := range all {
		all[i] = i
	}
	p.world = p.newComm(ctxWorld, all)
	p.control = p.newComm(ctxControl, all)
	p.comms[ctxWorld] = p.world
	return p, nil
}

// InitWith starts a Proc over a runtime bootstrap: it restores saved state
// when there is some, opens the selected transports, exchanges their
// addresses through the modex and chooses a transport per peer.
// Connections open lazily on the first send. ctx bounds start-up and, once
// it ends, stops the Proc (its blocking calls return ErrStopped).
func InitWith(ctx context.Context, b Bootstrap, opts ...Option) (*Proc, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	logs, log := procLog(b, o.log)
	p, err := newProc(b, log)
	if err != nil {
		return nil, err
	}
	if o.state == nil {
		if l := p.AppLink(); l != nil {
			if info, ok := l.Restart(); ok {
				st, err := ReadLibraryState(info.Dir)
				if err != nil {
					return nil, fmt.Errorf("mpi: init: restart: %w", err)
				}
				o.state, o.replay = st, true
			}
		}
	}
	if o.state == nil {
		if rs, ok := b.(Restorer); ok {
			st, err := rs.RestoreState()
			if err != nil {
				return nil, fmt.Errorf("mpi: init: restore state from the runtime: %w", err)
			}
			o.state = st
		}
	}
	if o.state != nil {
		// Before any transport opens: restored unexpected messages must
		// precede every new arrival, and sequence numbers must be in place.
		if err := p.restoreState(o.state, o.replay); err != nil {
			return nil, fmt.Errorf("mpi: init: %w", err)
		}
	}
	p.modset, err = boot.AssembleApp(ctx, boot.AppInput{Set: b.Frameworks(), Values: b.Values(), Size: p.size, Log: logs})
	if err != nil {
		return nil, fmt.Errorf("mpi: init: %w", err)
	}
	// The protocol is installed after the restore (it is seeded with the
	// restored totals) and before any message moves.
	p.installCRCP()
	if err := p.openTransports(ctx); err != nil {
		p.closeModules()
		return nil, err
	}
	p.startAppResponder()
	p.stopCtx = context.AfterFunc(ctx, func() {
		p.stop(fmt.Errorf("mpi: %w: %w", ErrStopped, context.Cause(ctx)))
		p.shutdown()
	})
	return p, nil
}

func (p *Proc) openTransports(ctx context.Context) error {
	mine := map[string]string{"node": p.Node()}
	if p.physN > 1 {
		host := btl.Host{Job: p.job, Secret: p.boot.Secret()}
		for _, c := range p.modset.BTL {
			self := btl.Endpoint{Job: p.job, Rank: p.phys, Node: p.Node()}
			if _, err := mca.Provision(ctx, c.Module, host); err != nil {
				p.log.Warn("transport unavailable", "btl", c.Info.Name, "err", err)
				continue
			}
			addr, err := c.Module.Listen(ctx, self, p.accept)
			if err != nil {
				p.log.Warn("transport unavailable", "btl", c.Info.Name, "err", err)
				continue
			}
			self.Addr = addr
			p.mods = append(p.mods, c.Module)
			p.modName = append(p.modName, c.Info.Name)
			p.selfEP = append(p.selfEP, self)
			mine["btl_"+c.Info.Name] = addr
		}
		if len(p.mods) == 0 {
			return fmt.Errorf("mpi: init: no transport could listen (btl = %q); see the warnings above", p.boot.Values().String("btl"))
		}
	}
	all, err := p.boot.Modex(ctx, mine)
	if err != nil {
		return fmt.Errorf("mpi: init: modex: %w", err)
	}
	if len(all) != p.physN {
		return fmt.Errorf("mpi: init: modex returned %d entries for %d ranks", len(all), p.physN)
	}
	p.setPolling(all)
	if p.rep != nil {
		return p.rep.connect(all)
	}
	for r, info := range all {
		if r == p.rank {
			continue
		}
		if info == nil {
			// The runtime declared it failed before it published (the job
			// runs on without it, errmgr sustain).
			p.failPeer(r, errors.New("it failed before the job started"))
			continue
		}
		if err := p.choosePath(p.peers[r], info); err != nil {
			return fmt.Errorf("mpi: init: %w", err)
		}
	}
	return nil
}

// setPolling lets the transports poll only when every rank on this node
// (by the modex entries all) can have a processor of its own, as Open MPI
// yields when idle on an oversubscribed node.
func (p *Proc) setPolling(all []map[string]string) {
	here := 0
	for _, info := range all {
		if info != nil && info["node"] == p.Node() {
			here++
		}
	}
	p.pollOK.Store(here <= runtime.NumCPU())
	procs := runtime.GOMAXPROCS(0)
	p.spinOK.Store(procs > 1 && here*procs <= runtime.NumCPU())
	if here > runtime.NumCPU() {
		p.log.Debug("node oversubscribed: transports will not poll", "ranks", here, "cpus", runtime.NumCPU())
	}
}

func (p *Proc) someoneWaits() bool { return p.waiting.Load() > 0 }

// Rank returns the world rank.
func (p *Proc) Rank() int { return p.rank }

// Size returns the number of ranks in the world.
func (p *Proc) Size() int { return p.size }

// World returns MPI_COMM_WORLD of this Proc.
func (p *Proc) World() *Comm { return p.world }

// Job returns the job id the runtime gave.
func (p *Proc) Job() string { return p.job }

// Node returns this process's node name.
func (p *Proc) Node() string { return *p.node.Load() }

// Transport returns the name of the BTL component used toward a world
// rank ("self" for the process itself, "" before the peer is known).
func (p *Proc) Transport(rank int) string {
	if rank == p.rank {
		return "self"
	}
	for i, m := range p.mods {
		if p.peers[rank].mod == m {
			return p.modName[i]
		}
	}
	return ""
}

// Abort asks the runtime to end the whole job with code.
func (p *Proc) Abort(code int, msg string) { p.boot.Abort(code, msg) }

// SetCRCP installs the coordination protocol that watches every message
// (nil removes it). Its Sent and Received run on the message path, under
// library locks: they must be quick, must not block and must not call
// back into this package. A protocol that keeps totals of its own may
// implement SeedCounts(sentTo, recvdFrom []uint64): it is given the
// library's per-peer totals (restored ones after a restart) before it is
// installed, so its counts and the library's agree. Install it before
// traffic starts (InitWith does) or at a quiet point.
func (p *Proc) SetCRCP(m crcp.Module) {
	if m == nil {
		p.hook.Store(nil)
		return
	}
	if s, ok := m.(interface {
		SeedCounts(sentTo, recvdFrom []uint64)
	}); ok {
		s.SeedCounts(p.Counts())
	}
	p.hook.Store(&hookBox{m: m})
}

// CRCP returns the installed coordination protocol, nil when none is (C/R
// off: the message path is not watched).
func (p *Proc) CRCP() crcp.Module {
	if hb := p.hook.Load(); hb != nil {
		return hb.m
	}
	return nil
}

// MarkFailed is how the runtime reports a lost process (a daemon saw it
// die): operations waiting on it fail with ErrProcFailed, as they do when
// its connection breaks.
//
// In a replicated job the runtime's ranks are processes (replica.go): rank
// is the lost process's index, and the loss of a copy whose rank has
// another is repaired without the application hearing of it.
func (p *Proc) MarkFailed(rank int, cause error) {
	if rank < 0 || rank >= p.physN || rank == p.phys {
		return
	}
	if cause == nil {
		cause = errors.New("reported lost by the runtime")
	}
	if p.rep != nil {
		p.rep.lost(rank, cause)
		return
	}
	p.failPeer(rank, cause)
}

// linkFailed handles a connection's failure (a write or a read that
// broke): the peer failed, or in a replicated job one of its copies.
func (p *Proc) linkFailed(pe *peer, err error) {
	if p.rep != nil {
		p.rep.lost(pe.phys, err)
		return
	}
	p.failPeer(pe.rank, err)
}

// link returns the connection state of process phys: its rank's peer, or
// in a replicated job the link of that copy.
func (p *Proc) link(phys int) *peer {
	if p.rep != nil {
		return p.rep.links[phys]
	}
	return p.peers[phys]
}

func (p *Proc) stop(err error) {
	p.stopOnce.Do(func() {
		p.stopErrV = err
		close(p.done)
	})
}

func (p *Proc) stopErr() error {
	<-p.done
	return p.stopErrV
}

func (p *Proc) isStopped() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// --- sending ---------------------------------------------------------------

// send is the one way out for every message: user point-to-point,
// collectives and the library's control traffic. Blocking sends (req nil)
// return once the message is handed to the transport.
func (p *Proc) send(cs *ctxState, dst, tag int, data []byte, req *Request) error {
	if cs.ctx>>1 != ctxControl>>1 {
		// A suspension's own exchange travels on the control context:
		// everything else waits while it runs.
		if err := p.enter(); err != nil {
			return err
		}
		defer p.leave()
	}
	if cs.revoked.Load() {
		return revokedErr(cs.ctx)
	}
	pe := p.peers[dst]
	if p.rep != nil && dst != p.rank {
		return p.rep.send(pe, cs, dst, tag, data, req)
	}
	if err := pe.goneOrFailed(); err != nil {
		return err
	}
	if p.isStopped() {
		return p.stopErr()
	}
	pe.mu.Lock()
	cs.sendSeq[dst]++
	seq := cs.sendSeq[dst]
	if pe.writing || (req != nil && len(data) > inlineMax) {
		op := &sendOp{kind: kindData, ctx: cs.ctx, tag: tag, seq: seq, data: data, req: req}
		if req == nil {
			op.wake = make(chan error, 1)
		}
		p.enqueueLocked(pe, op)
		if req != nil {
			return nil
		}
		select {
		case err := <-op.wake:
			return err
		case <-p.done:
			return p.stopErr()
		}
	}
	pe.writing = true
	pe.mu.Unlock()
	err := p.transmit(pe, kindData, cs.ctx, tag, seq, data)
	p.release(pe, err)
	if req != nil {
		req.complete(Status{}, err)
	}
	return err
}

// enqueueLocked queues op behind the token holder, starting a writer if
// nobody holds the token. It unlocks pe.mu.
func (p *Proc) enqueueLocked(pe *peer, op *sendOp) {
	pe.queue = append(pe.queue, op)
	start := !pe.writing
	pe.writing = true
	pe.mu.Unlock()
	if start {
		go p.writer(pe)
	}
}

// idleLocked gives the writer token back; the caller holds pe.mu. A
// connection dropOut closed under the holder is forgotten now, when
// nobody can be writing on it.
func (pe *peer) idleLocked() {
	pe.writing = false
	if pe.dropIdle {
		pe.out, pe.dropIdle = nil, false
	}
}

// release gives up the writer token, handing it to a writer goroutine when
// sends queued up meanwhile.
func (p *Proc) release(pe *peer, err error) {
	if err != nil {
		p.linkFailed(pe, err)
	}
	pe.mu.Lock()
	if len(pe.queue) > 0 {
		pe.mu.Unlock()
		go p.writer(pe)
		return
	}
	pe.idleLocked()
	pe.mu.Unlock()
}

func (p *Proc) writer(pe *peer) {
	pe.mu.Lock()
	for len(pe.queue) > 0 {
		op := pe.queue[0]
		pe.queue[0] = nil
		pe.queue = pe.queue[1:]
		pe.mu.Unlock()
		err := p.transmit(pe, op.kind, op.ctx, op.tag, op.seq, op.data)
		if err != nil {
			p.linkFailed(pe, err)
		}
		pe.mu.Lock()
		if len(pe.queue) == 0 {
			// Give the token back before the last operation completes, so
			// whoever it wakes finds the peer idle (SaveState at a safe
			// point right after a Wait must not see a send in progress).
			pe.idleLocked()
			pe.mu.Unlock()
			op.finish(err)
			return
		}
		pe.mu.Unlock()
		op.finish(err)
		pe.mu.Lock()
	}
	pe.idleLocked()
	pe.mu.Unlock()
}

// transmit writes one frame; the caller holds pe's writer token.
func (p *Proc) transmit(pe *peer, kind uint8, ctx uint64, tag int, seq uint64, data []byte) error {
	if err := pe.failure(); err != nil {
		return err
	}
	h := header{kind: kind, src: int32(p.rank), ctx: ctx, tag: int64(tag), seq: seq}
	if pe.phys == p.phys {
		if kind != kindData {
			return nil
		}
		p.sent(pe, &h, len(data))
		return p.deliver(pe, &h, data, nil, false)
	}
	if pe.out == nil {
		if kind == kindBye {
			return nil // never connected: nothing to say goodbye on
		}
		c, err := p.dial(pe)
		if err != nil {
			return &ProcFailedError{Rank: pe.rank, Cause: err}
		}
		pe.mu.Lock()
		if e := pe.failErr.Load(); e != nil {
			// Reported failed while dialing: failPeer found no connection
			// to close, so this one must not stay open.
			pe.mu.Unlock()
			c.Close()
			return e
		}
		if p.rb.active.Load() {
			// A rollback began while dialing: its disconnect did not see
			// this connection, which belongs to the old epoch.
			pe.mu.Unlock()
			c.Close()
			return p.rolledBackErr()
		}
		pe.out = c
		pe.mu.Unlock()
	}
	if kind == kindData {
		p.sent(pe, &h, len(data))
	}
	h.put(pe.hdr[:])
	if err := pe.out.WriteFrame(pe.hdr[:], data); err != nil {
		return &ProcFailedError{Rank: pe.rank, Cause: fmt.Errorf("send: %w", err)}
	}
	if kind == kindFlag || (kind == kindData && ctx>>1 == ctxControl>>1) {
		p.ctlFrames.Add(1)
	}
	if kind == kindBye {
		pe.out.Close()
	}
	return nil
}

// sent is the interposition point for outgoing messages.
func (p *Proc) sent(pe *peer, h *header, size int) {
	if h.ctx>>1 == ctxControl>>1 {
		return
	}
	pe.sent.Add(1)
	if hb := p.hook.Load(); hb != nil {
		// Channels are between processes: in a replicated job the
		// protocol counts per process (Channels gives it their indices).
		hb.m.Sent(crcp.Envelope{Context: h.ctx, Src: p.phys, Dst: pe.phys, Tag: int(h.tag), Seq: h.seq, Size: size})
	}
}

// received is the interposition point for incoming messages: called once
// per message fully taken off the transport, before anyone can see it;
// from is the connection's peer (the sender's process).
func (p *Proc) received(from *peer, h *header, size int) {
	if h.ctx>>1 == ctxControl>>1 {
		return
	}
	// The protocol counts first: a drain that sees the library's count
	// reach its total may rely on the protocol having counted too.
	if hb := p.hook.Load(); hb != nil {
		hb.m.Received(crcp.Envelope{Context: h.ctx, Src: from.phys, Dst: p.phys, Tag: int(h.tag), Seq: h.seq, Size: size})
	}
	from.recvd.Add(1)
	if p.nDrains.Load() > 0 {
		p.checkDrains(from.phys)
	}
}

func (p *Proc) dial(pe *peer) (btl.Conn, error) {
	if p.rep != nil {
		// The physical layer may answer a process before Init has
		// learnt its address (replica.go).
		if err := p.rep.connected(); err != nil {
			return nil, err
		}
	}
	ctx, cancel := p.helloCtx()
	defer cancel()
	c, err := pe.mod.Dial(ctx, pe.self, pe.ep)
	if err != nil {
		return nil, err
	}
	if pc, ok := c.(btl.Poller); ok {
		pc.SetPoll(p.pollOK.Load, p.someoneWaits)
	}
	if err := p.dialHello(ctx, c, pe.phys); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// --- receiving -------------------------------------------------------------

func (p *Proc) accept(c btl.Conn) {
	p.inMu.Lock()
	if p.inClosed {
		p.inMu.Unlock()
		c.Close()
		return
	}
	p.readers.Add(1)
	p.pending[c] = struct{}{}
	p.inMu.Unlock()
	if pc, ok := c.(btl.Poller); ok {
		pc.SetPoll(p.pollOK.Load, p.someoneWaits)
	}
	go p.read(c)
}

// read is the reader goroutine of one accepted connection: it takes every
// frame off the transport as soon as it arrives, so a sender never waits
// for the receiver's application to make progress.
func (p *Proc) read(c btl.Conn) {
	defer p.readers.Done()
	hb := make([]byte, btl.MaxHeader)
	src, err := p.hello(c, hb)
	p.inMu.Lock()
	delete(p.pending, c)
	p.inMu.Unlock()
	if err != nil {
		if !p.finalizing.Load() && !p.isStopped() && !p.susp.closing.Load() {
			p.refusals.Log(p.log, peerAddr(c), err)
		}
		c.Close()
		return
	}
	// src is the process's index (its rank, but in a replicated job),
	// from now on its rank.
	pe := p.link(src)
	phys, src := src, pe.rank
	var h header // the last frame's, when the connection ends
	for {
		hn, pn, err := c.ReadHeader(hb)
		if err == nil {
			if h, err = parseHeader(hb[:hn]); err == nil {
				switch {
				case int(h.src) != src:
					err = fmt.Errorf("frame claims rank %d on the connection of rank %d", h.src, src)
				case h.kind == kindData:
					err = p.readData(c, pe, &h, pn)
				case h.kind == kindRep && p.rep != nil:
					err = p.rep.frame(c, pe, &h, pn)
				case h.kind == kindBye && pn == 0:
					p.byeFrom(pe)
				case h.kind == kindFlag && pn == 0:
					p.flagged(src, h.tag)
				case h.kind == kindRevoke && pn == 0:
					err = p.revokeNotice(src, h.ctx)
				default:
					err = fmt.Errorf("unexpected frame kind %d", h.kind)
				}
			}
			if err == nil {
				continue
			}
		}
		c.Close()
		if errors.Is(err, io.EOF) && pe.gone.Load() != nil {
			return
		}
		if p.isStopped() || p.quietEnd(phys, c, &h) {
			return
		}
		if p.retired(phys, c) {
			p.log.Debug("connection closed by a migration", "peer", phys, "err", err)
			return
		}
		p.linkFailed(pe, fmt.Errorf("receive: %w", err))
		return
	}
}

func (p *Proc) readData(c btl.Conn, from *peer, h *header, n int) error {
	src := from.rank
	if n >= directMin {
		p.mu.Lock()
		cs := p.ctxStateLocked(h.ctx)
		if err := cs.checkSeq(src, h.seq); err != nil {
			p.mu.Unlock()
			return p.dropDuplicate(c, from, h, n, err)
		}
		r := cs.takePosted(src, int(h.tag))
		p.mu.Unlock()
		if r == nil {
			m := getMsg(n)
			if err := c.ReadPayload(m.data); err != nil {
				putMsg(m)
				return err
			}
			return p.deliver(from, h, m.data, m, true)
		}
		// Matched before the payload arrived: read it straight into the
		// receiver's buffer.
		k := min(n, len(r.buf))
		err := c.ReadPayload(r.buf[:k])
		if err == nil {
			err = c.Discard(n - k)
		}
		if err != nil {
			r.complete(Status{}, &ProcFailedError{Rank: src, Cause: fmt.Errorf("receive: %w", err)})
			return err
		}
		p.received(from, h, n)
		// A synchronous send waits for the ack as fillRecv sends it.
		tag := int(h.tag)
		if plain := r.cs.plainTag(tag); plain != tag {
			r.comm.matchedSync(src, tag)
			tag = plain
		}
		st := Status{Source: r.comm.commRank(src), Tag: tag, Count: n}
		var terr error
		if k < n {
			terr = fmt.Errorf("mpi: receive from rank %d tag %d: %w: %d-byte message into a %d-byte buffer", st.Source, tag, ErrTruncate, n, len(r.buf))
		}
		if r.anyN != 0 {
			p.rep.anyMatched(r, src, st, terr)
			return nil
		}
		r.complete(st, terr)
		runtime.Gosched()
		return nil
	}
	m := getMsg(n)
	if err := c.ReadPayload(m.data); err != nil {
		putMsg(m)
		return err
	}
	return p.deliver(from, h, m.data, m, false)
}

// --- failures and shutdown ---------------------------------------------------

// failPeer records that rank failed, closes its connections and fails
// everything waiting on it.
func (p *Proc) failPeer(rank int, cause error) {
	if rank == p.rank {
		return
	}
	var pf *ProcFailedError
	if errors.As(cause, &pf) && pf.Rank == rank && pf.Cause != nil {
		cause = pf.Cause
	}
	pe := p.peers[rank]
	e := &ProcFailedError{Rank: rank, Cause: cause}
	if !pe.failErr.CompareAndSwap(nil, e) {
		return
	}
	p.nFailed.Add(1)
	p.fails.add(rank)
	// During a rollback every rank closes its connections: not a failure
	// the application hears of (Restore forgets it).
	rolling := p.rb.active.Load()
	if !rolling {
		p.publishFailure(e)
	}
	if !p.finalizing.Load() && !p.isStopped() && !rolling {
		p.log.Warn("peer failed", "peer", rank, "err", cause)
	}
	pe.mu.Lock()
	q := pe.queue
	pe.queue = nil
	out := pe.out
	pe.mu.Unlock()
	if out != nil {
		out.Close()
	}
	for _, op := range q {
		op.finish(e)
	}
	if p.rep == nil {
		// (A replicated rank's links were closed as its copies were lost.)
		p.inMu.Lock()
		in := p.inFrom[rank]
		p.inMu.Unlock()
		if in != nil {
			in.Close()
		}
	}
	p.mu.Lock()
	reqs := p.failPostedLocked(rank, e)
	p.mu.Unlock()
	for _, r := range reqs {
		r.complete(Status{}, e)
	}
	p.failDrains(rank)
	p.wakeFlags()
	p.failWake.wake()
	p.forwardRevokes(rank)
}

var errFinalized = errors.New("it finalized")

// byeFrom handles a goodbye on the connection from pe. In a replicated job
// a rank is gone only once the copy this process receives from said
// goodbye (replica.go).
func (p *Proc) byeFrom(pe *peer) {
	if p.rep == nil {
		p.peerGone(pe.rank)
		return
	}
	p.rep.bye(pe)
}

// peerGone handles a peer's goodbye: everything it sent has arrived, so
// receives still waiting for it can never match.
func (p *Proc) peerGone(rank int) {
	e := &ProcFailedError{Rank: rank, Cause: errFinalized}
	p.peers[rank].gone.Store(e)
	p.mu.Lock()
	var reqs []*Request
	for _, cs := range p.ctxs {
		kept := cs.posted[:0]
		for _, r := range cs.posted {
			if r.src == rank {
				reqs = append(reqs, r)
			} else {
				kept = append(kept, r)
			}
		}
		clear(cs.posted[len(kept):])
		cs.posted = kept
	}
	p.mu.Unlock()
	for _, r := range reqs {
		r.complete(Status{}, e)
	}
}

// Finalize ends the Proc: a barrier on the world (so no rank leaves while
// others still talk to it), a goodbye on every connection, and the
// transports closed once every peer said goodbye too.
func (p *Proc) Finalize() error {
	if !p.finalizing.CompareAndSwap(false, true) {
		return fmt.Errorf("mpi: finalize: %w: already finalized", ErrStopped)
	}
	p.finalizeApp()
	var errs []error
	if p.isStopped() {
		errs = append(errs, p.stopErr())
	} else if err := p.world.Barrier(); errors.Is(err, ErrProcFailed) || errors.Is(err, ErrRevoked) {
		// Ranks failed and the job ran on (errmgr sustain): finalizing is
		// still right, the runtime's finalize fence waits for the others.
		p.log.Debug("finalize: the world barrier met a failed rank", "err", err)
	} else if err != nil {
		errs = append(errs, fmt.Errorf("mpi: finalize: %w", err))
	}
	if p.rep != nil && !p.isStopped() {
		// Every process, not every rank: a copy that lags may still need
		// the others' logs (replica_repair.go).
		p.rep.leave()
	}
	for _, pe := range p.links() {
		if pe.phys != p.phys && pe.failure() == nil {
			p.bye(pe)
		}
	}
	p.inMu.Lock()
	p.inClosed = true
	p.inMu.Unlock()
	waited := make(chan struct{})
	go func() {
		p.readers.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(finalizeTimeout):
		p.log.Warn("finalize: peers did not say goodbye in time; closing their connections", "timeout", finalizeTimeout)
		p.closeIn()
		<-waited
	}
	p.closeModules()
	p.stop(fmt.Errorf("mpi: %w: finalized", ErrStopped))
	if p.stopCtx != nil {
		p.stopCtx()
	}
	// The runtime learns the rank ended on purpose (an exit without it is a
	// fault), and every rank has said goodbye before any leaves.
	if f, ok := p.boot.(interface{ Finalize(context.Context) error }); ok {
		ctx, cancel := context.WithTimeout(context.Background(), finalizeTimeout)
		if err := f.Finalize(ctx); err != nil {
			errs = append(errs, fmt.Errorf("mpi: finalize: %w", err))
		}
		cancel()
	}
	return errors.Join(errs...)
}

// bye sends the goodbye frame behind every queued send and waits for it.
func (p *Proc) bye(pe *peer) {
	pe.mu.Lock()
	if pe.out == nil && !pe.writing {
		pe.mu.Unlock()
		return
	}
	op := &sendOp{kind: kindBye, wake: make(chan error, 1)}
	p.enqueueLocked(pe, op)
	select {
	case <-op.wake:
	case <-p.done:
	}
}

func (p *Proc) closeIn() {
	p.inMu.Lock()
	p.inClosed = true
	conns := append([]btl.Conn(nil), p.inFrom...)
	for c := range p.pending {
		conns = append(conns, c)
	}
	p.inMu.Unlock()
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

// closeModules closes the transports and then every other module the
// rank selected (its set's one Close; closing twice is harmless).
func (p *Proc) closeModules() {
	for _, m := range p.mods {
		m.Close()
	}
	if p.modset != nil {
		if err := p.modset.Close(); err != nil {
			p.log.Warn("close the rank's modules", "err", err)
		}
	}
}

// shutdown drops every connection without goodbyes: peers see this
// process fail. Used when the Proc's context ends.
func (p *Proc) shutdown() {
	p.closeModules()
	p.closeIn()
	for _, pe := range p.links() {
		pe.mu.Lock()
		out := pe.out
		pe.mu.Unlock()
		if out != nil {
			out.Close()
		}
	}
}
