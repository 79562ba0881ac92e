// Package daemon is gompid, the per-node daemon of a job. It attaches to
// its parent in the job's daemon tree (gompirun, the HNP, or another
// daemon: tree.go), relays the messages of the daemons below it, receives
// the job, starts the node's ranks (each
// in its own process group, with a parent-death signal; under the rank
// init, in a PID namespace of its own, when the job's CRS is criu:
// shape.go), reaps them with wait, forwards their output and exit
// statuses, serves the ranks' control
// calls (hello, fence, finalize, abort, the checkpoint calls of their
// application coordinators, and a stream of failure notices: ranks
// gompirun declared failed while the job runs on, which fences then no
// longer wait for) on a node-local Unix socket, runs the node's local
// snapshot coordinator, and sends heartbeats. When its parent daemon is
// lost it attaches to a live ancestor with the daemons below it. When the
// HNP goes away — the stream to it breaks, or the daemon's standard input
// (held open by the launcher) reaches end of file — the daemon kills its
// ranks, removes its node directory and exits, so a lost gompirun leaves
// nothing behind.
//
// The daemon is one actor: its state (the daemon type, under d.mu, with
// typed states daemonState and rankPhase) changes only through three kinds
// of events — gompirun's messages (handle), its ranks' control calls
// (rankService, ranks.go) and its ranks' exits (reap, procs.go) — and its
// effects go through its ports: the messages to gompirun and the rank
// processes it starts and signals. Run (this file) connects it to the
// world; the package's harness test feeds it events and checks what it
// sends. Fences are in fence.go, checkpoints in snapc.go, migrations in
// migrate.go, restarts through the job's CRS in restart.go, the process
// shape of a job whose CRS is criu (the rank init, the child subreaper)
// in shape.go, its ranks' lifelines in lifeline.go and their transparent
// dumps (the daemon as the local coordinator's snapc.Dumper) in dump.go,
// the detector of unresponsive ranks (their heartbeats) in liveness.go.
package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"gompi/boot"
	"gompi/frameworks/plm"
	"gompi/frameworks/plm/proc"
	"gompi/mca"
	"gompi/rte"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
)

// ErrHNPLost is wrapped by Run's error when gompirun went away before
// telling the daemon to shut down.
var ErrHNPLost = errors.New("lost contact with gompirun")

// Options say which job and node the daemon serves and how to reach the HNP.
type Options struct {
	Job, Node  string
	HNP        []control.Contact
	SessionDir string // "" = rte.SessionBase default
	// Stdin carries the handshake line; its end of file means the
	// launcher (gompirun or its ssh) is gone.
	Stdin io.Reader
	Log   *slog.Logger
	// LogOutput receives the records of the daemon's components (its
	// boot.Process), in the job's format with its node (default
	// os.Stderr).
	LogOutput io.Writer
}

type hnpStream = grpc.BidiStreamingClient[pb.DaemonMessage, pb.HNPMessage]

// Run serves one job and returns when it is over: nil after the HNP's
// Shutdown, an error wrapping ErrHNPLost when the HNP went away, or
// another error when the daemon could not start. Cancelling ctx (SIGTERM)
// counts as losing the HNP.
func Run(ctx context.Context, opts Options) error {
	if !rte.ValidJobID(opts.Job) {
		return fmt.Errorf("gompid: job id %q is malformed", opts.Job)
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("node", opts.Node, "job", opts.Job)

	in := bufio.NewReader(opts.Stdin)
	line, err := in.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("gompid: read the handshake from standard input: %w (gompid is started by gompirun, not by hand)", err)
	}
	hs, err := control.ParseHandshake(line)
	if err != nil {
		return fmt.Errorf("gompid: %w", err)
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		// Nothing more is ever written; EOF means the launcher died.
		_, _ = io.Copy(io.Discard, in)
		cancel(fmt.Errorf("%w: its end of the launch pipe closed", ErrHNPLost))
	}()

	nodeDir, err := makeNodeDir(opts, log)
	if err != nil {
		return err
	}
	defer removeNodeDir(nodeDir, log)

	conn, parent, err := dialParent(ctx, opts, hs)
	if err != nil {
		return fmt.Errorf("gompid: %w", err)
	}
	tr := newTree(opts.Node, hs, parent, log)
	tr.opts, tr.conn = opts, conn
	defer func() { tr.conn.Close() }()
	out := newOutbox()
	tr.send, tr.out = out.put, out
	if err := tr.serve(nodeDir, opts.HNP[0].Network, hs.Secret); err != nil {
		return err
	}
	if tr.stop != nil {
		defer tr.stop()
	}
	stream, w, err := attach(ctx, conn, opts, nodeDir, tr)
	if err != nil {
		return err
	}
	tr.stream = stream
	// The daemon beats from its welcome on: its parent watches it from
	// its hello, and starting (loading the job's components) may take long.
	go tr.beat(ctx, beatPeriod(w.Settings))
	p, err := boot.Load(ctx, boot.Options{Role: mca.RoleDaemon, Settings: control.SettingsFromProto(w.Settings),
		LogOutput: opts.LogOutput, LogAttrs: []slog.Attr{slog.String("node", opts.Node)}})
	if err != nil {
		return fmt.Errorf("gompid: job parameters: %w", err)
	}
	defer p.Close()
	// The daemon's modules: boot assembles them, in one place.
	mods, err := boot.AssembleDaemon(ctx, p, opts.Node)
	if err != nil {
		return err
	}
	defer mods.Close()
	cr := newCRState(p, mods)

	d := newDaemon(opts, log, nodeDir, hs.Secret, p.Values, w.Settings, cr, out.ports())
	d.tree = tr
	merge := d.childFence
	tr.fence.Store(&merge)
	go out.run(stream)
	go tr.watch(ctx, d.vals.Duration(plm.ParamHBTimeout))
	stop, err := d.serveRanks(hs.Secret)
	if err != nil {
		return err
	}
	defer stop()
	go d.watchRanks(ctx)
	end := d.serve(ctx, stream)
	d.finish(end, out, tr.upstream(), cancel)
	return end
}

