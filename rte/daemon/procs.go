package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"gompi/frameworks/crs"
	"gompi/frameworks/plm"
	"gompi/frameworks/plm/proc"
	"gompi/mca"
	"gompi/rte"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
	"gompi/rte/rankinit"
)

// The node's ranks as processes: started in process groups of their own,
// reaped, their output forwarded, signalled, ended.

// start launches the node's ranks.
func (d *daemon) start(ctx context.Context, l *pb.Launch) {
	d.mu.Lock()
	if d.state != awaitingLaunch {
		d.mu.Unlock()
		d.log.Warn("second launch ignored", "state", d.state)
		return
	}
	d.launch, d.state = l, running
	// Children may have contributed to a fence before this launch said
	// which ranks are below.
	sends := d.readyContributionsLocked()
	d.mu.Unlock()
	for _, c := range sends {
		d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Fence{Fence: c}})
	}
	if d.underInit && d.initErr == nil {
		if err := becomeSubreaper(); err != nil {
			d.log.Error("restored ranks will not be waited on", "err", err)
		}
		if err := closeInheritedOnExec(); err != nil {
			d.log.Warn("ranks may inherit descriptors gompid inherited, and be dumped with them", "err", err)
		}
	}
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
	env = withGOMAXPROCS(env, d.vals.Int(plm.ParamGOMAXPROCS), runtime.NumCPU(), len(l.Ranks))
	return append(env,
		rte.EnvSize+"="+fmt.Sprint(l.Size),
		rte.EnvJob+"="+d.job,
		rte.EnvNode+"="+d.node,
		rte.EnvNodeDir+"="+d.nodeDir,
		rte.EnvDaemon+"="+d.sock,
		rte.EnvSecretFD+"="+fmt.Sprint(rte.SecretFD),
	)
}

// secretPipe returns the read end of a pipe that holds the rank's
// secrets (control.RankSecrets: the job's control secret and the launch
// generation's data-plane secret) and then ends: a rank inherits it as
// descriptor rte.SecretFD instead of finding them in its environment.
// They fit in the pipe's buffer, so they are written before the rank
// starts and the write end closed at once.
func secretPipe(s control.RankSecrets) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("secret pipe: %w", err)
	}
	_, err = w.WriteString(s.Text())
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("secret pipe: %w", err)
	}
	return r, nil
}

// rankSecrets are the secrets a rank of launch l is handed: the job's
// control secret and l's data-plane secret, which gompirun made for the
// launch generation (a launch without one starts no rank: its ranks could
// prove nothing to each other).
func (d *daemon) rankSecrets(l *pb.Launch) (control.RankSecrets, error) {
	data, err := control.SecretFromBytes(l.DataSecret)
	if err != nil {
		return control.RankSecrets{}, fmt.Errorf("the launch's data-plane secret: %w", err)
	}
	return control.RankSecrets{Control: d.secret, Data: data}, nil
}

// rankIO is a rank's descriptors while it is being started: the pipes of
// its standard output and error (the daemon's read ends are forwarded,
// the write ends go to the rank), its extra descriptors from 3 (the
// secret pipe, rte.SecretFD, then, under the rank init, the lifeline's
// two, lifeline.go) and, for a rank under the rank init, the init's
// status pipe. A fresh start and a restore share it.
type rankIO struct {
	outR, outW, errR, errW *os.File
	files                  []*os.File // the rank's descriptors from 3
	statusR, statusW       *os.File   // the init's status; nil when not under it
	life                   *rankLife  // gompid's ends of the lifeline; nil when not under it
	lifeEnv                string     // rte.EnvLifelineFDs=R,W for the rank
}

// openRankIO makes rank r's descriptors for launch l (whose secrets it
// is handed), with the rank init's status pipe and the rank's lifeline
// when underInit.
func (d *daemon) openRankIO(l *pb.Launch, r int, underInit bool) (_ *rankIO, err error) {
	secrets, err := d.rankSecrets(l)
	if err != nil {
		return nil, err
	}
	io := &rankIO{}
	defer func() {
		if err != nil {
			io.closeAll()
		}
	}()
	if io.outR, io.outW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("output pipe: %w", err)
	}
	if io.errR, io.errW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("error pipe: %w", err)
	}
	secR, err := secretPipe(secrets)
	if err != nil {
		return nil, err
	}
	io.files = []*os.File{secR} // descriptor rte.SecretFD
	if underInit {
		life, lr, lw, err := openLifeline(r, d.log)
		if err != nil {
			return nil, err
		}
		io.life = life
		io.lifeEnv = fmt.Sprintf("%s=%d,%d", rte.EnvLifelineFDs, 3+len(io.files), 4+len(io.files))
		io.files = append(io.files, lr, lw)
		if io.statusR, io.statusW, err = os.Pipe(); err != nil {
			return nil, fmt.Errorf("rank init status pipe: %w", err)
		}
	}
	return io, nil
}

