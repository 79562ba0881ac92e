package daemon

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"gompi/frameworks/crs"
	"gompi/rte"
	pb "gompi/rte/control/proto"
)

// The daemon's part in migrations: it starts ranks moved to its node while
// the job runs (a Launch with migrate), answers their rejoin once gompirun
// has every moved rank's endpoints, forgets ranks moved away (MoveRanks),
// and forwards a rank's cr.Migrate to gompirun.

// migState is the daemon's migration state, under d.mu.
type migState struct {
	rejoin  map[int32]bool // ranks started by a migration, until they rejoined
	waiting []chan *pb.Rejoined
	nextID  uint64
	asks    map[uint64]chan *pb.RankMigrateDone
}

// launchMore starts ranks moved to this node by a migration.
func (d *daemon) launchMore(ctx context.Context, l *pb.Launch) {
	d.mu.Lock()
	if d.launch == nil {
		d.mu.Unlock()
		d.log.Error("migration launch before the job's launch; ignored")
		return
	}
	// The job's launch record gains the ranks; program, args and env stay.
	nl := proto.Clone(d.launch).(*pb.Launch)
	// A rank restored from its dump (a crs.Restorer's) does not rejoin:
	// it exchanges its new endpoints with every rank as it resumes.
	_, restored := d.cr.crs.(crs.Restorer)
	for _, r := range l.Ranks {
		if !slices.Contains(nl.Ranks, r) {
			nl.Ranks = append(nl.Ranks, r)
		}
		d.mig.rejoin[r] = !restored
	}
	slices.Sort(nl.Ranks)
	nl.RankNodes = l.RankNodes
	d.launch = nl
	ranks := toInts(nl.Ranks)
	d.mu.Unlock()
	if loc := d.localCoord(); loc != nil {
		loc.SetRanks(ranks)
	}
	start := proto.Clone(nl).(*pb.Launch)
	start.Restart = l.Restart
	// The moved ranks join the ranks that run on: they get the data-plane
	// secret gompirun sent with them, the current generation's.
	start.DataSecret = l.DataSecret
	env := append(d.rankEnv(nl), rte.EnvRestartMigrate+"=1")
	for _, r := range l.Ranks {
		d.startRank(ctx, start, int(r), env)
	}
}

// moveRanks forgets the ranks that left this node and learns where every
// rank runs now.
func (d *daemon) moveRanks(m *pb.MoveRanks) {
	d.mu.Lock()
	if d.launch == nil {
		d.mu.Unlock()
		return
	}
	nl := proto.Clone(d.launch).(*pb.Launch)
	// MoveRanks reaches every daemon: those the ranks moved to keep them.
	nl.Ranks = slices.DeleteFunc(nl.Ranks, func(r int32) bool {
		return slices.Contains(m.Out, r) && int(r) < len(m.RankNodes) && m.RankNodes[r] != d.node
	})
	nl.RankNodes = m.RankNodes
	d.launch = nl
	ranks := toInts(nl.Ranks)
	// Fences the moved ranks no longer hold up.
	sends := d.readyContributionsLocked()
	d.mu.Unlock()
	if loc := d.localCoord(); loc != nil {
		loc.SetRanks(ranks)
	}
	for _, c := range sends {
		d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Fence{Fence: c}})
	}
}

func toInts(in []int32) []int {
	out := make([]int, len(in))
	for i, r := range in {
		out[i] = int(r)
	}
	return out
}

// Rejoin is a moved rank's modex: its endpoints go to gompirun, and the
// answer waits for every moved rank's.
func (s *rankService) Rejoin(ctx context.Context, req *pb.FenceRequest) (*pb.FenceResponse, error) {
	d := s.d
	d.mu.Lock()
	if _, err := s.ours(req.Rank); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	if !d.mig.rejoin[req.Rank] {
		d.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "gompid: rank %d was not started by a migration: it joins the job with the modex", req.Rank)
	}
	delete(d.mig.rejoin, req.Rank)
	c := make(chan *pb.Rejoined, 1)
	d.mig.waiting = append(d.mig.waiting, c)
	d.mu.Unlock()
	d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Rejoin{Rejoin: &pb.RankData{Rank: req.Rank, Data: req.Data}}})
	select {
	case r := <-c:
		return &pb.FenceResponse{Entries: r.Entries, Failed: r.Failed, Seq: r.FenceSeq}, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-d.ports.gone:
		return nil, status.Error(codes.Unavailable, "gompid: lost contact with gompirun")
	}
}

// rejoined answers every rank of this node waiting in Rejoin.
func (d *daemon) rejoined(r *pb.Rejoined) {
	d.mu.Lock()
	w := d.mig.waiting
	d.mig.waiting = nil
	d.mu.Unlock()
	for _, c := range w {
		c <- r
	}
}

// Migrate forwards a rank's cr.Migrate to gompirun and returns its answer
// (accepted, or why not).
func (s *rankService) Migrate(ctx context.Context, req *pb.MigrateRequest) (*pb.MigrateResponse, error) {
	d := s.d
	d.mu.Lock()
	if _, err := s.ours(req.Rank); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	d.mig.nextID++
	id := d.mig.nextID
	c := make(chan *pb.RankMigrateDone, 1)
	d.mig.asks[id] = c
	d.mu.Unlock()
	d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_RankMigrate{RankMigrate: &pb.RankMigrate{Id: id, Request: req}}})
	select {
	case done := <-c:
		return &pb.MigrateResponse{Error: done.Error}, nil
	case <-ctx.Done():
		d.mu.Lock()
		delete(d.mig.asks, id)
		d.mu.Unlock()
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-d.ports.gone:
		return nil, status.Error(codes.Unavailable, fmt.Sprintf("gompid on node %s: lost contact with gompirun", d.node))
	}
}

func (d *daemon) rankMigrateDone(m *pb.RankMigrateDone) {
	d.mu.Lock()
	c, ok := d.mig.asks[m.Id]
	delete(d.mig.asks, m.Id)
	d.mu.Unlock()
	if ok {
		c <- m
	}
}
