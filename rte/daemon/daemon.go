// Package daemon is gompid, the per-node daemon of a job. It dials back
// to gompirun (the HNP), receives the job, starts the node's ranks (each
// in its own process group, with a parent-death signal), reaps them with
// wait, forwards their output and exit statuses, serves the ranks' control
// calls (hello, fence, finalize, abort, the checkpoint calls of their
// application coordinators, and a stream of failure notices: ranks
// gompirun declared failed while the job runs on, which fences then no
// longer wait for) on a node-local Unix socket, runs the node's local
// snapshot coordinator, and sends heartbeats. When the HNP goes away — its
// stream breaks, its heartbeats stop, or the daemon's standard input (held
// open by the launcher) reaches end of file — the daemon kills its ranks,
// removes its node directory and exits, so a lost gompirun leaves nothing
// behind.
package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"gompi/boot"
	"gompi/frameworks/plm"
	"gompi/frameworks/plm/proc"
	"gompi/mca"
	"gompi/mca/queue"
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
}

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

	base := rte.SessionBase(opts.SessionDir)
	if err := control.PrivateDir(base); err != nil {
		return fmt.Errorf("gompid: session directory: %w", err)
	}
	nodeDir := rte.NodeDir(base, opts.Job, opts.Node)
	if err := os.MkdirAll(nodeDir, 0o700); err != nil {
		return fmt.Errorf("gompid: node directory: %w", err)
	}
	defer func() {
		if err := os.RemoveAll(nodeDir); err != nil {
			log.Warn("could not remove the node directory", "dir", nodeDir, "err", err)
		}
		_ = os.Remove(filepath.Dir(nodeDir)) // the job's directory, once the last node of this machine left it
	}()

	conn, err := control.Dial(opts.HNP, hs.Secret, hs.Pin)
	if err != nil {
		return fmt.Errorf("gompid: %w", err)
	}
	defer conn.Close()
	// The stream lives as long as ctx: once gompirun is lost or the daemon
	// is told to stop, there is no one to report to.
	stream, err := pb.NewHNPClient(conn).Attach(ctx, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("gompid: attach to gompirun at %v: %w", opts.HNP, err)
	}
	host, _ := os.Hostname()
	if err := stream.Send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Hello{Hello: &pb.DaemonHello{
		Node: opts.Node, Pid: int32(os.Getpid()), Hostname: host, NodeDir: nodeDir}}}); err != nil {
		return fmt.Errorf("gompid: attach to gompirun: %w", err)
	}
	first, err := stream.Recv()
	if err != nil {
		return fmt.Errorf("gompid: attach to gompirun: %w", err)
	}
	w := first.GetWelcome()
	if w == nil || w.Job != opts.Job {
		return fmt.Errorf("gompid: gompirun answered %v, want the welcome of job %s", first, opts.Job)
	}
	settings := control.SettingsFromProto(w.Settings)
	p, err := boot.Load(ctx, boot.Options{Role: mca.RoleDaemon, Settings: settings, LogOutput: os.Stderr})
	if err != nil {
		return fmt.Errorf("gompid: job parameters: %w", err)
	}
	defer p.Close()
	mods, err := boot.AssembleDaemon(ctx, p, opts.Node)
	if err != nil {
		return err
	}
	defer mods.Close()
	cr := newCRState(p, mods)

	d := &daemon{
		job: opts.Job, node: opts.Node, nodeDir: nodeDir, secret: hs.Secret,
		log: log, vals: p.Values, settings: w.Settings, cr: cr,
		out:    newOutbox(),
		ranks:  map[int]*rank{},
		fences: map[uint64]*fence{},
		mig:    migState{rejoin: map[int32]bool{}, asks: map[uint64]chan *pb.RankMigrateDone{}},
	}
	go d.out.run(stream)

	sock := filepath.Join(nodeDir, rte.DaemonSocket)
	l, err := control.ListenUnix(sock)
	if err != nil {
		return fmt.Errorf("gompid: %w", err)
	}
	srv := control.NewServer(hs.Secret, nil)
	pb.RegisterDaemonServer(srv, &rankService{d: d})
	go srv.Serve(l)
	defer srv.Stop()
	d.sock = sock

	go d.heartbeat(ctx)
	recvErr := make(chan error, 1)
	go func() { recvErr <- d.recvLoop(ctx, stream) }()

	var end error
	select {
	case err := <-recvErr:
		end = err
	case <-ctx.Done():
		end = context.Cause(ctx)
		if !errors.Is(end, ErrHNPLost) {
			end = fmt.Errorf("%w: %w", ErrHNPLost, end)
		}
	}
	if end != nil {
		// Nobody is left to report to: end the ranks at once.
		log.Warn("ending the node's ranks", "reason", end)
		d.killAll(syscall.SIGKILL)
	}
	d.waitRanks(10 * time.Second)
	d.out.close()
	if end == nil {
		<-d.out.done // every exit report is on the wire before the stream closes
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
	return end
}