// makeNodeDir makes the node's directory under the session directory.
func makeNodeDir(opts Options, log *slog.Logger) (string, error) {
	base := rte.SessionBase(opts.SessionDir)
	if err := control.PrivateDir(base); err != nil {
		return "", fmt.Errorf("gompid: session directory: %w", err)
	}
	nodeDir := rte.NodeDir(base, opts.Job, opts.Node)
	if err := os.MkdirAll(nodeDir, 0o700); err != nil {
		return "", fmt.Errorf("gompid: node directory: %w", err)
	}
	return nodeDir, nil
}

func removeNodeDir(nodeDir string, log *slog.Logger) {
	if err := os.RemoveAll(nodeDir); err != nil {
		log.Warn("could not remove the node directory", "dir", nodeDir, "err", err)
	}
	_ = os.Remove(filepath.Dir(nodeDir)) // the job's directory, once the last node of this machine left it
}

// attach opens the stream to gompirun, says hello and reads its welcome.
// The stream lives as long as ctx: once gompirun is lost or the daemon is
// told to stop, there is no one to report to.
func attach(ctx context.Context, conn grpc.ClientConnInterface, opts Options, nodeDir string, tr *tree) (hnpStream, *pb.Welcome, error) {
	stream, err := pb.NewHNPClient(conn).Attach(ctx, grpc.WaitForReady(true))
	if err != nil {
		return nil, nil, fmt.Errorf("gompid: attach to %s: %w", tr.parentName(opts), err)
	}
	host, _ := os.Hostname()
	if err := stream.Send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Hello{Hello: &pb.DaemonHello{
		Node: opts.Node, Pid: int32(os.Getpid()), Hostname: host, NodeDir: nodeDir,
		Contacts: tr.contacts, Pin: tr.pin, Parent: tr.parent}}}); err != nil {
		return nil, nil, fmt.Errorf("gompid: attach to gompirun: %w", err)
	}
	first, err := stream.Recv()
	// gompirun's beats down the tree may reach a daemon through its
	// parent before its welcome does.
	for err == nil && first.GetHeartbeat() != nil {
		first, err = stream.Recv()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("gompid: attach to gompirun: %w", err)
	}
	w := first.GetWelcome()
	if w == nil || w.Job != opts.Job {
		return nil, nil, fmt.Errorf("gompid: gompirun answered %v, want the welcome of job %s", first, opts.Job)
	}
	tr.lastSeq.Store(first.GetSeq())
	return stream, w, nil
}

// serveRanks serves the ranks' control calls on the node's socket; stop
// ends that service.
func (d *daemon) serveRanks(secret control.Secret) (stop func(), err error) {
	sock := filepath.Join(d.nodeDir, rte.DaemonSocket)
	l, err := control.ListenUnix(sock)
	if err != nil {
		return nil, fmt.Errorf("gompid: %w", err)
	}
	srv := control.NewServer(secret, nil)
	pb.RegisterDaemonServer(srv, &rankService{d: d})
	go srv.Serve(l)
	d.sock = sock
	return srv.Stop, nil
}

