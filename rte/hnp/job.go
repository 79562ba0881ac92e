package hnp

import (
	"context"
	"errors"
	"fmt"
	"gompi/boot"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"gompi/frameworks/errmgr"
	"gompi/frameworks/plm"
	"gompi/frameworks/plm/proc"
	"gompi/mca"
	"gompi/rte"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
	"gompi/rte/mapping"
	"gompi/rte/routed"
)

// finishBound bounds how long daemons have to leave after Shutdown.
const finishBound = 15 * time.Second

// job is one running job: an actor, the goroutine in run, which owns
// everything but the fields marked otherwise. gRPC handlers and helpers
// talk to it with events (events.go), so the job's state needs no locks;
// what it does to the world goes through its daemons' mailboxes, their
// launch processes and its ports (ports.go). This file is its core life:
// launch, run, abort, finish, faults, fences, signals, heartbeats. The
// episodes it may go through meanwhile (a recovery, a migration, a
// checkpoint-and-terminate) live in files of their own, and how they meet
// faults, exits, lost nodes and aborts is said once, in episode.go.
type job struct {
	id         string
	o          Options
	m          mapping.Map
	program    string
	cwd        string
	mods       *boot.HNP // gompirun's selected modules (boot.AssembleHNP)
	p          ports
	vals       *mca.Values
	log, elog  *slog.Logger
	start      time.Time
	settings   []*pb.Setting
	hbPeriod   time.Duration
	hbTimeout  time.Duration
	killGrace  time.Duration
	launchWait time.Duration
	// dataSecret is the data-plane secret of this launch generation: new
	// for each job struct (the first launch, each recovery), sent in every
	// Launch (a migration's too), never logged or written down.
	dataSecret control.Secret

	events chan event
	done   chan struct{} // closed when run returns
	outMu  sync.Mutex    // serializes writes of the ranks' output (used by handlers)

	state         jobState
	daemons       map[string]*dconn
	ranks         []*rankProc
	fences        map[uint64]map[int32]*pb.RankData
	fenceDone     uint64 // the last fence completed (fences complete in order)
	pendingFaults int
	faultSeq      int
	openFaults    []openFault // faults not run through, oldest first
	exitCode      int
	exitSet       bool
	err           error
	interrupted   bool
	stopped       bool                      // a checkpoint --stop left every rank stopped; SIGCONT clears it
	timers        [nTimers]<-chan time.Time // armed ones; see timerKind

	// The episodes under way (episode.go), nil when none. recovery is
	// set once the job is ending its ranks for a recovery (errmgr autor);
	// Run then starts the job again.
	recovery  *recovery
	migration *migration
	term      *termination
	rollback  *rollbackEp // an in-job rollback (rollback.go)
	rollbacks int         // rollbacks of this run, the last one's epoch
	// recoveries counts the recoveries before this run; recoveredFrom is
	// the last one, reported once the ranks run again.
	recoveries    int
	recoveredFrom *recovery
	// computing is the last recovery until the new run's modex completes:
	// every rank then computes again (reported, as a rollback's end is).
	computing    *recovery
	finishKilled bool
	lastTick     time.Time

	// Migration (migrate.go): the old nodes of moved ranks whose old
	// process has not ended yet, every rank's modex entry (the first
	// fence's, updated by rejoins), the last one finished.
	movedFrom map[int]string
	endpoints map[int32]map[string]string
	lastMig   *migRecord
	// faultDone gets the outcome of faults someone waits for (Tool.Migrate).
	faultDone map[int]chan evFault

	// The daemon tree (tree.go): its launch shape, the number of the last
	// message sent down, and the daemons waiting to learn where to attach.
	tree    routed.Tree
	downSeq uint64
	locates map[string][]evLocate
	// sentLog holds what was sent down and not yet acknowledged by every
	// daemon, to send again to a subtree that lost its parent.
	sentLog []*pb.HNPMessage
	// attachedAt is when every daemon had attached, modexAt when the
	// first fence completed (routed_stats reports them).
	attachedAt, modexAt time.Time
}

// dconn is one daemon as the HNP sees it.
type dconn struct {
	node     string
	launch   plm.Daemon
	box      *mailbox // nil until attached
	pid      int
	hostname string
	state    daemonState
	ranks    []int
	exited   bool // its launch process ended
	killed   bool // the HNP terminated its launch process

	// Its place in the daemon tree (tree.go): the daemon gompirun's link
	// to it goes through (itself when linked to gompirun), its parent
	// ("" = gompirun), where it serves its children, the count of its
	// link's traffic (kept by gompirun for its own links, reported by the
	// parent for others).
	via      string
	parent   string
	contacts []string
	pin      []byte
	link     *routed.Counter
	stats    *pb.LinkStats
	ack      atomic.Uint64 // its link's last acknowledgement (its heartbeat)
	orphaned time.Time     // when its route was lost with an ancestor; zero: not

	lastSeen atomic.Int64 // unix nanos of the last message; set by its handler
	busy     atomic.Bool  // its handler is blocked printing output
}