type daemon struct {
	job, node, nodeDir, sock string
	secret                   control.Secret
	log                      *slog.Logger
	vals                     *mca.Values
	settings                 []*pb.Setting
	out                      *outbox
	cr                       *crState

	mu       sync.Mutex
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
	mig    migState
}

type rank struct {
	rank      int
	pid       int
	connected bool
	finalized bool
	killed    bool
	exited    bool
}

type fence struct {
	contrib map[int32]map[string]string
	sent    bool // the node's contribution went to gompirun
	done    chan struct{}
	result  []*pb.RankData
	failed  []int32 // ranks the fence completed without
	readers int
}

func (d *daemon) recvLoop(ctx context.Context, stream grpc.BidiStreamingClient[pb.DaemonMessage, pb.HNPMessage]) error {
	for {
		m, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrHNPLost, err)
		}
		switch b := m.Body.(type) {
		case *pb.HNPMessage_Launch:
			if b.Launch.Migrate {
				d.launchMore(ctx, b.Launch)
			} else {
				d.start(ctx, b.Launch)
			}
		case *pb.HNPMessage_MoveRanks:
			d.moveRanks(b.MoveRanks)
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
			return nil
		default:
			d.log.Warn("unknown message from gompirun; newer gompirun?", "msg", m)
		}
	}
}

// heartbeat tells the HNP the daemon lives. The daemon does not watch the
// HNP the same way: a gompirun suspended with Ctrl-Z is silent but not
// lost. It learns of a lost HNP from its stream, its standard input, its
// parent-death signal, and, across machines, TCP keepalive.
func (d *daemon) heartbeat(ctx context.Context) {
	period := d.vals.Duration(plm.ParamHBPeriod)
	if period <= 0 {
		return
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.out.done:
			return
		case <-tick.C:
			d.out.put(&pb.DaemonMessage{Body: &pb.DaemonMessage_Heartbeat{Heartbeat: &pb.Heartbeat{}}})
		}
	}
}

// start launches the node's ranks.
func (d *daemon) start(ctx context.Context, l *pb.Launch) {
	d.mu.Lock()
	if d.launch != nil {
		d.mu.Unlock()
		d.log.Warn("second launch ignored")
		return
	}
	d.launch = l
	d.mu.Unlock()
	if err := d.startLocal(l); err != nil {
		d.log.Error("no local snapshot coordinator; checkpoints of this job will fail", "err", err)
	}
	env := d.rankEnv(l)
	for _, r := range l.Ranks {
		d.startRank(ctx, l, int(r), env)
	}
}

