package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"gompi/boot"
	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/mca/queue"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
)

// The daemon's part in checkpoints: it hosts the node's local SnapC
// coordinator (when the job's SnapC component coordinates), is its AppPort
// to the ranks' application coordinators (one Requests stream per rank)
// and, when the job's CRS saves ranks from outside, its Dumper (dump.go),
// forwards the ranks' own checkpoint requests to gompirun, and starts the
// ranks of a restarted job from their local snapshots (SStore Fetch)
// through the job's CRS (restart.go).

// crState is the daemon's checkpoint state.
type crState struct {
	log   *slog.Logger // the snapc framework's
	store sstore.Module
	coord snapc.Coordinator // nil: the job's SnapC does not coordinate
	// crs is the job's CRS, which restarts the node's ranks (restart.go)
	// and, when it saves them from outside, dumps them (dump.go); nil,
	// for crsErr, when there is none. crsName is its component's name.
	crs     crs.Module
	crsName string
	crsErr  error

	mu       sync.Mutex
	local    snapc.Local
	apps     map[int]*appConn // a rank's Requests stream owns its queue
	pending  map[uint64]chan *pb.RankCheckpointDone
	nextCkpt uint64
}

// newCRState takes the node's SStore and SnapC modules from the daemon's
// assembled set (boot.AssembleDaemon), which selected and provisioned them.
func newCRState(p *boot.Process, mods *boot.Daemon) *crState {
	cr := &crState{log: p.FrameworkLogger(snapc.Name), store: mods.SStore.Module, apps: map[int]*appConn{}, pending: map[uint64]chan *pb.RankCheckpointDone{}}
	cr.coord, _ = mods.SnapC.Module.(snapc.Coordinator)
	cr.crsErr = mods.CRSErr
	if mods.CRSErr == nil {
		cr.crs, cr.crsName = mods.CRS.Module, mods.CRS.Info.Name
	}
	return cr
}

// startLocal starts the node's local coordinator for the launched ranks.
func (d *daemon) startLocal(l *pb.Launch) error {
	if d.cr.coord == nil {
		return nil
	}
	ranks := make([]int, len(l.Ranks))
	for i, r := range l.Ranks {
		ranks[i] = int(r)
	}
	notify := func(r snapc.LocalReply) {
		d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_SnapcReply{SnapcReply: control.LocalReplyToProto(r)}})
	}
	loc, err := d.cr.coord.NewLocal(snapc.NodeSpec{Node: d.node, Ranks: ranks, Store: nodesStore{d.cr.store, d.jobNodes}, Notify: notify, Values: d.vals, Log: d.cr.log,
		Dumper: d.dumper()}, (*appPort)(d))
	if err != nil {
		return err
	}
	d.cr.mu.Lock()
	d.cr.local = loc
	d.cr.mu.Unlock()
	return nil
}

func (d *daemon) localCoord() snapc.Local {
	d.cr.mu.Lock()
	defer d.cr.mu.Unlock()
	return d.cr.local
}

// snapcRequest runs one request of the global coordinator. Cancel and
// Done are handled at once, in order; the others on their own goroutine,
// since they wait for the ranks.
func (d *daemon) snapcRequest(ctx context.Context, m *pb.SnapcRequest) {
	req, err := control.LocalRequestFromProto(m)
	if err != nil {
		d.log.Warn("bad checkpoint request from gompirun", "err", err)
		return
	}
	loc := d.localCoord()
	reply := func(r snapc.LocalReply) {
		if r.Kind == snapc.LocalCancel || r.Kind == snapc.LocalDone || r.Kind == snapc.LocalRelease {
			return
		}
		d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_SnapcReply{SnapcReply: control.LocalReplyToProto(r)}})
	}
	if loc == nil {
		reply(snapc.LocalReply{ID: req.ID, Kind: req.Kind, Node: d.node,
			Err: fmt.Sprintf("gompid on node %s has no local snapshot coordinator (the job's snapc does not coordinate, or its ranks are not launched)", d.node)})
		return
	}
	if req.Kind == snapc.LocalCancel || req.Kind == snapc.LocalDone || req.Kind == snapc.LocalRelease {
		loc.Handle(ctx, req)
		return
	}
	go func() { reply(loc.Handle(ctx, req)) }()
}

// rankCheckpointDone completes a rank's Checkpoint call.
func (d *daemon) rankCheckpointDone(m *pb.RankCheckpointDone) {
	d.cr.mu.Lock()
	c, ok := d.cr.pending[m.Id]
	delete(d.cr.pending, m.Id)
	d.cr.mu.Unlock()
	if ok {
		c <- m
	}
}

// appGone tells the local coordinator that rank's coordinator is gone.
func (d *daemon) appGone(rank int, why string) {
	if loc := d.localCoord(); loc != nil {
		loc.AppGone(rank, why)
	}
}

