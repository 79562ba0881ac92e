package hnp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"gompi/frameworks/crs"
	"gompi/frameworks/filem"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
)

// gompirun's part in checkpoints: it selects the job's SnapC; when the
// module coordinates (full) it runs the job's global coordinator, whose
// link to the daemons goes through the job's event loop, and serves the
// tools' checkpoint calls and the ranks' own requests. With snapc none
// every request is refused with snapc.ErrDisabled's advice.

// Restart says which snapshot a restarted job starts from (gompi-restart
// passes it with gompirun's hidden --restart-ref and --restart-seq).
type Restart struct {
	Ref snapshot.Ref
	Seq int
	// Meta reads the reference's metadata (nil: this node's file system).
	Meta snapshot.MetaStore
}

// metaTimeout bounds reading a reference's metadata before a restart (a
// remote one may sit behind an unresponsive server).
const metaTimeout = time.Minute

// termGrace is how long ranks have to end by themselves after a
// checkpoint-and-terminate was committed, before gompirun ends them.
const termGrace = 30 * time.Second

// checkRestart makes sure the snapshot exists, was committed, and holds
// the job's rank count, before anything is launched.
func checkRestart(r *Restart, np int) error {
	ms := r.Meta
	if ms == nil {
		ms = snapshot.ThisNode
	}
	ctx, cancel := context.WithTimeout(context.Background(), metaTimeout)
	defer cancel()
	meta, err := ms.ReadGlobal(ctx, r.Ref)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	point, err := snapshot.ChooseSeq(r.Ref, meta, r.Seq)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	if n := meta.SeqRanks(point.Seq); n != np {
		return fmt.Errorf("restart: sequence %d of %s holds a job of %d ranks, not %d: restart it with -np %d (gompi-restart does; gompi-restart -np %d repartitions it first)", r.Seq, r.Ref, n, np, n, np)
	}
	return nil
}

// startSnapC takes the job's SnapC (selected by gompirun's assembly) and,
// when it coordinates, starts this run's global coordinator.
func (j *job) startSnapC(ctx context.Context) error {
	p := j.o.Proc
	cand := j.mods.SnapC
	j.p.snapc = cand.Module
	coord, ok := cand.Module.(snapc.Coordinator)
	if !ok {
		return nil
	}
	var ref snapshot.Ref
	if j.o.Restart != nil {
		ref = j.o.Restart.Ref // the restarted job continues its reference
	} else {
		dir, err := snapc.GlobalDir(j.vals)
		if err != nil {
			return err
		}
		ref = snapshot.Ref{Dir: dir, Name: snapshot.RefName(j.id)}
		if dir == snapc.GlobalNone {
			if ref, err = noGlobalRef(j.vals, j.m.RankNode, ref.Name); err != nil {
				return err
			}
		} else if !ref.IsRemote() {
			if ref.Dir, err = filepath.Abs(dir); err != nil {
				return fmt.Errorf("%s: %w", snapc.ParamGlobalDir, err)
			}
		}
	}
	var amca []string
	if p.Sources != nil {
		amca = p.Sources.AMCASets()
	}
	// With copies on the nodes, the metadata goes to each node too.
	meta := newReplicaStore(j.o.Meta, j.vals, j.m.RankNode, func(ctx context.Context) (filem.Module, error) {
		c, err := p.Frameworks.FileM.SelectOne(ctx, j.vals, p.Role, p.FrameworkLogger(filem.Name))
		return c.Module, err
	}, p.FrameworkLogger(snapc.Name))
	if c, ok := meta.(io.Closer); ok {
		j.p.replicas = c
	}
	g, err := coord.NewGlobal(snapc.JobSpec{
		Job: j.id, RankNodes: j.m.RankNode, Ref: ref, Settings: j.vals.Changed(), AMCA: amca,
		Launch: crs.Launch{Argv: append([]string{j.program}, j.o.Args...), Dir: j.cwd, Env: j.o.Env},
		Meta:   meta, Values: j.vals, Log: p.FrameworkLogger(snapc.Name), FromOutside: j.mods.CRSFromOutside,
	}, snapcLink{j})
	if err != nil {
		return err
	}
	j.p.global = g
	if every := j.vals.Duration(snapc.ParamPeriodic); every > 0 {
		go j.periodic(g, every, p.FrameworkLogger(snapc.Name))
	}
	return nil
}