type rankProc struct {
	rank  int
	node  string
	pid   int
	state rankState
	code  int
	sig   int
	done  bool
	// failed: declared failed while the job runs on (errmgr.Runtime's
	// NotifyFailed): fences complete without it.
	failed bool
}

// Events.
type (
	// evAttach: a daemon's hello, on its own stream to gompirun or
	// relayed by its parent (via names gompirun's link it came on).
	evAttach struct {
		hello *pb.DaemonHello
		box   *mailbox
		via   string
		link  *routed.Counter
		reply chan *dconn
	}
	evMsg struct {
		node string
		m    *pb.DaemonMessage
	}
	evStreamEnd struct {
		node   string
		err    error
		detail string // what broke, when not gompirun's own link
	}
	evLaunchExit struct {
		node string
		err  error
	}
	evFault struct {
		id  int
		f   errmgr.Fault
		d   errmgr.Decision
		st  errmgr.Status
		mig *migRecord // a prediction the stack recovered from: the migration done
	}
	evNotifyFailed struct {
		ranks []int
		why   string
		reply chan error
	}
	evRanksOf struct {
		node  string
		reply chan []int
	}
	evStatus struct{ reply chan *pb.StatusResponse }
	evBroken struct {
		node   string
		detail string
	}
)

// streamEndGrace is how long a daemon whose stream broke has for its
// process's exit to be seen, before the node is declared lost anyway.
const streamEndGrace = 2 * time.Second

func newJob(id string, data control.Secret, o Options, m mapping.Map, program, cwd string, mods *boot.HNP, p ports, elog, log *slog.Logger) *job {
	vals := o.Proc.Values
	j := &job{
		id: id, dataSecret: data, o: o, m: m, program: program, cwd: cwd, mods: mods, p: p, vals: vals,
		log: log, elog: elog, start: p.now(),
		settings:   control.SettingsToProto(mods.JobSettings(vals)),
		hbPeriod:   vals.Duration(plm.ParamHBPeriod),
		hbTimeout:  vals.Duration(plm.ParamHBTimeout),
		killGrace:  vals.Duration(plm.ParamKillGrace),
		launchWait: vals.Duration(plm.ParamLaunchTimeout),
		events:     make(chan event),
		done:       make(chan struct{}),
		state:      jobLaunching,
		daemons:    map[string]*dconn{},
		fences:     map[uint64]map[int32]*pb.RankData{},
		movedFrom:  map[int]string{},
		endpoints:  map[int32]map[string]string{},
		faultDone:  map[int]chan evFault{},
		tree:       routed.New(m.Nodes, vals.Int(plm.ParamRadix)),
		locates:    map[string][]evLocate{},
	}
	for _, n := range m.Nodes {
		j.daemons[n] = &dconn{node: n, state: daemonStarting, ranks: m.Ranks(n)}
	}
	for r, n := range m.RankNode {
		j.ranks = append(j.ranks, &rankProc{rank: r, node: n, state: rankPending})
	}
	return j
}

// send delivers an event to the job; false once the job is over.
func (j *job) send(e event) bool {
	select {
	case j.events <- e:
		return true
	case <-j.done:
		return false
	}
}

// run is the job's actor: it takes events, signals and timers one at a
// time until the job is done, and returns its exit status.
func (j *job) run(daemons []plm.Daemon) (int, error) {
	defer close(j.done)
	for _, d := range daemons {
		j.daemons[d.Node()].launch = d
		j.spawn(func() event { return evLaunchExit{node: d.Node(), err: d.Wait()} })
	}
	j.arm(timerLaunch, j.launchWait)
	var hb <-chan time.Time
	if j.hbPeriod > 0 {
		t := time.NewTicker(j.hbPeriod)
		defer t.Stop()
		hb = t.C
	}
	for j.state != jobDone {
		select {
		case e := <-j.events:
			j.handle(e)
		case s := <-j.o.Signals:
			j.signal(s)
		case <-hb:
			j.heartbeat()
		case <-j.timers[timerLaunch]:
			j.timerFired(timerLaunch)
		case <-j.timers[timerAbort]:
			j.timerFired(timerAbort)
		case <-j.timers[timerKill]:
			j.timerFired(timerKill)
		case <-j.timers[timerTerm]:
			j.timerFired(timerTerm)
		case <-j.timers[timerFinish]:
			j.timerFired(timerFinish)
		}
		j.progress()
	}
	return j.exitCode, j.err
}

// step is one turn of the actor for an event (run's, and the tests').
func (j *job) step(e event) {
	j.handle(e)
	j.progress()
}

