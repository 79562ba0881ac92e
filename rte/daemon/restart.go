package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	"gompi/frameworks/crs"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/rte"
	pb "gompi/rte/control/proto"
	"gompi/rte/lifeline"
	"gompi/rte/rankinit"
)

// A rank of a restarted job comes back through the job's CRS (crState.crs,
// selected by boot.AssembleDaemon). A crs.Restorer (criu) brings the
// process back itself: the daemon hands it the rank's descriptors as it
// gives them to a fresh rank (rankIO) and waits on the crs.Process it
// returns, reporting its end as a fresh rank's (restoreRank). Any other
// module says what to launch (Module.Restart: self gives back the
// original launch, whose program restores itself from the snapshot the
// restart variables name), and the daemon starts that as a fresh rank
// (relaunch, spawnRank).

// rankRestart is where a rank of a restarted job starts from.
type rankRestart struct {
	dir  string            // its local snapshot, readable on this node
	env  []string          // the restart variables (rte.EnvRestart*)
	meta map[string]string // the CRS's data from the snapshot's local metadata
}

// restartOf fetches rank's local snapshot of a restarted job (nil, nil
// for a fresh start).
func (d *daemon) restartOf(ctx context.Context, spec *pb.RestartSpec, rank int) (*rankRestart, error) {
	if spec == nil {
		return nil, nil
	}
	ref := snapshot.Ref{Dir: spec.RefDir, Name: spec.RefName}
	dir, err := d.cr.store.Fetch(ctx, ref, int(spec.Seq), rank)
	if err != nil {
		if errors.Is(err, sstore.ErrDisabled) {
			return nil, fmt.Errorf("restart of rank %d: %w (restart with -am ft-enable-cr)", rank, err)
		}
		return nil, fmt.Errorf("restart of rank %d: %w", rank, err)
	}
	rs := &rankRestart{dir: dir, env: []string{rte.EnvRestartRef + "=" + ref.String(),
		rte.EnvRestartSeq + "=" + fmt.Sprint(spec.Seq), rte.EnvRestartDir + "=" + dir}}
	// The CRS judges a snapshot without metadata (ErrNoSnapshot).
	if meta, err := snapshot.ReadLocal(dir); err == nil {
		rs.meta = meta.CRSMeta
	}
	return rs, nil
}

// launchOf is how the ranks of l were started, as a CRS sees a launch.
func launchOf(l *pb.Launch) crs.Launch {
	return crs.Launch{Argv: append([]string{l.Program}, l.Args...), Env: l.Env, Dir: l.Cwd}
}

// relaunch asks the job's CRS how to start rank r again from rs, and
// returns the launch to start and its environment: env, the restart
// variables, then the launch's own (the -x exports, as the CRS gives
// them back; the last value of a variable wins).
func (d *daemon) relaunch(ctx context.Context, l *pb.Launch, r int, rs *rankRestart, env []string) (*pb.Launch, []string, error) {
	if d.cr.crs == nil {
		return nil, nil, fmt.Errorf("restart of rank %d: the job has no CRS: %w", r, d.cr.crsErr)
	}
	got, err := d.cr.crs.Restart(ctx, crs.RestartRequest{Dir: rs.dir, Meta: rs.meta, Launch: launchOf(l)})
	if err != nil {
		return nil, nil, fmt.Errorf("restart of rank %d: %w", r, err)
	}
	if len(got.Argv) == 0 {
		return nil, nil, fmt.Errorf("restart of rank %d: the job's CRS gave no program to launch", r)
	}
	nl := proto.Clone(l).(*pb.Launch)
	nl.Program, nl.Args, nl.Cwd = got.Argv[0], got.Argv[1:], got.Dir
	env = append(append(env[:len(env):len(env)], rs.env...), got.Env...)
	return nl, env, nil
}

// restoreRank brings rank r back through rest, with the descriptors a
// fresh rank gets (new lifeline pipes among them, and, under the rank
// init, the init's status pipe after them, where the restored init finds
// it), records it by the restored process's PID and waits on that
// process. A rank with a lifeline is then told where it is (restarted).
func (d *daemon) restoreRank(ctx context.Context, l *pb.Launch, r int, rs *rankRestart, rest crs.Restorer) {
	io, err := d.openRankIO(l, r, d.underInit)
	if err != nil {
		d.startFailed(r, err)
		return
	}
	files := io.files
	if io.statusW != nil {
		files = append(files[:len(files):len(files)], io.statusW)
	}
	// The lock is held across the restore so the restored rank's first
	// call cannot overtake its record.
	d.mu.Lock()
	p, err := rest.Restore(ctx, crs.RestoreRequest{Rank: r, Dir: rs.dir, Meta: rs.meta, Launch: launchOf(l),
		Stdout: io.outW, Stderr: io.errW, Files: files})
	io.closeChild()
	if err != nil {
		d.mu.Unlock()
		io.closeAll()
		d.startFailed(r, fmt.Errorf("restore of rank %d: %w", r, err))
		return
	}
	rk := d.recordLocked(r, p.PID(), io.life)
	d.mu.Unlock()
	status := newInitStatus(io.statusR)
	d.started(rk, io, func() (int, syscall.Signal) { return d.waitRestored(rk, p, status) })
	if rk.life != nil {
		d.restarted(l, rk)
	}
}

// restarted gives a restored rank its word on its new lifeline: Restart,
// with this daemon's socket, node and directory and the secrets of this
// launch (its image, paused in rankclient.Pause, reads exactly that
// pipe). A rank that cannot be told cannot reconnect: its lifeline is
// closed, which it reads as gompid gone, and it ends.
func (d *daemon) restarted(l *pb.Launch, rk *rank) {
	secrets, err := d.rankSecrets(l)
	if err == nil {
		err = rk.life.say(lifeline.Message{Kind: lifeline.Restart, Daemon: d.sock, Node: d.node, NodeDir: d.nodeDir, Secrets: secrets.Text()})
	}
	if err != nil {
		d.log.Error("could not tell a restored rank where it is; it will end", "rank", rk.rank, "err", err)
		rk.life.hangUp()
	}
}

// waitRestored waits for a restored rank's end: its Process's, or, for a
// rank under the rank init, what the init reported.
func (d *daemon) waitRestored(rk *rank, p crs.Process, status *initStatus) (int, syscall.Signal) {
	// The daemon ends its ranks before it leaves: the wait outlives ctx.
	ex, err := p.Wait(context.Background())
	if err != nil {
		d.log.Error("wait for restored rank", "rank", rk.rank, "pid", rk.pid, "err", err)
		return -1, 0
	}
	if status != nil {
		if rep, ok := status.report(); ok {
			ex = rep
		}
	}
	return ex.Code, ex.Signal
}

// initStatus is the daemon's end of a rank init's status pipe.
type initStatus struct {
	f *os.File
	*rankinit.Status
}

func newInitStatus(f *os.File) *initStatus {
	if f == nil {
		return nil
	}
	return &initStatus{f: f, Status: rankinit.NewStatus(f)}
}

// report reads how the rank init said its rank ended, once the init has
// ended. The read is bounded: only the init held the pipe's write end,
// but a CRS that kept a copy by mistake must not hang the reaper.
func (s *initStatus) report() (crs.Exit, bool) {
	_ = s.f.SetReadDeadline(time.Now().Add(initReportBound))
	return s.Exit()
}

// initReportBound bounds the read of an ended init's report.
const initReportBound = 10 * time.Second