func (d *daemon) rankEnv(l *pb.Launch) []string {
	drop := map[string]bool{}
	for _, k := range rte.JobEnv {
		drop[k] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if drop[k] || strings.HasPrefix(k, mca.EnvPrefix) {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, d.vals.Environ()...)
	env = append(env, l.Env...)
	return append(env,
		rte.EnvSize+"="+fmt.Sprint(l.Size),
		rte.EnvJob+"="+d.job,
		rte.EnvNode+"="+d.node,
		rte.EnvNodeDir+"="+d.nodeDir,
		rte.EnvDaemon+"="+d.sock,
		rte.EnvSecret+"="+d.secret.Hex(),
	)
}

func (d *daemon) startRank(ctx context.Context, l *pb.Launch, r int, env []string) {
	fail := func(err error) {
		d.log.Error("could not start rank", "rank", r, "err", err)
		d.mu.Lock()
		d.ranks[r] = &rank{rank: r, exited: true}
		d.mu.Unlock()
		d.out.put(&pb.DaemonMessage{Body: &pb.DaemonMessage_Started{Started: &pb.RankStarted{Rank: int32(r), Error: err.Error()}}})
	}
	restart, err := d.restartEnv(ctx, l.Restart, r)
	if err != nil {
		fail(err)
		return
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		fail(err)
		return
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		fail(err)
		return
	}
	cmd := newCommand(l.Program, l.Args, l.Cwd)
	cmd.Env = append(append(env[:len(env):len(env)], restart...), rte.EnvRank+"="+fmt.Sprint(r))
	cmd.Stdout, cmd.Stderr = outW, errW
	// Ranks die with the daemon: SIGKILL, since a daemon that vanished
	// cannot report anything they do afterwards. The lock is held across
	// the start so a rank's first call cannot overtake its record.
	d.mu.Lock()
	err = proc.Start(cmd, syscall.SIGKILL)
	outW.Close()
	errW.Close()
	if err != nil {
		d.mu.Unlock()
		outR.Close()
		errR.Close()
		fail(err)
		return
	}
	pid := cmd.Process.Pid
	rk := &rank{rank: r, pid: pid}
	d.ranks[r] = rk
	d.running.Add(1)
	d.mu.Unlock()
	d.out.put(&pb.DaemonMessage{Body: &pb.DaemonMessage_Started{Started: &pb.RankStarted{Rank: int32(r), Pid: int32(pid)}}})

	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); d.forward(r, pb.Stream_STREAM_STDOUT, outR) }()
	go func() { defer readers.Done(); d.forward(r, pb.Stream_STREAM_STDERR, errR) }()
	go func() {
		defer d.running.Done()
		if err := proc.WaitExited(pid); err != nil {
			d.log.Error("wait for rank", "rank", r, "err", err)
		}
		// Whatever the rank left in its process group goes with it.
		_ = proc.SignalGroup(pid, syscall.SIGKILL)
		_ = cmd.Wait()
		code, sig := proc.Status(cmd.ProcessState)
		readers.Wait()
		d.mu.Lock()
		rk.exited = true
		ex := &pb.RankExited{Rank: int32(r), ExitCode: int32(code), Signal: int32(sig),
			Connected: rk.connected, Finalized: rk.finalized, Killed: rk.killed}
		d.mu.Unlock()
		d.log.Debug("rank exited", "rank", r, "code", code, "signal", int(sig))
		how := fmt.Sprintf("status %d", code)
		if sig != 0 {
			how = fmt.Sprintf("signal %d", int(sig))
		}
		d.appGone(r, fmt.Sprintf("rank %d ended (%s)", r, how))
		d.out.put(&pb.DaemonMessage{Body: &pb.DaemonMessage_Exited{Exited: ex}})
	}()
}

// maxChunk bounds one output message; longer lines are split.
const maxChunk = 64 << 10

// forward sends a rank's output to the HNP in whole lines where it can.
func (d *daemon) forward(r int, s pb.Stream, f *os.File) {
	defer f.Close()
	buf := make([]byte, 0, maxChunk)
	tmp := make([]byte, 32<<10)
	send := func(b []byte) {
		d.out.put(&pb.DaemonMessage{Body: &pb.DaemonMessage_Output{Output: &pb.RankOutput{
			Rank: int32(r), Stream: s, Data: append([]byte(nil), b...)}}})
	}
	for {
		n, err := f.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if i := lastNewline(buf); i >= 0 {
			send(buf[:i+1])
			buf = append(buf[:0], buf[i+1:]...)
		}
		for len(buf) >= maxChunk {
			send(buf[:maxChunk])
			buf = append(buf[:0], buf[maxChunk:]...)
		}
		if err != nil {
			if len(buf) > 0 {
				send(buf)
			}
			return
		}
	}
}

func lastNewline(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			return i
		}
	}
	return -1
}

func (d *daemon) signalAll(sig syscall.Signal) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.ranks {
		if !r.exited && r.pid > 0 {
			_ = proc.SignalGroup(r.pid, sig)
		}
	}
}

// terminate ends every rank: SIGTERM now, SIGKILL after the kill grace to
// those still there.
func (d *daemon) terminate() {
	d.mu.Lock()
	live := 0
	for _, r := range d.ranks {
		if !r.exited {
			r.killed = true
			live++
		}
	}
	d.mu.Unlock()
	if live == 0 {
		return
	}
	d.signalAll(syscall.SIGTERM)
	grace := d.vals.Duration(plm.ParamKillGrace)
	d.killOnce.Do(func() {
		go func() {
			done := make(chan struct{})
			go func() { d.running.Wait(); close(done) }()
			t := time.NewTimer(grace)
			defer t.Stop()
			select {
			case <-done:
			case <-t.C:
				d.killAll(syscall.SIGKILL)
			}
		}()
	})
}

func (d *daemon) killAll(sig syscall.Signal) {
	d.mu.Lock()
	for _, r := range d.ranks {
		if !r.exited {
			r.killed = true
		}
	}
	d.mu.Unlock()
	d.signalAll(sig)
}