// appConn is one rank's application coordinator: an ordered, unbounded
// queue of requests drained by its Requests stream, and gone, closed
// once that stream ended and the rank is no longer registered.
type appConn struct {
	q    *queue.Queue[*pb.AppRequestMsg]
	gone chan struct{}
}

// appLeft waits until rank has no application coordinator registered
// (a rank detaching for a dump closes its stream).
func (cr *crState) appLeft(ctx context.Context, rank int) error {
	cr.mu.Lock()
	a := cr.apps[rank]
	cr.mu.Unlock()
	if a == nil {
		return nil
	}
	select {
	case <-a.gone:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("its checkpoint coordinator's stream to gompid is still open: %w", ctx.Err())
	}
}

// appPort is the daemon as the local coordinator's snapc.AppPort.
type appPort daemon

func (p *appPort) Send(rank int, req snapc.AppRequest) error {
	d := (*daemon)(p)
	d.cr.mu.Lock()
	a := d.cr.apps[rank]
	d.cr.mu.Unlock()
	if a == nil {
		return fmt.Errorf("%w: the rank does not run one (it does not use package cr), has not started it yet, or is finalizing", snapc.ErrNoApp)
	}
	// Dropped when the stream has just ended: AppGone follows and tells
	// the local coordinator.
	a.q.Put(control.AppRequestToProto(req))
	return nil
}

// Requests is a rank's application coordinator's session.
func (s *rankService) Requests(req *pb.AppRequestsRequest, stream grpc.ServerStreamingServer[pb.AppRequestMsg]) error {
	d := s.d
	d.mu.Lock()
	_, err := s.ours(req.Rank)
	d.mu.Unlock()
	if err != nil {
		return err
	}
	rank := int(req.Rank)
	a := &appConn{q: queue.New[*pb.AppRequestMsg](), gone: make(chan struct{})}
	d.cr.mu.Lock()
	if d.cr.apps[rank] != nil {
		d.cr.mu.Unlock()
		return status.Errorf(codes.AlreadyExists, "gompid: rank %d already has a checkpoint coordinator", rank)
	}
	d.cr.apps[rank] = a
	d.cr.mu.Unlock()
	defer d.appLeft(rank, a)
	if err := stream.Send(&pb.AppRequestMsg{Ready: true}); err != nil {
		return err
	}
	for {
		m, err := a.q.Pop(stream.Context())
		if err != nil {
			return nil // the rank's stream ended
		}
		if err := stream.Send(m); err != nil {
			return err
		}
	}
}

// appLeft unregisters rank's application coordinator a, its stream
// ended. That is the rank gone for the local coordinator, unless the rank
// detached to be dumped (dump.go).
func (d *daemon) appLeft(rank int, a *appConn) {
	d.cr.mu.Lock()
	delete(d.cr.apps, rank)
	d.cr.mu.Unlock()
	a.q.Close()
	close(a.gone)
	if life, err := d.lifeOf(rank); err == nil && life.quiescing() {
		d.log.Debug("rank detached for a dump", "rank", rank)
		return
	}
	d.appGone(rank, fmt.Sprintf("rank %d's checkpoint coordinator left (the rank finalized or ended)", rank))
}

// Reply hands a rank's answer to the local coordinator.
func (s *rankService) Reply(_ context.Context, m *pb.AppReplyMsg) (*pb.AppReplyResponse, error) {
	d := s.d
	d.mu.Lock()
	_, err := s.ours(m.Rank)
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	r, err := control.AppReplyFromProto(m)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	loc := d.localCoord()
	if loc == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "gompid: node %s coordinates no checkpoints", d.node)
	}
	loc.AppReply(int(m.Rank), r)
	return &pb.AppReplyResponse{}, nil
}

// Checkpoint forwards a rank's checkpoint request to gompirun and waits
// for the outcome. A rank that stops waiting does not stop the checkpoint.
func (s *rankService) Checkpoint(ctx context.Context, m *pb.RankCheckpointRequest) (*pb.RankCheckpointResponse, error) {
	d := s.d
	d.mu.Lock()
	_, err := s.ours(m.Rank)
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	d.cr.mu.Lock()
	d.cr.nextCkpt++
	id := d.cr.nextCkpt
	c := make(chan *pb.RankCheckpointDone, 1)
	d.cr.pending[id] = c
	d.cr.mu.Unlock()
	d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_RankCheckpoint{RankCheckpoint: &pb.RankCheckpoint{
		Id: id, Rank: m.Rank, Target: m.Target, Options: m.Options}}})
	select {
	case done := <-c:
		return &pb.RankCheckpointResponse{Seq: done.Seq, Ref: done.Ref, Dir: done.Dir, DurationNano: done.DurationNano, Error: done.Error}, nil
	case <-ctx.Done():
		d.cr.mu.Lock()
		delete(d.cr.pending, id)
		d.cr.mu.Unlock()
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-d.ports.gone:
		return nil, status.Error(codes.Unavailable, "gompid: lost contact with gompirun")
	}
}