// closeChild closes the rank's ends once it holds them (or failed to
// start).
func (io *rankIO) closeChild() {
	closeFiles(append([]*os.File{io.outW, io.errW, io.statusW}, io.files...))
}

// closeAll closes every descriptor: the rank never started.
func (io *rankIO) closeAll() {
	io.closeChild()
	closeFiles([]*os.File{io.outR, io.errR, io.statusR})
	if io.life != nil {
		closeFiles([]*os.File{io.life.in, io.life.out})
	}
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// startFailed records that rank r could not be started and tells gompirun.
func (d *daemon) startFailed(r int, err error) {
	d.log.Error("could not start rank", "rank", r, "err", err)
	d.mu.Lock()
	d.ranks[r] = &rank{rank: r, phase: rankExited}
	d.mu.Unlock()
	d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Started{Started: &pb.RankStarted{Rank: int32(r), Error: err.Error()}}})
}

// startRank starts rank r of launch l with env (the job's): a fresh rank,
// or, in a restarted job, a rank brought back through the job's CRS
// (restart.go).
func (d *daemon) startRank(ctx context.Context, l *pb.Launch, r int, env []string) {
	if d.underInit && d.initErr != nil {
		d.startFailed(r, d.initErr)
		return
	}
	rs, err := d.restartOf(ctx, l.Restart, r)
	if err != nil {
		d.startFailed(r, err)
		return
	}
	if rs != nil {
		if rest, ok := d.cr.crs.(crs.Restorer); ok {
			d.restoreRank(ctx, l, r, rs, rest)
			return
		}
		if l, env, err = d.relaunch(ctx, l, r, rs, env); err != nil {
			d.startFailed(r, err)
			return
		}
	}
	d.spawnRank(l, r, env)
}

// spawnRank starts rank r's process: l's program with env, under the
// rank init when the job's CRS is criu.
func (d *daemon) spawnRank(l *pb.Launch, r int, env []string) {
	io, err := d.openRankIO(l, r, d.underInit)
	if err != nil {
		d.startFailed(r, err)
		return
	}
	cmd := newCommand(l.Program, l.Args, l.Cwd)
	cmd.Env = append(env[:len(env):len(env)], rte.EnvRank+"="+fmt.Sprint(r))
	if io.lifeEnv != "" {
		cmd.Env = append(cmd.Env, io.lifeEnv)
	}
	cmd.Stdout, cmd.Stderr = io.outW, io.errW
	cmd.ExtraFiles = io.files
	if d.underInit {
		rankinit.Wrap(cmd, d.initPath, io.statusW)
	}
	status := newInitStatus(io.statusR)
	// The lock is held across the start so a rank's first call cannot
	// overtake its record.
	d.mu.Lock()
	err = d.ports.start(cmd)
	io.closeChild()
	if err == nil && status != nil {
		err = d.initStarted(cmd, status)
	}
	if err != nil {
		d.mu.Unlock()
		io.closeAll()
		d.startFailed(r, err)
		return
	}
	rk := d.recordLocked(r, cmd.Process.Pid, io.life)
	d.mu.Unlock()
	wait := func() (int, syscall.Signal) { return d.waitCmd(rk.pid, cmd, status) }
	d.started(rk, io, wait)
}

