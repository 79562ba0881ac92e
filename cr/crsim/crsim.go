// Package crsim simulates a large job's checkpoints in one process, to
// measure how their coordination scales without a machine per node: N
// ranks (package mpitest, connected through memory by btl mem, no socket
// per pair) grouped onto simulated nodes, each node's daemon a goroutine
// running the real local SnapC coordinator (snapc full), gompirun's real
// global coordinator (snapc full) reaching the daemons through a
// modelled daemon tree (tree.go: routed radix, or flat), and the ranks'
// real application coordinators (package cr, crs self, crcp bkmrk) and
// channels (package mpi: bookmark exchange and agreements over the
// ranks' control tree). What is modelled is the runtime's transport: the
// daemons' connections are inboxes, and gompid's rank links are
// channels. The snapshots are real files under Config.Dir, committed as
// gompirun commits them, and a simulated job restarts from them.
//
// The ranks run a halo-exchange program (halo.go) whose result is known
// without MPI (Expected): a checkpointed, continued or restarted run must
// end with the same. Start runs the job to the step Config.HoldAt, where
// the ranks wait; each Checkpoint is then taken as gompi-checkpoint
// takes one (query, target, local write, sync, commit), the ranks
// stepping once to reach its safe point; Finish lets them run to the
// end. Restart runs a new simulated job from a committed sequence.
//
// It is test support and the engine of the scale figures (cr/crsim's
// tests, scripts/bench-scale.sh), not a runtime.
package crsim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"gompi/components/snapc/full"
	"gompi/components/sstore/central"
	"gompi/cr"
	"gompi/cr/crtest"
	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
	"gompi/mca/queue"
	"gompi/mpi"
	"gompi/mpi/mpitest"
	"gompi/mpi/mpitest/membtl"
)