// timerFired handles the firing of timer k, which it disarms.
func (j *job) timerFired(k timerKind) {
	j.timers[k] = nil
	switch k {
	case timerLaunch:
		if j.state == jobLaunching {
			var late []string
			for _, n := range j.m.Nodes {
				if j.daemons[n].box == nil {
					late = append(late, n)
				}
			}
			j.fail(fmt.Errorf("the daemons of %v did not connect back within %v (%s): check that gompid runs on those nodes and can reach this machine",
				late, j.launchWait, plm.ParamLaunchTimeout))
		}
	case timerAbort:
		for _, r := range j.ranks {
			if !r.done {
				j.log.Error("rank did not report its end after being killed", "rank", r.rank, "node", r.node)
				r.done, r.state = true, rankLost
			}
		}
	case timerKill:
		j.sendAll(&pb.HNPMessage{Body: &pb.HNPMessage_Kill{Kill: &pb.KillRanks{}}})
	case timerTerm:
		if j.state == jobRunning {
			j.log.Warn("ranks did not end within a grace after a checkpoint-and-terminate; ending them", "grace", termGrace)
			j.sendAll(&pb.HNPMessage{Body: &pb.HNPMessage_Kill{Kill: &pb.KillRanks{}}})
		}
	case timerFinish:
		j.finishTimedOut()
	default:
		panic(fmt.Sprintf("hnp: no timer %d", k))
	}
}

// finishTimedOut terminates the daemons that did not leave within
// finishBound, and gives up on them after another.
func (j *job) finishTimedOut() {
	if j.finishKilled {
		j.log.Error("daemons did not end after SIGTERM; leaving them to their parent-death signal")
		j.state = jobDone
		return
	}
	j.finishKilled = true
	for _, d := range j.daemons {
		if !d.exited && d.launch != nil {
			j.log.Warn("daemon did not leave; terminating it", "node", d.node)
			d.killed = true
			_ = d.launch.Kill()
		}
	}
	j.arm(timerFinish, finishBound)
}

// progress moves the job on when the conditions of its next state hold.
func (j *job) progress() {
	switch j.state {
	case jobLaunching:
		for _, d := range j.daemons {
			if d.box == nil {
				return
			}
		}
		j.state, j.attachedAt = jobRunning, j.p.now()
		j.log.Debug("all daemons attached; launching ranks")
		for _, r := range j.ranks {
			r.state = rankRunning
		}
		var restart *pb.RestartSpec
		if r := j.o.Restart; r != nil {
			restart = &pb.RestartSpec{RefDir: r.Ref.Dir, RefName: r.Ref.Name, Seq: int32(r.Seq)}
		}
		// One launch for every daemon, sent once down each link of the
		// tree: each daemon starts the ranks rank_nodes places on its node.
		j.broadcast(&pb.HNPMessage{Body: &pb.HNPMessage_Launch{Launch: &pb.Launch{
			Program: j.program, Args: j.o.Args, Env: j.o.Env, Cwd: j.cwd,
			Size: int32(len(j.ranks)), RankNodes: j.m.RankNode, Restart: restart,
			DataSecret: j.dataSecret.Bytes(),
		}}})
		j.progress()
	case jobRunning, jobAborting:
		if j.pendingFaults > 0 || j.held() {
			return
		}
		for _, r := range j.ranks {
			if !r.done {
				return
			}
		}
		j.shutdown()
	case jobFinishing:
		for _, d := range j.daemons {
			if d.launch != nil && !d.exited {
				return
			}
		}
		j.state = jobDone
	}
}

// shutdown tells every daemon to leave.
func (j *job) shutdown() {
	j.closeSnapC("the job is over")
	j.state = jobFinishing
	j.timers[timerAbort], j.timers[timerKill] = nil, nil
	for _, d := range j.daemons {
		if d.box != nil && (d.state == daemonRunning || d.state == daemonStarting) {
			d.state = daemonLeaving
		} else if d.launch != nil && !d.exited && d.box == nil {
			d.killed = true
			_ = d.launch.Kill() // never attached
		}
	}
	// Down the tree: a daemon passes it on to its children and leaves
	// after them.
	j.broadcast(&pb.HNPMessage{Body: &pb.HNPMessage_Shutdown{Shutdown: &pb.Shutdown{}}})
	j.arm(timerFinish, finishBound)
}

// fail ends a job that could not start.
func (j *job) fail(err error) {
	if j.err == nil {
		j.err = err
		j.setExit(1)
	}
	for _, r := range j.ranks {
		if !r.done {
			r.done = true
		}
	}
	j.shutdown()
}

func (j *job) setExit(code int) {
	if !j.exitSet {
		j.exitCode, j.exitSet = code, true
	}
}

// sendAll sends m to every daemon, once down each link of the tree.
func (j *job) sendAll(m *pb.HNPMessage) { j.broadcast(m) }