// waitRanks waits for every rank to be reaped, at most bound.
func (d *daemon) waitRanks(bound time.Duration) {
	done := make(chan struct{})
	go func() { d.running.Wait(); close(done) }()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		d.log.Error("ranks still running after SIGKILL", "waited", bound)
	}
}

func (d *daemon) fenceComplete(fc *pb.FenceComplete) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.fenceLocked(fc.Seq)
	f.result, f.failed = fc.Entries, fc.Failed
	f.sent = true // complete without this node's contribution: its ranks all failed
	close(f.done)
}

// contributionLocked returns the node's contribution to f once every
// local rank not declared failed has joined it, and nil before (or once
// it was sent).
func (d *daemon) contributionLocked(seq uint64, f *fence) *pb.FenceContribution {
	if f.sent || d.launch == nil {
		return nil
	}
	for _, r := range d.launch.Ranks {
		if _, in := f.contrib[r]; !in && d.failed[r] == "" {
			return nil
		}
	}
	f.sent = true
	send := &pb.FenceContribution{Seq: seq}
	for r, m := range f.contrib {
		send.Entries = append(send.Entries, &pb.RankData{Rank: r, Data: m})
	}
	sort.Slice(send.Entries, func(i, j int) bool { return send.Entries[i].Rank < send.Entries[j].Rank })
	return send
}

// liveLocalLocked counts the node's ranks not declared failed.
func (d *daemon) liveLocalLocked() int {
	n := 0
	for _, r := range d.launch.Ranks {
		if d.failed[r] == "" {
			n++
		}
	}
	return n
}

// procFailed records ranks gompirun declared failed, tells the node's
// ranks, and sends the contributions of fences that waited only for
// failed ranks of this node.
func (d *daemon) procFailed(m *pb.ProcFailed) {
	why := m.Why
	if why == "" {
		why = "reported failed by gompirun"
	}
	d.mu.Lock()
	if d.failed == nil {
		d.failed = map[int32]string{}
	}
	var fresh []int32
	for _, r := range m.Ranks {
		if d.failed[r] == "" {
			d.failed[r] = why
			fresh = append(fresh, r)
		}
	}
	if len(fresh) > 0 {
		ev := &pb.RankEvent{Failed: fresh, Why: why}
		for s := range d.subs {
			s.Put(ev)
		}
	}
	var sends []*pb.FenceContribution
	for seq, f := range d.fences {
		if c := d.contributionLocked(seq, f); c != nil {
			sends = append(sends, c)
		}
	}
	d.mu.Unlock()
	d.log.Info("ranks declared failed; the job runs on", "ranks", fresh, "why", why)
	sort.Slice(sends, func(i, j int) bool { return sends[i].Seq < sends[j].Seq })
	for _, c := range sends {
		d.out.put(&pb.DaemonMessage{Body: &pb.DaemonMessage_Fence{Fence: c}})
	}
}

// eventSub is one rank's Events stream: notices queue here (never
// blocking the daemon) until the stream's goroutine, its owner, sends them.
type eventSub = queue.Queue[*pb.RankEvent]

func (d *daemon) fenceLocked(seq uint64) *fence {
	f, ok := d.fences[seq]
	if !ok {
		f = &fence{contrib: map[int32]map[string]string{}, done: make(chan struct{})}
		d.fences[seq] = f
	}
	return f
}

// outbox is the daemon's single, ordered way to the HNP: a rank's output
// and its exit travel in the order they were put.
type outbox struct {
	ch     chan *pb.DaemonMessage
	closed chan struct{}
	done   chan struct{} // the sender stopped
	once   sync.Once
}

func newOutbox() *outbox {
	return &outbox{ch: make(chan *pb.DaemonMessage, 1024), closed: make(chan struct{}), done: make(chan struct{})}
}

// put queues m; it blocks while the queue is full (a rank writing faster
// than gompirun prints waits) and drops m once the outbox is closed.
func (o *outbox) put(m *pb.DaemonMessage) {
	select {
	case <-o.closed:
		return
	default:
	}
	select {
	case o.ch <- m:
	case <-o.closed:
	case <-o.done:
	}
}

func (o *outbox) close() { o.once.Do(func() { close(o.closed) }) }

func (o *outbox) run(stream grpc.BidiStreamingClient[pb.DaemonMessage, pb.HNPMessage]) {
	defer close(o.done)
	for {
		select {
		case m := <-o.ch:
			if err := stream.Send(m); err != nil {
				return
			}
		case <-o.closed:
			for { // flush what was queued before closing
				select {
				case m := <-o.ch:
					if err := stream.Send(m); err != nil {
						return
					}
				default:
					return
				}
			}
		}
	}
}