// Config describes a simulated job.
type Config struct {
	Ranks int
	// PerNode is the number of ranks per simulated node (default 8).
	PerNode int
	// Radix is the daemon tree's (routed_radix, package rte/routed); 0,
	// or at least the node count, is flat: gompirun talks to every
	// daemon.
	Radix int
	// Dir holds the job's snapshot reference (required).
	Dir string
	// Cells per rank (default 4), Steps of the program (default 10), and
	// HoldAt, the step at whose top the ranks wait for checkpoints until
	// Finish (default Steps/2; each checkpoint moves them one step on).
	Cells, Steps, HoldAt int
	// Log receives the runtime's and the ranks' logs (nil: none).
	Log *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.PerNode <= 0 {
		c.PerNode = 8
	}
	if c.Cells <= 0 {
		c.Cells = 4
	}
	if c.Steps <= 0 {
		c.Steps = 10
	}
	if c.HoldAt <= 0 {
		c.HoldAt = max(1, c.Steps/2)
	}
	if c.Radix >= c.nodes() {
		c.Radix = 0
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) check() error {
	switch {
	case c.Ranks < 1:
		return fmt.Errorf("crsim: %d ranks", c.Ranks)
	case c.Dir == "":
		return errors.New("crsim: no snapshot folder (Config.Dir)")
	case c.HoldAt > c.Steps:
		return fmt.Errorf("crsim: hold at step %d of %d", c.HoldAt, c.Steps)
	}
	return nil
}

func (c Config) nodes() int { return (c.Ranks + c.PerNode - 1) / c.PerNode }

// nodeOf is the node of rank r; daemon vpid v runs node nodeName(v).
func (c Config) nodeOf(r int) string { return nodeName(1 + r/c.PerNode) }

func nodeName(vpid int) string { return fmt.Sprintf("n%04d", vpid) }

// Figures are what one checkpoint cost.
type Figures struct {
	Seq int
	// Query is the time from the request to every rank's answer to the
	// query (a round trip through the tree: nothing drained or written),
	// Coordination to every node's local snapshots written, Commit to
	// the sequence committed.
	Query, Coordination, Commit time.Duration
	// CPU is the processor time the whole simulation (every rank, daemon
	// and gompirun, sharing this machine's cores) spent from the request
	// to the ranks' return to their gate: what the checkpoint costs in
	// all, steadier than the times on a busy machine.
	CPU time.Duration
	// RankFrames are the frames the ranks' libraries wrote to each
	// other for it (bookmark exchange, agreements: mpi's control tree).
	RankFrames uint64
	// TreeMessages are the messages between gompirun and the daemons
	// (down the tree and up), AppMessages those between the daemons and
	// their ranks (requests and answers).
	TreeMessages, AppMessages uint64
	// Depth is the daemon tree's, Fanout the number of daemons gompirun
	// talks to, RankDepth the depth of the ranks' control tree.
	Depth, Fanout, RankDepth int
}

// Messages is every message of the checkpoint.
func (f Figures) Messages() uint64 { return f.RankFrames + f.TreeMessages + f.AppMessages }

// Sim is a running simulated job.
type Sim struct {
	j *job
}

// job is one run of the program over one simulated runtime.
type job struct {
	cfg     Config
	rt      *runtime
	procs   []*mpi.Proc
	digests []uint64
	hold    int           // the step the ranks wait at (0: none)
	gate    chan struct{} // closed by Finish
	arrived chan struct{} // a rank began to wait at the gate
	done    chan struct{} // the ranks have all ended; errs is set
	errs    []error
}

// Start starts a simulated job; it returns once every rank waits at
// step cfg.HoldAt.
func Start(ctx context.Context, cfg Config) (*Sim, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	j, err := startJob(cfg, cfg.HoldAt, nil)
	if err != nil {
		return nil, err
	}
	if err := j.awaitGate(ctx); err != nil {
		j.abandon()
		return nil, err
	}
	return &Sim{j: j}, nil
}

// Restart runs a new simulated job of cfg from sequence seq of the
// reference in cfg.Dir to the program's end and returns the ranks'
// digests.
func Restart(cfg Config, seq int) ([]uint64, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	j, err := startJob(cfg, 0, &seq)
	if err != nil {
		return nil, err
	}
	return j.end()
}

func startJob(cfg Config, hold int, from *int) (*job, error) {
	j := &job{cfg: cfg, procs: make([]*mpi.Proc, cfg.Ranks), digests: make([]uint64, cfg.Ranks), hold: hold,
		gate: make(chan struct{}), arrived: make(chan struct{}, cfg.Ranks), done: make(chan struct{})}
	rt, err := newRuntime(cfg, from)
	if err != nil {
		return nil, err
	}
	j.rt = rt
	nodes := make([]string, cfg.Ranks)
	for r := range nodes {
		nodes[r] = cfg.nodeOf(r)
	}
	mc := mpitest.Config{N: cfg.Ranks, BTL: membtl.Name, Nodes: nodes, Settings: slices.Clone(crtest.Settings),
		Register: func(_ int, set *frameworks.Set) { crtest.Register(set) }, Wrap: rt.wrap, Log: cfg.Log}
	// The job's goroutine: it ends when every rank has.
	go func() {
		defer close(j.done)
		j.errs = mpitest.Start(mc, j.rank)
	}()
	return j, nil
}

// rank is the body of every rank.
func (j *job) rank(p *mpi.Proc) error {
	j.procs[p.Rank()] = p
	c, err := cr.For(p, cr.WithTerminate(func() error { return nil }))
	if err != nil {
		return err
	}
	return j.halo(c)
}

// wait holds the rank at the top of step while the job holds there or
// beyond: until Finish, or a checkpoint wants the rank at its next safe
// point (cr.Coordinator.Requested).
func (j *job) wait(c *cr.Coordinator, step int) error {
	if j.hold == 0 || step < j.hold {
		return nil
	}
	select {
	case <-j.gate:
		return nil
	default:
	}
	j.arrived <- struct{}{}
	select {
	case <-j.gate:
	case <-c.Requested():
	case <-c.Proc().Done():
		return fmt.Errorf("crsim: rank %d stopped while held: %w", c.Proc().Rank(), mpi.ErrStopped)
	}
	return nil
}

// awaitGate waits until every rank waits at the gate (once more).
func (j *job) awaitGate(ctx context.Context) error {
	for range j.cfg.Ranks {
		select {
		case <-j.arrived:
		case <-j.done:
			return fmt.Errorf("crsim: the job ended before all its ranks reached step %d: %w", j.hold, errors.Join(j.errs...))
		case <-ctx.Done():
			return fmt.Errorf("crsim: waiting for the ranks at step %d: %w", j.hold, ctx.Err())
		}
	}
	return nil
}

// end waits for the ranks to finish, closes the runtime and returns the
// digests.
func (j *job) end() ([]uint64, error) {
	<-j.done
	j.rt.close()
	if err := errors.Join(j.errs...); err != nil {
		return nil, err
	}
	return j.digests, nil
}

// abandon lets the ranks go and waits for them, after a failure.
func (j *job) abandon() {
	j.open()
	j.end()
}

func (j *job) open() {
	select {
	case <-j.gate:
	default:
		close(j.gate)
	}
}

// Checkpoint takes a checkpoint of the job as gompi-checkpoint does and
// returns what it cost. The ranks, held, step once to its safe point and
// wait again.
func (s *Sim) Checkpoint(ctx context.Context) (Figures, error) {
	j := s.j
	d := j.rt.d
	frames0 := j.frames()
	down0, up0, app0 := d.down.Load(), d.up.Load(), d.app.Load()
	f := Figures{Depth: d.topo.maxDepth(), Fanout: d.topo.children(0), RankDepth: mpi.TreeDepth(j.cfg.Ranks)}
	nodes := j.cfg.nodes()
	written := 0
	cpu0 := cpuTime()
	start := time.Now()
	res, err := d.global.Checkpoint(ctx, snapc.Request{}, func(e snapc.Event) {
		switch e.Phase {
		case snapc.PhaseQuery:
			f.Query = time.Since(start)
		case snapc.PhaseLocalWrite:
			if written++; written == nodes {
				f.Coordination = time.Since(start)
			}
		}
	})
	if err != nil {
		return f, err
	}
	f.Commit, f.Seq = time.Since(start), res.Seq
	// The ranks' last agreement ends after their answers: counted once
	// they are all back at the gate.
	if err := j.awaitGate(ctx); err != nil {
		return f, err
	}
	f.CPU = cpuTime() - cpu0
	f.RankFrames = j.frames() - frames0
	f.TreeMessages = d.down.Load() - down0 + d.up.Load() - up0
	f.AppMessages = d.app.Load() - app0
	return f, nil
}

// cpuTime is the processor time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// frames is the control frames every rank has written so far.
func (j *job) frames() uint64 {
	var n uint64
	for _, p := range j.procs {
		n += p.ControlFrames()
	}
	return n
}

// Finish lets the ranks run to the program's end and returns their
// digests.
func (s *Sim) Finish() ([]uint64, error) {
	s.j.open()
	return s.j.end()
}

// Ref is the job's snapshot reference.
func (s *Sim) Ref() snapshot.Ref { return s.j.rt.ref }

// runtime is the simulated gompirun and daemons of one job.
type runtime struct {
	cfg   Config
	ref   snapshot.Ref
	d     *daemons
	links []*rankLink
}

// values are the runtime's parameters: C/R on, snapc full, sstore
// central, resolved against those two components.
func values() (*mca.Values, mca.Component[snapc.Module], sstore.Module, error) {
	params := mca.NewParams()
	sc := full.New()
	mca.NewFramework[snapc.Module](params, snapc.Name, "crsim", mca.WithParams(snapc.FrameworkParams()...)).Register(sc)
	sf := mca.NewFramework[sstore.Module](params, sstore.Name, "crsim", mca.WithParams(sstore.FrameworkParams()...))
	sf.Register(central.New())
	vals, err := params.ResolveSettings(crtest.Settings)
	if err != nil {
		return nil, nil, nil, err
	}
	store, err := sf.SelectOne(context.Background(), vals, mca.RoleDaemon, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	return vals, sc, store.Module, nil
}

func newRuntime(cfg Config, from *int) (*runtime, error) {
	vals, sc, store, err := values()
	if err != nil {
		return nil, fmt.Errorf("crsim: %w", err)
	}
	mod, _, err := sc.Query(context.Background(), mca.Query{Values: vals, Role: mca.RoleHNP, Priority: full.Priority})
	if err != nil {
		return nil, fmt.Errorf("crsim: %w", err)
	}
	coord := mod.(snapc.Coordinator)
	nodes := cfg.nodes()
	rt := &runtime{cfg: cfg, ref: snapshot.Ref{Dir: cfg.Dir, Name: snapshot.RefName("crsim")}}
	d := &daemons{topo: newTopo(nodes, cfg.Radix), byNode: map[string]int{}}
	rt.d = d
	rankNodes := make([]string, cfg.Ranks)
	nodeRanks := make([][]int, nodes+1)
	for r := range rankNodes {
		rankNodes[r] = cfg.nodeOf(r)
		v := 1 + r/cfg.PerNode
		nodeRanks[v] = append(nodeRanks[v], r)
	}
	for r := range cfg.Ranks {
		l := &rankLink{rt: rt, rank: r, reqs: make(chan snapc.AppRequest, 64)}
		if from != nil {
			l.restart = &snapc.RestartInfo{Ref: rt.ref, Seq: *from, Dir: rt.ref.LocalPath(*from, r)}
		}
		rt.links = append(rt.links, l)
	}
	for v := range nodes + 1 {
		x := &vpid{id: v, inbox: queue.New[msg]()}
		if v > 0 {
			d.byNode[nodeName(v)] = v
			loc, err := coord.NewLocal(snapc.NodeSpec{Node: nodeName(v), Ranks: nodeRanks[v], Store: store,
				Notify: func(r snapc.LocalReply) { d.reply(v, r) }, Values: vals, Log: cfg.Log}, port{rt, v})
			if err != nil {
				return nil, fmt.Errorf("crsim: %w", err)
			}
			x.local = loc
		}
		d.vpids = append(d.vpids, x)
	}
	// The program recorded is this one: a simulated job restarts only
	// through Restart, never through gompi-restart.
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("crsim: %w", err)
	}
	g, err := coord.NewGlobal(snapc.JobSpec{Job: "crsim", RankNodes: rankNodes, Ref: rt.ref, Settings: vals.Changed(),
		Launch: crs.Launch{Argv: []string{exe}, Dir: "/"}, Values: vals, Log: cfg.Log}, d)
	if err != nil {
		return nil, fmt.Errorf("crsim: %w", err)
	}
	d.global = g
	for _, x := range d.vpids {
		d.wg.Add(1)
		go d.loop(x)
	}
	return rt, nil
}

func (rt *runtime) close() {
	rt.d.global.Close(errors.New("crsim: the job is over"))
	rt.d.close()
}

// wrap links rank's bootstrap to its node's daemon.
func (rt *runtime) wrap(rank int, b mpi.Bootstrap) mpi.Bootstrap {
	return &rankBoot{Bootstrap: b, rankLink: rt.links[rank]}
}

// port is a daemon's way to its ranks (snapc.AppPort).
type port struct {
	rt   *runtime
	vpid int
}

func (p port) Send(rank int, req snapc.AppRequest) error {
	p.rt.d.app.Add(1)
	if !p.rt.links[rank].send(req) {
		return fmt.Errorf("rank %d: %w", rank, snapc.ErrNoApp)
	}
	return nil
}

// rankLink is a rank's snapc.AppLink: requests from its daemon, answers
// to it.
type rankLink struct {
	rt      *runtime
	rank    int
	restart *snapc.RestartInfo
	mu      sync.Mutex
	reqs    chan snapc.AppRequest
	closed  bool
}

func (l *rankLink) Requests() <-chan snapc.AppRequest { return l.reqs }

func (l *rankLink) Reply(_ context.Context, r snapc.AppReply) error {
	d := l.rt.d
	d.app.Add(1)
	d.send(1+l.rank/l.rt.cfg.PerNode, msg{kind: msgAppReply, rank: l.rank, app: r})
	return nil
}

func (l *rankLink) Checkpoint(ctx context.Context, target uint64, opts crs.Options) (snapc.Result, error) {
	return l.rt.d.global.AppCheckpoint(ctx, l.rank, target, opts)
}

func (l *rankLink) Restart() (snapc.RestartInfo, bool) {
	if l.restart == nil {
		return snapc.RestartInfo{}, false
	}
	return *l.restart, true
}

func (l *rankLink) send(r snapc.AppRequest) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.reqs <- r
	return true
}

// close ends the link when the rank finalizes, as the rank client does,
// and tells its daemon.
func (l *rankLink) close() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.reqs)
	}
	l.mu.Unlock()
	l.rt.d.send(1+l.rank/l.rt.cfg.PerNode, msg{kind: msgAppGone, rank: l.rank, why: "it finalized"})
}

type rankBoot struct {
	mpi.Bootstrap
	*rankLink
}

// Finalize closes the rank's link after the wrapped bootstrap's own
// Finalize, if it has one.
func (b *rankBoot) Finalize(ctx context.Context) error {
	var err error
	if f, ok := b.Bootstrap.(interface{ Finalize(context.Context) error }); ok {
		err = f.Finalize(ctx)
	}
	b.rankLink.close()
	return err
}

var (
	_ snapc.AppLink  = (*rankLink)(nil)
	_ snapc.AppPort  = port{}
	_ snapc.NodeLink = (*daemons)(nil)
)