// serve handles gompirun's messages until its Shutdown (nil) or until
// gompirun is lost (an error wrapping ErrHNPLost).
func (d *daemon) serve(ctx context.Context, stream hnpStream) error {
	recvErr := make(chan error, 1)
	go func() { recvErr <- d.recvLoop(ctx, stream) }()
	select {
	case err := <-recvErr:
		return err
	case <-ctx.Done():
		end := context.Cause(ctx)
		if !errors.Is(end, ErrHNPLost) {
			end = fmt.Errorf("%w: %w", ErrHNPLost, end)
		}
		return end
	}
}

// finish ends the job on this node: the ranks (at once when gompirun is
// lost), then, after a Shutdown, the stream, cleanly.
func (d *daemon) finish(end error, out *outbox, stream hnpStream, cancel context.CancelCauseFunc) {
	if end != nil {
		// Nobody is left to report to: end the ranks at once.
		d.log.Warn("ending the node's ranks", "reason", end)
		d.killAll(syscall.SIGKILL)
	}
	d.waitRanks(10 * time.Second)
	switch {
	case d.tree != nil && end == nil:
		// The children leave first: their last messages pass through here.
		if stats := d.tree.leave(finishChildren); len(stats) > 0 {
			d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_TreeStats{TreeStats: &pb.TreeStats{Children: stats}}})
		}
	case d.tree != nil && d.tree.stop != nil:
		// Ended (gompirun lost, or this daemon ended alone as a lost
		// node): the children attach elsewhere at once.
		d.tree.stop()
	}
	out.close()
	if end != nil {
		return
	}
	<-out.done // every exit report is on the wire before the stream closes
	_ = stream.CloseSend()
	// Wait for gompirun to end the stream, so it sees a clean close
	// rather than a cancellation; bounded, since it may die meanwhile.
	t := time.AfterFunc(10*time.Second, func() { cancel(errors.New("gompirun did not close the stream")) })
	for {
		if _, err := stream.Recv(); err != nil {
			break
		}
	}
	t.Stop()
}

// ports are the daemon's effects outside its own state. Run wires the
// real ones (the outbox to gompirun, procPorts); the harness test records
// what is sent and signalled.
type ports struct {
	// send queues a message to gompirun; messages leave in the order sent.
	send func(*pb.DaemonMessage)
	// gone is closed once nothing more reaches gompirun.
	gone <-chan struct{}
	// start starts a rank's command in a process group of its own that
	// dies with the daemon; wait returns once that process has exited
	// (still to be reaped by cmd.Wait); signal signals its group.
	start  func(cmd *exec.Cmd) error
	wait   func(pid int) error
	signal func(pid int, sig syscall.Signal) error
}

// procPorts are the real process ports. Ranks die with the daemon:
// SIGKILL, since a daemon that vanished cannot report anything they do
// afterwards.
func procPorts(p ports) ports {
	p.start = func(cmd *exec.Cmd) error { return proc.Start(cmd, syscall.SIGKILL) }
	p.wait = proc.WaitExited
	p.signal = proc.SignalGroup
	return p
}

// daemonState is where the daemon is in its job's life.
type daemonState int

const (
	awaitingLaunch daemonState = iota // attached; gompirun has not sent the Launch
	running                           // the node's ranks were launched
	ending                            // told to end its ranks (Kill, Shutdown, gompirun lost)
)

func (s daemonState) String() string {
	return [...]string{"awaiting launch", "running", "ending"}[s]
}

// rankPhase is how far a rank got, as the daemon saw it.
type rankPhase int

const (
	rankStarted    rankPhase = iota // its process runs
	rankConnected                   // it said hello
	rankFinalizing                  // it called finalize
	rankExited                      // reaped, or it never started
)

type daemon struct {
	job, node, nodeDir, sock string
	secret                   control.Secret
	log                      *slog.Logger
	vals                     *mca.Values
	settings                 []*pb.Setting
	ports                    ports
	cr                       *crState
	// underInit: the job's ranks run under the rank init (shape.go),
	// initPath being the init's binary, or cannot start, for initErr.
	underInit bool
	initPath  string
	initErr   error

	mu       sync.Mutex
	state    daemonState
	launch   *pb.Launch
	ranks    map[int]*rank
	fences   map[uint64]*fence
	running  sync.WaitGroup // rank waiters
	killOnce sync.Once
	// failed holds the ranks of the job gompirun declared failed while the
	// job runs on (ProcFailed), with why; subs are the ranks' Events
	// streams, told of each new one.
	failed map[int32]string
	subs   map[*eventSub]bool
	// live is the unresponsive-rank detector's record (liveness.go), made
	// at the first heartbeat stream.
	live *liveness
	mig  migState
	// tree is the daemon's place in the daemon tree (tree.go); nil in
	// tests that feed the daemon directly.
	tree *tree
	// fenceDone is the last fence gompirun completed.
	fenceDone uint64
}