// periodic checkpoints the job every interval (snapc_base_periodic) until
// it ends. The interval runs from the end of one checkpoint to the start
// of the next, so a slow checkpoint never queues up behind another.
func (j *job) periodic(g snapc.Global, every time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-j.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := g.Checkpoint(ctx, snapc.Request{}, nil)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && errors.Is(err, snapc.ErrDisabled):
			return
		case err != nil:
			log.Warn("periodic checkpoint failed", "every", every, "err", err)
		default:
			log.Info("periodic checkpoint committed", "ref", res.Ref, "seq", res.Seq, "took", res.Duration)
		}
		t.Reset(every)
	}
}

// snapcLink is the global coordinator's way to the daemons.
type snapcLink struct{ j *job }

type (
	evSnapcSend struct {
		node string
		req  snapc.LocalRequest
		errc chan error
	}
	evTerminate struct{}
	// evStopped: a checkpoint --stop committed, its ranks stay stopped.
	evStopped struct{}
)

func (l snapcLink) Send(node string, req snapc.LocalRequest) error {
	errc := make(chan error, 1)
	if !l.j.send(evSnapcSend{node: node, req: req, errc: errc}) {
		return errors.New("the job is over")
	}
	return <-errc
}

func (l snapcLink) Terminate() { l.j.send(evTerminate{}) }

// snapcSend puts a coordinator's request in a daemon's mailbox.
func (j *job) snapcSend(e evSnapcSend) {
	d, ok := j.daemons[e.node]
	switch {
	case !ok:
		e.errc <- fmt.Errorf("no node %s in this job", e.node)
		return
	case d.box == nil:
		e.errc <- fmt.Errorf("the daemon of node %s has not connected yet (the job is starting): try again", e.node)
		return
	case d.state != daemonRunning:
		e.errc <- fmt.Errorf("the daemon of node %s is %s", e.node, d.state)
		return
	case j.state != jobRunning && e.req.Kind != snapc.LocalCancel:
		e.errc <- fmt.Errorf("the job is %s", j.state)
		return
	}
	// A checkpoint-and-terminate (term.go) starts with its targets (or
	// its dumps, for a CRS that saves ranks from outside) and ends with
	// its withdrawal.
	switch e.req.Kind {
	case snapc.LocalTarget, snapc.LocalDump:
		j.termTarget(d.ranks, e.req.Options.Term)
	case snapc.LocalCancel:
		j.termCancel()
	}
	j.tell(d, &pb.HNPMessage{Body: &pb.HNPMessage_SnapcRequest{SnapcRequest: control.LocalRequestToProto(e.req)}})
	e.errc <- nil
}

// closeSnapC fails the checkpoint in progress and every later one.
func (j *job) closeSnapC(why string) {
	if j.p.global != nil {
		j.p.global.Close(errors.New(why))
	}
	if j.p.replicas != nil { // after the coordinator, its last writer
		j.p.replicas.Close()
	}
}

// Checkpoint serves gompi-checkpoint.
func (s *service) Checkpoint(req *pb.CheckpointRequest, stream grpc.ServerStreamingServer[pb.CheckpointEvent]) error {
	j := s.job()
	ctx := stream.Context()
	opts := control.OptionsFromProto(req.GetOptions())
	var res snapc.Result
	var err error
	if j.p.global == nil {
		res, err = j.p.snapc.Checkpoint(ctx, snapc.Request{Options: opts})
	} else {
		res, err = j.p.global.Checkpoint(ctx, snapc.Request{Options: opts}, func(e snapc.Event) {
			_ = stream.Send(control.EventToProto(e)) // a tool that went away misses the rest
		})
	}
	if err == nil && opts.Stop {
		j.send(evStopped{}) // before the tool hears of the commit, so a gompi-ps after it says so
	}
	final := &pb.CheckpointEvent{Done: true, Phase: string(snapc.PhaseCommit), Seq: int32(res.Seq), Ref: res.Ref, Dir: res.Dir,
		DurationNano: int64(res.Duration), UnixNano: j.p.now().UnixNano()}
	if err != nil {
		final.Phase, final.Seq, final.Error = string(snapc.PhaseFailed), -1, err.Error()
	}
	return stream.Send(final)
}