// initStarted waits, boundedly, for the rank init to say it started the
// rank; when it did not, the init is ended and reaped.
func (d *daemon) initStarted(cmd *exec.Cmd, status *initStatus) error {
	_ = status.f.SetReadDeadline(time.Now().Add(initStartBound))
	err := status.Started()
	_ = status.f.SetReadDeadline(time.Time{})
	if err != nil {
		_ = d.ports.signal(cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}
	return err
}

// initStartBound bounds the rank init's start of its rank: a fork and an
// exec, on a machine that may be loaded.
const initStartBound = time.Minute

// recordLocked records rank r's process and its lifeline (nil for none),
// under d.mu, and counts its waiter in d.running.
func (d *daemon) recordLocked(r, pid int, life *rankLife) *rank {
	rk := &rank{rank: r, pid: pid, phase: rankStarted, life: life}
	d.ranks[r] = rk
	d.running.Add(1)
	return rk
}

// started reports rk's start and forwards its output until it ends; wait
// returns once its process ended, with how (the caller counted it in
// d.running).
func (d *daemon) started(rk *rank, io *rankIO, wait func() (int, syscall.Signal)) {
	r := rk.rank
	d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Started{Started: &pb.RankStarted{Rank: int32(r), Pid: int32(rk.pid)}}})
	var readers sync.WaitGroup
	readers.Add(2)
	// The forwarders end at the end of file of the rank's output (its
	// process tree gone); reap waits for them.
	go func() { defer readers.Done(); d.forward(r, pb.Stream_STREAM_STDOUT, io.outR) }()
	go func() { defer readers.Done(); d.forward(r, pb.Stream_STREAM_STDERR, io.errR) }()
	if rk.life != nil {
		// Its owner is the reaper, which closes the lifeline once the
		// rank's process ended and waits for it (rankLife.close).
		go rk.life.read()
	}
	// The reaper, counted in d.running (waitRanks waits for it), ends
	// once the rank's process ended and its output was forwarded.
	go func() {
		if io.statusR != nil {
			defer io.statusR.Close()
		}
		d.reap(rk, wait, &readers)
	}()
}

// waitCmd waits for a process the daemon started and reaps it: the
// rank's code or signal. For a rank under the rank init, that is what
// the init reported, else the init's own end (it was killed).
func (d *daemon) waitCmd(pid int, cmd *exec.Cmd, status *initStatus) (int, syscall.Signal) {
	if err := d.ports.wait(pid); err != nil {
		d.log.Error("wait for rank", "pid", pid, "err", err)
	}
	// Whatever the rank left in its process group goes with it.
	_ = d.ports.signal(pid, syscall.SIGKILL)
	_ = cmd.Wait()
	code, sig := proc.Status(cmd.ProcessState)
	if status != nil {
		if ex, ok := status.report(); ok {
			code, sig = ex.Code, ex.Signal
		}
	}
	return code, sig
}

// reap waits for a rank's end and reports it, after its output: the
// daemon's third kind of event.
func (d *daemon) reap(rk *rank, wait func() (int, syscall.Signal), readers *sync.WaitGroup) {
	defer d.running.Done()
	r := rk.rank
	code, sig := wait()
	if rk.life != nil {
		rk.life.close()
	}
	readers.Wait()
	d.mu.Lock()
	// A rank dumped with Term is ended by its CRS (SIGKILL) once saved,
	// which is what it was asked: reported as a rank that saved and
	// ended itself, as crs=self's ranks do (status 0).
	saved := rk.termDumped && sig == syscall.SIGKILL
	if saved {
		code, sig = 0, 0
	}
	ex := &pb.RankExited{Rank: int32(r), ExitCode: int32(code), Signal: int32(sig),
		Connected: rk.phase >= rankConnected, Finalized: rk.phase >= rankFinalizing, Killed: rk.killed,
		Reason: rk.unresponsive}
	rk.phase, rk.exit = rankExited, ex
	d.mu.Unlock()
	d.log.Debug("rank exited", "rank", r, "code", code, "signal", int(sig), "dumped_term", saved)
	how := fmt.Sprintf("status %d", code)
	switch {
	case saved:
		how = "dumped by a checkpoint-and-terminate"
	case ex.Reason != "":
		how = ex.Reason
	case sig != 0:
		how = fmt.Sprintf("signal %d", int(sig))
	}
	d.appGone(r, fmt.Sprintf("rank %d ended (%s)", r, how))
	d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Exited{Exited: ex}})
}

// maxChunk bounds one output message; longer lines are split.
const maxChunk = 64 << 10

// forward sends a rank's output to the HNP in whole lines where it can.
func (d *daemon) forward(r int, s pb.Stream, f *os.File) {
	defer f.Close()
	buf := make([]byte, 0, maxChunk)
	tmp := make([]byte, 32<<10)
	send := func(b []byte) {
		d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Output{Output: &pb.RankOutput{
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
		if r.phase != rankExited && r.pid > 0 {
			_ = d.ports.signal(r.pid, sig)
		}
	}
}

// terminate ends every rank: SIGTERM now, SIGKILL after the kill grace to
// those still there.
func (d *daemon) terminate() {
	d.mu.Lock()
	live := 0
	for _, r := range d.ranks {
		if r.phase != rankExited {
			r.killed = true
			live++
		}
	}
	if d.state == running {
		d.state = ending
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
		if r.phase != rankExited {
			r.killed = true
		}
	}
	if d.state == running {
		d.state = ending
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
