package daemon

import (
	"context"
	"fmt"
	"io"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"gompi/frameworks/plm"
	pb "gompi/rte/control/proto"
)

// The unresponsive-rank detector (errmgr_base_rank_heartbeat_period and
// _timeout). Each rank beats on a Heartbeat stream to its gompid while it
// is attached (rankclient); gompid watches a rank from the opening of
// such a stream to its end, and kills (SIGKILL) a rank whose streams stay
// silent for the timeout. The kill is then a rank death like any other:
// the reaper reports the exit, with the reason, and gompirun hands the
// fault to the ErrMgr stack, so sustain runs on without the rank and the
// default policy aborts the job.
//
// The rank beats rather than gompid probing it: the beat needs no server
// in the rank, and a rank that detaches from gompid ends its stream, so
// every pause the runtime itself makes is the absence of a stream: a
// transparent checkpoint's dump (the rank detaches before CRIU freezes
// it), gompi-checkpoint --stop (the rank stays detached and stopped until
// SIGCONT, then reattaches and beats again), a migration (the moving rank
// detaches; the new one attaches to its new gompid). A rank stopped from
// outside keeps its stream open and silent, and is killed.
//
// What is detected is a process that does not run: stopped, or never
// scheduled for the timeout. The beats come from a goroutine of their
// own, so a rank that computes without calling MPI, or one deadlocked in
// its own code, still beats.

// liveness is the detector's state: the ranks watched and when each last
// beat. It is pure logic over the time it is given; the daemon holds it
// under d.mu.
type liveness struct {
	timeout time.Duration
	watched map[int]*watch
	checked time.Time // the last overdue
}

// watch is one watched rank.
type watch struct {
	streams  int       // its open Heartbeat streams (a reattach may overlap the old one's end)
	last     time.Time // its last beat, or the opening of a stream
	reported bool      // overdue returned it already
}

// silence is a rank overdue: how long it has been silent.
type silence struct {
	rank int
	for_ time.Duration
}

func newLiveness(timeout time.Duration) *liveness {
	return &liveness{timeout: timeout, watched: map[int]*watch{}}
}

// open starts (or continues) watching rank: a stream opened at now.
func (l *liveness) open(rank int, now time.Time) {
	w := l.watched[rank]
	if w == nil {
		w = &watch{}
		l.watched[rank] = w
	}
	w.streams++
	w.last, w.reported = now, false
}

// beat records one of rank's beats at now.
func (l *liveness) beat(rank int, now time.Time) {
	if w := l.watched[rank]; w != nil && now.After(w.last) {
		w.last, w.reported = now, false
	}
}

// close ends one of rank's streams; with the last, rank is no longer
// watched (paused) until it opens another.
func (l *liveness) close(rank int) {
	w := l.watched[rank]
	if w == nil {
		return
	}
	if w.streams--; w.streams <= 0 {
		delete(l.watched, rank)
	}
}

// overdue returns the ranks silent for the timeout at now, each once per
// silence (a beat or a new stream makes it count again). It is called
// every checkEvery; when the call before was more than half the timeout
// ago, gompid itself did not run meanwhile (stopped, starved of the
// processor): the ranks' beats may wait unread in its sockets, so their
// silence is not theirs, and every watched rank's clock starts again.
func (l *liveness) overdue(now time.Time) []silence {
	if l.timeout <= 0 {
		return nil
	}
	stalled := !l.checked.IsZero() && now.Sub(l.checked) > l.timeout/2
	l.checked = now
	if stalled {
		for _, w := range l.watched {
			w.last = now
		}
		return nil
	}
	var out []silence
	for r, w := range l.watched {
		if s := now.Sub(w.last); !w.reported && s >= l.timeout {
			w.reported = true
			out = append(out, silence{rank: r, for_: s})
		}
	}
	return out
}

// checkEvery is how often the daemon looks for silent ranks: a twentieth
// of the timeout, so detection takes at most 5 % more than the timeout,
// between 10ms and 1s.
func checkEvery(timeout time.Duration) time.Duration {
	return min(max(timeout/20, 10*time.Millisecond), time.Second)
}

// detectorOn reports whether the job's parameters turn the detector on.
func (d *daemon) detectorOn() bool {
	return d.vals.Duration(plm.ParamRankHBPeriod) > 0 && d.vals.Duration(plm.ParamRankHBTimeout) > 0
}

// watchRanks kills the ranks that stay silent for the timeout. Its owner
// is Run; it ends with ctx or when gompirun is gone.
func (d *daemon) watchRanks(ctx context.Context) {
	if !d.detectorOn() {
		return
	}
	tick := time.NewTicker(checkEvery(d.vals.Duration(plm.ParamRankHBTimeout)))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.ports.gone:
			return
		case now := <-tick.C:
			d.killSilent(now)
		}
	}
}

// killSilent kills the ranks overdue at now, recording why on their
// records so the reaper reports it with their exit.
func (d *daemon) killSilent(now time.Time) {
	d.mu.Lock()
	var silent []silence
	if d.live != nil {
		silent = d.live.overdue(now)
	}
	var kill []*rank
	for _, s := range silent {
		rk, ok := d.ranks[s.rank]
		if !ok || rk.pid == 0 || rk.phase == rankExited || rk.killed || rk.termDumped {
			continue
		}
		rk.unresponsive = fmt.Sprintf("unresponsive for %s (no heartbeat to gompid; errmgr_base_rank_heartbeat_timeout %s): killed by gompid",
			s.for_.Round(100*time.Millisecond), d.live.timeout)
		kill = append(kill, rk)
	}
	d.mu.Unlock()
	for _, rk := range kill {
		d.log.Warn("rank unresponsive; killing it", "rank", rk.rank, "pid", rk.pid, "why", rk.unresponsive)
		if err := d.ports.signal(rk.pid, syscall.SIGKILL); err != nil {
			d.log.Error("could not kill an unresponsive rank", "rank", rk.rank, "err", err)
		}
	}
}

// Heartbeat watches one of a rank's heartbeat streams until it ends.
func (s *rankService) Heartbeat(stream grpc.ClientStreamingServer[pb.RankBeat, pb.HeartbeatResponse]) error {
	d := s.d
	first, err := stream.Recv()
	if err != nil {
		return nil
	}
	d.mu.Lock()
	if _, err := s.ours(first.Rank); err != nil {
		d.mu.Unlock()
		return err
	}
	if d.live == nil {
		d.live = newLiveness(d.vals.Duration(plm.ParamRankHBTimeout))
	}
	r := int(first.Rank)
	d.live.open(r, time.Now())
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.live.close(r)
		d.mu.Unlock()
	}()
	for {
		if _, err := stream.Recv(); err != nil {
			if err == io.EOF {
				return stream.SendAndClose(&pb.HeartbeatResponse{})
			}
			return nil // the rank detached, ended or was killed
		}
		d.mu.Lock()
		d.live.beat(r, time.Now())
		d.mu.Unlock()
	}
}