// abort ends the job: it prints report (once), sets the exit status if
// none is set, and has every daemon kill its ranks.
func (j *job) abort(report string, code int) {
	if j.state != jobRunning {
		return
	}
	j.state = jobAborting
	j.aborting()
	j.closeSnapC("the job is being aborted")
	if report != "" {
		fmt.Fprintln(j.p.stderr, report)
	}
	j.setExit(code)
	j.sendAll(&pb.HNPMessage{Body: &pb.HNPMessage_Kill{Kill: &pb.KillRanks{}}})
	j.arm(timerAbort, j.killGrace+finishBound)
}

func (j *job) handle(e event) {
	switch e := e.(type) {
	case evAttach:
		e.reply <- j.attach(e)
	case evMsg:
		j.message(e.node, e.m)
	case evStreamEnd:
		j.streamEnd(e)
	case evBroken:
		if d := j.daemons[e.node]; d.state == daemonBreaking {
			j.nodeLost(d, e.detail)
		}
	case evLaunchExit:
		j.launchExit(e)
	case evFault:
		j.faultHandled(e)
	case evMigrate:
		j.startMigration(e)
	case evMigSaved:
		j.migSaved(e)
	case evNodes:
		e.reply <- j.nodes()
	case evPredict:
		j.predict(e)
	case evRecover:
		e.reply <- j.startRecovery(e)
	case evRollback:
		e.reply <- j.startRollback(e)
	case evRollbackView:
		e.reply <- j.rollbackView()
	case evNotifyFailed:
		e.reply <- j.notifyFailed(e.ranks, e.why)
	case evRanksOf:
		var out []int
		if d := j.daemons[e.node]; d != nil {
			out = slices.Clone(d.ranks)
		}
		e.reply <- out
	case evStatus:
		e.reply <- j.status()
	case evLocate:
		j.locate(e)
	case evTell:
		j.tellEvent(e)
	case evSnapcSend:
		j.snapcSend(e)
	case evRankCheckpoint:
		j.startRankCheckpoint(e)
	case evTerminate:
		j.terminate()
	case evStopped:
		j.stopped = true
	default:
		panic(unknownEvent(e))
	}
}

// streamEnd handles the end of a daemon's stream.
func (j *job) streamEnd(e evStreamEnd) {
	d := j.daemons[e.node]
	switch d.state {
	case daemonLeaving:
		d.state = daemonGone
	case daemonRunning, daemonStarting:
		detail := "its daemon's connection to gompirun broke"
		if e.detail != "" {
			detail = e.detail
		}
		if e.err != nil && status.Code(e.err) != codes.Canceled && !errors.Is(e.err, io.EOF) {
			detail += " (" + e.err.Error() + ")"
		}
		if d.exited || d.launch == nil {
			j.nodeLost(d, detail)
			return
		}
		// The daemon's process has most likely died too: give its exit
		// a moment to arrive, since it says how (status, signal, what
		// ssh printed), which the broken stream cannot.
		d.state = daemonBreaking
		j.orphan(d)
		j.p.later(streamEndGrace, evBroken{node: d.node, detail: detail}, j.send)
	}
}

// launchExit handles the end of a daemon's launch process.
func (j *job) launchExit(e evLaunchExit) {
	d := j.daemons[e.node]
	d.exited = true
	switch {
	case j.state == jobLaunching:
		if e.err == nil {
			e.err = fmt.Errorf("plm: node %s: the daemon ended before it connected back: %w", e.node, plm.ErrLaunch)
		}
		j.fail(fmt.Errorf("start the daemon of node %s: %w", e.node, e.err))
	case d.state == daemonRunning || d.state == daemonBreaking:
		detail := "its daemon exited with status 0 before the job ended"
		if e.err != nil {
			detail = e.err.Error()
		}
		j.nodeLost(d, detail)
	case e.err != nil && !d.killed:
		j.log.Warn("daemon ended badly", "node", d.node, "err", e.err)
	}
}

// faultHandled acts on the ErrMgr stack's decision about a fault.
func (j *job) faultHandled(e evFault) {
	j.pendingFaults--
	j.elog.Info("fault handled", "fault", e.f.Describe(), "decision", e.d, "actions", e.st.Actions)
	switch e.d {
	case errmgr.Abort:
		j.abort(e.st.Report, faultStatus(e.f))
	case errmgr.Recovered:
		j.ranThrough(e)
	}
	if c, ok := j.faultDone[e.id]; ok {
		delete(j.faultDone, e.id)
		if e.d == errmgr.Recovered {
			e.mig = j.lastMig
		}
		c <- e
	}
}