func newDaemon(opts Options, log *slog.Logger, nodeDir string, secret control.Secret, vals *mca.Values, settings []*pb.Setting, cr *crState, p ports) *daemon {
	underInit, initPath, initErr := rankShape(vals)
	return &daemon{
		underInit: underInit, initPath: initPath, initErr: initErr,
		job: opts.Job, node: opts.Node, nodeDir: nodeDir, secret: secret,
		log: log, vals: vals, settings: settings, cr: cr, ports: procPorts(p),
		ranks:  map[int]*rank{},
		fences: map[uint64]*fence{},
		mig:    migState{rejoin: map[int32]bool{}, asks: map[uint64]chan *pb.RankMigrateDone{}},
	}
}

// send queues m to gompirun.
func (d *daemon) send(m *pb.DaemonMessage) { d.ports.send(m) }

type rank struct {
	rank   int
	pid    int
	phase  rankPhase
	killed bool // the daemon signalled it to end
	// life is gompid's end of the rank's lifeline (lifeline.go), nil when
	// the job's CRS does not save ranks from outside.
	life *rankLife
	// termDumped: a checkpoint-and-terminate dump of it is under way or
	// done (dump.go), so its CRS's SIGKILL is no fault.
	termDumped bool
	// unresponsive says why the detector killed it (liveness.go); "" when
	// it did not.
	unresponsive string
	// exit is its exit report, once sent (sent again by a resync).
	exit *pb.RankExited
}

type fence struct {
	contrib map[int32]map[string]string
	sent    bool // the node's contribution went to gompirun
	done    chan struct{}
	result  []*pb.RankData
	failed  []int32 // ranks the fence completed without
	readers int
}

func (d *daemon) recvLoop(ctx context.Context, stream hnpStream) error {
	for {
		m, err := stream.Recv()
		if err != nil {
			// A lost parent daemon is not a lost gompirun: the daemon
			// attaches to a live ancestor and goes on.
			if stream, err = d.reattach(ctx, err); err != nil {
				return err
			}
			continue
		}
		// The daemons below get it first: a Launch starts their ranks
		// while this one starts its own.
		if d.tree != nil && !d.tree.route(m) {
			continue
		}
		if d.handle(ctx, m) {
			return nil
		}
	}
}

// handle is one message of gompirun's; it reports the Shutdown.
func (d *daemon) handle(ctx context.Context, m *pb.HNPMessage) (shutdown bool) {
	switch b := m.Body.(type) {
	case *pb.HNPMessage_Launch:
		if b.Launch.Migrate {
			d.launchMore(ctx, b.Launch)
		} else {
			d.start(ctx, d.ownLaunch(b.Launch))
		}
	case *pb.HNPMessage_MoveRanks:
		d.moveRanks(b.MoveRanks)
	case *pb.HNPMessage_Rollback:
		d.rollback(ctx, b.Rollback)
	case *pb.HNPMessage_Rejoined:
		d.rejoined(b.Rejoined)
	case *pb.HNPMessage_RankMigrateDone:
		d.rankMigrateDone(b.RankMigrateDone)
	case *pb.HNPMessage_SnapcRequest:
		d.snapcRequest(ctx, b.SnapcRequest)
	case *pb.HNPMessage_RankCheckpointDone:
		d.rankCheckpointDone(b.RankCheckpointDone)
	case *pb.HNPMessage_Fence:
		d.fenceComplete(b.Fence)
	case *pb.HNPMessage_ProcFailed:
		d.procFailed(b.ProcFailed)
	case *pb.HNPMessage_Resync:
		d.resync()
	case *pb.HNPMessage_Heartbeat:
		// gompirun's beat down the tree: it moves lastSeq on (route).
	case *pb.HNPMessage_Welcome:
		// Sent again after the parent was lost: the daemon runs already.
	case *pb.HNPMessage_Signal:
		d.signalAll(syscall.Signal(b.Signal.Signal))
	case *pb.HNPMessage_Kill:
		if b.Kill.GetNow() {
			d.killAll(syscall.SIGKILL)
		} else {
			d.terminate()
		}
	case *pb.HNPMessage_Shutdown:
		d.log.Debug("shutdown")
		d.terminate()
		return true
	default:
		// The wire, not the daemon's own code: a newer gompirun may send
		// what this one does not know.
		d.log.Warn("unknown message from gompirun; newer gompirun?", "msg", m)
	}
	return false
}
