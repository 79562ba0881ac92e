package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"gompi/frameworks/plm"
	"gompi/frameworks/plm/proc"
	"gompi/mca"
	"gompi/rte"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
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

func (d *daemon) startRank(ctx context.Context, l *pb.Launch, r int, env []string) {
	fail := func(err error) {
		d.log.Error("could not start rank", "rank", r, "err", err)
		d.mu.Lock()
		d.ranks[r] = &rank{rank: r, phase: rankExited}
		d.mu.Unlock()
		d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Started{Started: &pb.RankStarted{Rank: int32(r), Error: err.Error()}}})
	}
	restart, err := d.restartEnv(ctx, l.Restart, r)
	if err != nil {
		fail(err)
		return
	}
	secrets, err := d.rankSecrets(l)
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
	secR, err := secretPipe(secrets)
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		fail(err)
		return
	}
	cmd := newCommand(l.Program, l.Args, l.Cwd)
	cmd.Env = append(append(env[:len(env):len(env)], restart...), rte.EnvRank+"="+fmt.Sprint(r))
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.ExtraFiles = []*os.File{secR} // descriptor rte.SecretFD
	// The lock is held across the start so a rank's first call cannot
	// overtake its record.
	d.mu.Lock()
	err = d.ports.start(cmd)
	outW.Close()
	errW.Close()
	secR.Close()
	if err != nil {
		d.mu.Unlock()
		outR.Close()
		errR.Close()
		fail(err)
		return
	}
	pid := cmd.Process.Pid
	rk := &rank{rank: r, pid: pid, phase: rankStarted}
	d.ranks[r] = rk
	d.running.Add(1)
	d.mu.Unlock()
	d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Started{Started: &pb.RankStarted{Rank: int32(r), Pid: int32(pid)}}})

	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); d.forward(r, pb.Stream_STREAM_STDOUT, outR) }()
	go func() { defer readers.Done(); d.forward(r, pb.Stream_STREAM_STDERR, errR) }()
	go d.reap(rk, cmd, &readers)
}

// reap waits for a rank's end and reports it, after its output: the
// daemon's third kind of event.
func (d *daemon) reap(rk *rank, cmd *exec.Cmd, readers *sync.WaitGroup) {
	defer d.running.Done()
	r, pid := rk.rank, rk.pid
	if err := d.ports.wait(pid); err != nil {
		d.log.Error("wait for rank", "rank", r, "err", err)
	}
	// Whatever the rank left in its process group goes with it.
	_ = d.ports.signal(pid, syscall.SIGKILL)
	_ = cmd.Wait()
	code, sig := proc.Status(cmd.ProcessState)
	readers.Wait()
	d.mu.Lock()
	ex := &pb.RankExited{Rank: int32(r), ExitCode: int32(code), Signal: int32(sig),
		Connected: rk.phase >= rankConnected, Finalized: rk.phase >= rankFinalizing, Killed: rk.killed}
	rk.phase = rankExited
	d.mu.Unlock()
	d.log.Debug("rank exited", "rank", r, "code", code, "signal", int(sig))
	how := fmt.Sprintf("status %d", code)
	if sig != 0 {
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