func (j *job) attach(e evAttach) *dconn {
	d, ok := j.daemons[e.hello.Node]
	if e.hello.Reattach {
		return j.reattach(e)
	}
	if !ok || d.box != nil || j.state != jobLaunching {
		j.log.Warn("refused a daemon", "node", e.hello.Node, "pid", e.hello.Pid, "state", j.state)
		return nil
	}
	d.box, d.pid, d.hostname, d.state = e.box, int(e.hello.Pid), e.hello.Hostname, daemonRunning
	d.via, d.parent, d.contacts, d.pin = e.via, e.hello.Parent, e.hello.Contacts, e.hello.Pin
	if d.direct() {
		d.link = e.link
	}
	j.located(d)
	d.lastSeen.Store(j.p.now().UnixNano())
	j.tell(d, &pb.HNPMessage{Body: &pb.HNPMessage_Welcome{Welcome: &pb.Welcome{Job: j.id, Settings: j.settings}}})
	j.log.Debug("daemon attached", "node", d.node, "pid", d.pid, "host", d.hostname)
	return d
}

func (j *job) message(node string, m *pb.DaemonMessage) {
	d := j.daemons[node]
	rank := func(r int32) *rankProc {
		if r < 0 || int(r) >= len(j.ranks) || j.ranks[r].node != node {
			j.log.Warn("daemon reported a rank it does not run", "node", node, "rank", r)
			return nil
		}
		return j.ranks[r]
	}
	switch b := m.Body.(type) {
	case *pb.DaemonMessage_Started:
		r := rank(b.Started.Rank)
		if r == nil {
			return
		}
		if b.Started.Error != "" {
			r.done, r.state = true, rankFailed
			if j.consult(func(ep episode) verdict { return ep.onExit(j, r, node, nil) })&isFault != 0 {
				j.fault(errmgr.Fault{Kind: errmgr.ProcExited, ExitCode: 1, Rank: r.rank, Node: node, Time: j.p.now(),
					Detail: "it could not be started on its new node: " + b.Started.Error})
				return
			}
			j.abort(fmt.Sprintf("gompirun: job aborted: rank %d on node %s could not be started: %s", r.rank, node, b.Started.Error), 1)
			return
		}
		r.pid = int(b.Started.Pid)
		j.restoredStarted(r, node)
	case *pb.DaemonMessage_Phase:
		if r := rank(b.Phase.Rank); r != nil && !r.done {
			switch b.Phase.Phase {
			case pb.Phase_PHASE_CONNECTED:
				r.state = rankConnected
				j.resumed()
			case pb.Phase_PHASE_FINALIZING:
				r.state = rankFinalizing
			}
		}
	case *pb.DaemonMessage_Exited:
		if rr := int(b.Exited.Rank); rr >= 0 && rr < len(j.ranks) && j.ranks[rr].node != node && j.oldExited(j.ranks[rr], node, b.Exited) {
			return
		}
		if r := rank(b.Exited.Rank); r != nil && !r.done {
			j.exited(r, b.Exited)
		}
	case *pb.DaemonMessage_Rejoin:
		j.rejoin(node, b.Rejoin)
	case *pb.DaemonMessage_RankMigrate:
		j.rankMigrate(d, b.RankMigrate)
	case *pb.DaemonMessage_Fence:
		j.fence(b.Fence)
	case *pb.DaemonMessage_ChildLost:
		j.childLost(node, b.ChildLost)
	case *pb.DaemonMessage_TreeStats:
		j.treeStats(node, b.TreeStats)
	case *pb.DaemonMessage_Resynced:
		j.log.Debug("subtree sent its state again", "node", node)
	case *pb.DaemonMessage_Abort:
		if r := rank(b.Abort.Rank); r != nil {
			code := int(b.Abort.Code)
			if code == 0 {
				code = 1
			}
			msg := fmt.Sprintf("gompirun: job aborted: rank %d on node %s called abort with status %d", r.rank, node, b.Abort.Code)
			if b.Abort.Message != "" {
				msg += ": " + b.Abort.Message
			}
			j.abort(msg, code)
		}
	default:
		j.log.Warn("unknown message from daemon; newer gompid?", "node", d.node)
	}
}

// exited records a rank's end and hands a failure to the ErrMgr stack.
func (j *job) exited(r *rankProc, ex *pb.RankExited) {
	r.done, r.code, r.sig = true, int(ex.ExitCode), int(ex.Signal)
	r.state = rankExited
	if ex.Killed {
		r.state = rankKilled
	}
	if j.state != jobRunning || ex.Killed {
		return // the job is ending anyway: not a fault
	}
	if j.consult(func(ep episode) verdict { return ep.onExit(j, r, r.node, ex) })&absorbed != 0 {
		return // e.g. saved and ended, as a checkpoint-and-terminate asked
	}
	if j.faultExit(r.rank, r.node, ex) {
		r.state = rankFailed
	}
}

// faultExit hands a rank's unexpected end to the ErrMgr stack; false when
// the end was no fault.
func (j *job) faultExit(rank int, node string, ex *pb.RankExited) bool {
	f := errmgr.Fault{Rank: rank, Node: node, Time: j.p.now()}
	switch {
	case ex.Signal != 0:
		// Reason is set when gompid killed it as a fault (an unresponsive
		// rank): the user reads why with the signal.
		f.Kind, f.Signal, f.Detail = errmgr.ProcSignaled, syscall.Signal(ex.Signal), ex.Reason
	case ex.ExitCode != 0:
		f.Kind, f.ExitCode = errmgr.ProcExited, int(ex.ExitCode)
	case ex.Connected && !ex.Finalized:
		f.Kind = errmgr.ProcExited
		f.Detail = "it connected to the runtime but ended without finalizing (a rank that initializes must finalize)"
	default:
		return false
	}
	j.fault(f)
	return true
}