// Snapshots names the job's reference.
func (s *service) Snapshots(context.Context, *pb.SnapshotsRequest) (*pb.SnapshotsResponse, error) {
	j := s.job()
	if j.p.global == nil {
		_, err := j.p.snapc.Checkpoint(context.Background(), snapc.Request{})
		if err == nil {
			err = snapc.ErrDisabled
		}
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	ref := j.p.global.Ref()
	return &pb.SnapshotsResponse{Dir: ref.Dir, Ref: ref.Name}, nil
}

// evRankCheckpoint is a rank's cr.Checkpoint, relayed by its daemon.
type evRankCheckpoint struct {
	node string
	m    *pb.RankCheckpoint
}

// startRankCheckpoint checks, on the actor, that the asking node runs the
// rank, and runs the request on a goroutine of its own (it lasts as long
// as the checkpoint): that goroutine gets what it needs by value.
func (j *job) startRankCheckpoint(e evRankCheckpoint) {
	var refused error
	if r := e.m.Rank; r < 0 || int(r) >= len(j.m.RankNode) || j.m.RankNode[r] != e.node {
		refused = fmt.Errorf("node %s asked for a checkpoint for rank %d, which it does not run", e.node, r)
	}
	mod, g := j.p.snapc, j.p.global
	j.spawn(func() event {
		return evTell{node: e.node, m: rankCheckpoint(mod, g, e.m, refused)}
	})
}

// rankCheckpoint runs a rank's request (refused, when set, is the
// actor's refusal) and returns the answer to its daemon.
func rankCheckpoint(mod snapc.Module, g snapc.Global, m *pb.RankCheckpoint, refused error) *pb.HNPMessage {
	done := &pb.RankCheckpointDone{Id: m.Id, Seq: -1}
	var res snapc.Result
	err := refused
	switch {
	case err != nil:
	case g == nil:
		_, err = mod.Checkpoint(context.Background(), snapc.Request{Options: control.OptionsFromProto(m.Options)})
		if err == nil {
			err = snapc.ErrDisabled
		}
	default:
		res, err = g.AppCheckpoint(context.Background(), int(m.Rank), m.Target, control.OptionsFromProto(m.Options))
	}
	if err != nil {
		done.Error = err.Error()
	} else {
		done.Seq, done.Ref, done.Dir, done.DurationNano = int32(res.Seq), res.Ref, res.Dir, int64(res.Duration)
	}
	return &pb.HNPMessage{Body: &pb.HNPMessage_RankCheckpointDone{RankCheckpointDone: done}}
}

// layRemoteFileM lays the FileM that reaches a remote global snapshot
// folder (filem.Infer: sftp for an sftp:// URL, unless filem is set) under
// the job's explicit parameters before anything is selected: gompirun
// writes the reference's metadata through it and every node's daemon
// drains its ranks' snapshots with it, so it travels with the job. A
// restarted job is handed what reaches its reference by gompi-restart.
func layRemoteFileM(o Options) error {
	if o.Restart != nil {
		return nil
	}
	dir, err := snapc.GlobalDir(o.Proc.Values)
	if err != nil {
		return nil // no folder at all: the checkpoint that needs one says so
	}
	l, err := filem.ParseLocation(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", snapc.ParamGlobalDir, err)
	}
	over, err := filem.Infer(l, o.Proc.Values)
	if err != nil {
		return fmt.Errorf("%s: %w", snapc.ParamGlobalDir, err)
	}
	return o.Proc.LayInferred(over)
}

// remover is a global coordinator that removes sequences of its
// reference between checkpoints (snapc/full's does; a plugin's may not).
type remover interface {
	Remove(ctx context.Context, r snapshot.Removal, dryRun bool) ([]int, []snapshot.Kept, error)
}

// Remove serves gompi-checkpoint --remove and --prune: the coordinator
// removes, so the removal never races its rewrites of the metadata.
func (s *service) Remove(ctx context.Context, req *pb.RemoveRequest) (*pb.RemoveResponse, error) {
	j := s.job()
	if j.p.global == nil {
		return nil, status.Error(codes.FailedPrecondition, snapc.ErrDisabled.Error())
	}
	rm, ok := j.p.global.(remover)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this job's snapc component cannot remove sequences: wait for the job to end and give gompi-checkpoint its reference")
	}
	gone, kept, err := rm.Remove(ctx, snapshot.Removal{Seq: int(req.GetSeq()), Keep: int(req.GetKeep())}, req.GetDryRun())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, status.Error(codes.NotFound, err.Error())
	case err != nil:
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	ref := j.p.global.Ref()
	resp := &pb.RemoveResponse{Dir: ref.Dir, Ref: ref.Name}
	for _, seq := range gone {
		resp.Removed = append(resp.Removed, int32(seq))
	}
	for _, k := range kept {
		kf := &pb.KeptFolder{Seq: int32(k.Seq)}
		for _, b := range k.By {
			kf.By = append(kf.By, int32(b))
		}
		resp.Kept = append(resp.Kept, kf)
	}
	return resp, nil
}