// faultStatus is the job exit status a fault implies.
func faultStatus(f errmgr.Fault) int {
	switch f.Kind {
	case errmgr.ProcSignaled:
		return proc.ShellStatus(0, f.Signal)
	case errmgr.ProcExited:
		if f.ExitCode != 0 {
			return f.ExitCode
		}
	}
	return 1
}

// openFault is a fault the stack has not run through (yet): the job's
// status, unless something else sets it, is the oldest one's.
type openFault struct{ id, status int }

func (j *job) fault(f errmgr.Fault) int {
	j.faultSeq++
	id := j.faultSeq
	if f.Kind != errmgr.Predicted {
		if j.consult(func(ep episode) verdict { return ep.onFault(j, f) })&absorbed != 0 {
			return id
		}
		// The job's status is the first failing rank's, whatever fault
		// ends up aborting it; a fault the job runs through (sustain)
		// leaves it (ranThrough).
		j.openFaults = append(j.openFaults, openFault{id, faultStatus(f)})
		if !j.exitSet {
			j.exitCode = j.openFaults[0].status
		}
	}
	j.pendingFaults++
	j.elog.Info("fault", "fault", f.Describe())
	stack := j.p.stack
	j.spawn(func() event {
		d, st := stack.Handle(context.Background(), f)
		return evFault{id: id, f: f, d: d, st: st}
	})
	return id
}

// ranThrough ends a fault the stack recovered from: it no longer sets the
// job's exit status, and the user reads what was done about it.
func (j *job) ranThrough(e evFault) {
	j.openFaults = slices.DeleteFunc(j.openFaults, func(o openFault) bool { return o.id == e.id })
	if !j.exitSet {
		j.exitCode = 0
		if len(j.openFaults) > 0 {
			j.exitCode = j.openFaults[0].status
		}
	}
	if e.f.Kind == errmgr.Predicted {
		return
	}
	// What the policies did: a policy that passed saying why (rollback
	// falling back to autor) is shown before the one that acted.
	what := "the job goes on"
	var done []string
	for _, a := range e.st.Actions {
		if !strings.HasSuffix(a, ": passed") {
			done = append(done, a)
		}
	}
	if len(done) > 0 {
		what = strings.Join(done, "; ")
	}
	fmt.Fprintf(j.p.stderr, "gompirun: %s; %s\n", e.f.Describe(), what)
}

// notifyFailed declares ranks failed while the job runs on: fences stop
// waiting for them and every daemon tells its ranks.
func (j *job) notifyFailed(ranks []int, why string) error {
	if j.state != jobRunning {
		return fmt.Errorf("hnp: declare ranks %v failed: %w (%s)", ranks, errmgr.ErrJobOver, j.state)
	}
	var fresh []int32
	for _, r := range ranks {
		if r < 0 || r >= len(j.ranks) {
			return fmt.Errorf("hnp: declare rank %d failed: the job has ranks 0 to %d", r, len(j.ranks)-1)
		}
		if rs := j.ranks[r]; !rs.failed {
			rs.failed = true
			fresh = append(fresh, int32(r))
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	j.elog.Info("ranks declared failed; the job runs on", "ranks", fresh, "why", why)
	// Daemons hear of the failure before any fence it completes, so
	// their own fence records agree.
	j.sendAll(&pb.HNPMessage{Body: &pb.HNPMessage_ProcFailed{ProcFailed: &pb.ProcFailed{Ranks: fresh, Why: why}}})
	for _, seq := range slices.Sorted(maps.Keys(j.fences)) {
		j.completeFence(seq)
	}
	return nil
}

// nodeLost declares a daemon's node lost.
func (j *job) nodeLost(d *dconn, detail string) {
	if d.state == daemonLost || d.state == daemonGone {
		return
	}
	if j.state == jobLaunching {
		j.fail(fmt.Errorf("the daemon of node %s was lost while starting: %s", d.node, detail))
		return
	}
	running := j.state == jobRunning
	j.orphan(d)
	d.state, d.orphaned = daemonLost, time.Time{}
	if j.p.global != nil {
		j.p.global.NodeLost(d.node, detail)
	}
	if d.box != nil && d.direct() {
		d.box.close()
	}
	for _, r := range d.ranks {
		if rs := j.ranks[r]; !rs.done {
			rs.done, rs.state = true, rankLost
		}
	}
	if d.launch != nil && !d.exited {
		d.killed = true
		if k, ok := d.launch.(plm.NodeKiller); ok && d.pid > 0 {
			_ = k.KillOnNode(d.pid) // its launch process carries other nodes' daemons
		} else {
			_ = d.launch.Kill()
		}
	}
	switch {
	case (running && len(d.ranks) > 0) || j.consult(func(ep episode) verdict { return ep.onNodeLost(j, d) })&isFault != 0:
		j.fault(errmgr.Fault{Kind: errmgr.NodeLost, Rank: -1, Node: d.node, Time: j.p.now(), Detail: detail})
	case running:
		// Nothing of the job ran there (a spare node, or one its ranks
		// migrated off): no fault, but nothing goes there any more.
		fmt.Fprintf(j.p.stderr, "gompirun: node %s was lost (%s); it ran no ranks, the job goes on\n", d.node, detail)
	default:
		j.log.Warn("daemon lost while the job was ending", "node", d.node, "detail", detail)
	}
}

// fence gathers one node's contribution and, once every rank has
// contributed (but ranks declared failed), sends the table to every
// daemon.
func (j *job) fence(c *pb.FenceContribution) {
	if c.Seq <= j.fenceDone {
		// A node whose ranks failed sent what they gave before failing,
		// after the fence completed without them.
		return
	}
	got := j.fences[c.Seq]
	if got == nil {
		got = map[int32]*pb.RankData{}
		j.fences[c.Seq] = got
	}
	for _, e := range c.Entries {
		got[e.Rank] = e
	}
	j.completeFence(c.Seq)
}

// completeFence sends fence seq's table once every rank not declared
// failed has contributed.
func (j *job) completeFence(seq uint64) {
	got := j.fences[seq]
	var failed []int32
	for _, r := range j.ranks {
		if _, in := got[int32(r.rank)]; !in {
			if !r.failed {
				return
			}
			failed = append(failed, int32(r.rank))
		}
	}
	delete(j.fences, seq)
	j.fenceDone = max(j.fenceDone, seq)
	if seq == 1 {
		j.modexAt = j.p.now()
		// The modex: a migrated rank's rejoin hands it out again.
		for r, e := range got {
			j.endpoints[r] = e.GetData()
		}
	}
	entries := make([]*pb.RankData, 0, len(got))
	for _, e := range got {
		entries = append(entries, e)
	}
	sort.Slice(entries, func(a, b int) bool { return entries[a].Rank < entries[b].Rank })
	j.broadcast(&pb.HNPMessage{Body: &pb.HNPMessage_Fence{Fence: &pb.FenceComplete{Seq: seq, Entries: entries, Failed: failed}}})
	j.rolledBack(seq)
	if rec := j.computing; rec != nil && seq == 1 {
		j.computing = nil
		fmt.Fprintf(j.p.stderr, "gompirun: recovery %d: every rank computes again, %.3f s after the failure was handled\n", rec.n, j.p.now().Sub(rec.start).Seconds())
	}
}

// signal handles a signal gompirun caught.
func (j *job) signal(s os.Signal) {
	sig, ok := s.(syscall.Signal)
	if !ok {
		return
	}
	// SIGCONT resumes ranks a checkpoint --stop left stopped.
	if sig == syscall.SIGUSR1 || sig == syscall.SIGUSR2 || sig == syscall.SIGCONT {
		if sig == syscall.SIGCONT {
			j.stopped = false
		}
		j.log.Info("forwarding signal to the ranks", "signal", sig)
		j.sendAll(&pb.HNPMessage{Body: &pb.HNPMessage_Signal{Signal: &pb.SignalRanks{Signal: int32(sig)}}})
		return
	}
	switch j.state {
	case jobLaunching:
		fmt.Fprintf(j.p.stderr, "gompirun: caught signal %d (%v) while starting; stopping\n", int(sig), sig)
		j.setExit(proc.ShellStatus(0, sig))
		j.fail(fmt.Errorf("interrupted by signal %d (%v)", int(sig), sig))
		j.err = nil // the message above says it
	case jobRunning:
		fmt.Fprintf(j.p.stderr, "gompirun: caught signal %d (%v); forwarding it to the job's ranks\n", int(sig), sig)
		j.closeSnapC(fmt.Sprintf("gompirun caught signal %d (%v)", int(sig), sig))
		j.interrupted = true
		j.state = jobAborting
		j.aborting()
		j.setExit(proc.ShellStatus(0, sig))
		j.sendAll(&pb.HNPMessage{Body: &pb.HNPMessage_Signal{Signal: &pb.SignalRanks{Signal: int32(sig)}}})
		// Ranks that ignore or handle the signal are terminated after the grace.
		j.arm(timerKill, j.killGrace)
		j.arm(timerAbort, 2*j.killGrace+finishBound)
	case jobAborting:
		fmt.Fprintf(j.p.stderr, "gompirun: caught signal %d (%v) again; killing the job's ranks\n", int(sig), sig)
		j.sendAll(&pb.HNPMessage{Body: &pb.HNPMessage_Kill{Kill: &pb.KillRanks{}}})
	default:
		// Finishing: daemons are already leaving.
	}
}

// heartbeat declares daemons that have been silent too long lost.
func (j *job) heartbeat() {
	now := j.p.now()
	last := j.lastTick
	j.lastTick = now
	if !last.IsZero() && now.Sub(last) > j.hbTimeout {
		// gompirun itself was not running (suspended, starved): the
		// daemons' heartbeats are waiting unread, so silence proves nothing.
		for _, d := range j.daemons {
			d.lastSeen.Store(now.UnixNano())
		}
		return
	}
	// gompirun's beat goes down the tree; the daemons' acknowledgements
	// of it let it forget what it sent.
	j.broadcast(&pb.HNPMessage{Body: &pb.HNPMessage_Heartbeat{Heartbeat: &pb.Heartbeat{}}})
	j.trimSent()
	j.watchOrphans(now)
	for _, d := range j.daemons {
		if d.box == nil || d.state != daemonRunning || !d.direct() {
			continue // a deeper daemon is watched by its parent
		}
		if d.busy.Load() || j.hbTimeout <= 0 {
			continue // its messages wait behind output gompirun is still printing
		}
		if silent := now.Sub(time.Unix(0, d.lastSeen.Load())); silent > j.hbTimeout {
			j.nodeLost(d, fmt.Sprintf("no heartbeat for %v (%s = %v)", silent.Round(time.Millisecond), plm.ParamHBTimeout, j.hbTimeout))
		}
	}
}

func (j *job) status() *pb.StatusResponse {
	st := &pb.StatusResponse{Job: j.id, HnpPid: int32(os.Getpid()), State: j.state.String(), StartUnixNano: j.start.UnixNano(),
		Command: j.o.Command, Np: int32(len(j.ranks))}
	if j.stopped && j.state == jobRunning {
		st.State = fmt.Sprintf("stopped by gompi-checkpoint --stop (kill -CONT %d resumes)", os.Getpid())
	}
	nodes := slices.Clone(j.m.Nodes)
	for _, n := range nodes {
		d := j.daemons[n]
		st.Daemons = append(st.Daemons, &pb.DaemonStatus{Node: n, Pid: int32(d.pid), Hostname: d.hostname, State: d.state.String(),
			Parent: d.parent, Link: d.linkStats()})
	}
	for _, r := range j.ranks {
		st.Ranks = append(st.Ranks, &pb.RankStatus{Rank: int32(r.rank), Node: r.node, Pid: int32(r.pid), State: r.state.String(),
			ExitCode: int32(r.code), Signal: int32(r.sig)})
	}
	return st
}

// jobRuntime is the job as its ErrMgr policies see it (errmgr.Runtime). Its
// methods run on the stack's goroutine and reach the job through events.
type jobRuntime struct{ j *job }

// Size implements errmgr.Runtime; the number of ranks never changes.
func (rt jobRuntime) Size() int { return len(rt.j.ranks) }

// RanksOf implements errmgr.Runtime.
func (rt jobRuntime) RanksOf(node string) []int {
	reply := make(chan []int, 1)
	if !rt.j.send(evRanksOf{node: node, reply: reply}) {
		return nil
	}
	return <-reply
}

// NotifyFailed implements errmgr.Runtime.
func (rt jobRuntime) NotifyFailed(ctx context.Context, ranks []int, why string) error {
	reply := make(chan error, 1)
	select {
	case rt.j.events <- evNotifyFailed{ranks: slices.Clone(ranks), why: why, reply: reply}:
	case <-rt.j.done:
		return fmt.Errorf("hnp: declare ranks %v failed: %w", ranks, errmgr.ErrJobOver)
	case <-ctx.Done():
		return fmt.Errorf("hnp: declare ranks %v failed: %w", ranks, ctx.Err())
	}
	return <-reply
}

var _ errmgr.Runtime = jobRuntime{}

// removeNodeDirs removes the node folders of this job's daemons that have
// exited, for daemons that ran on this machine (the local PLM). A daemon
// removes its own folder as it leaves; one that was SIGKILLed cannot, and
// would leave its folder and socket behind for good. Daemons still alive
// (given up on after SIGTERM) keep theirs. A remote daemon's folder is
// out of reach here: it is left when that daemon is killed.
func (j *job) removeNodeDirs(setting string) {
	base := rte.SessionBase(setting)
	for _, d := range j.daemons {
		if d.launch == nil || !d.exited {
			continue
		}
		dir := rte.NodeDir(base, j.id, d.node)
		if err := os.RemoveAll(dir); err != nil {
			j.log.Warn("could not remove a dead daemon's node folder", "node", d.node, "dir", dir, "err", err)
		}
	}
	_ = os.Remove(filepath.Join(base, j.id)) // the job's folder, once empty
}
