package daemon

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"gompi/mca/queue"
	pb "gompi/rte/control/proto"
)

// newCommand builds a rank's command. It runs in cwd when that exists on
// this node (as mpirun does), else in the daemon's own directory.
func newCommand(program string, args []string, cwd string) *exec.Cmd {
	cmd := exec.Command(program, args...)
	if st, err := os.Stat(cwd); cwd != "" && err == nil && st.IsDir() {
		cmd.Dir = cwd
	}
	return cmd
}

// rankService serves the ranks of the node.
type rankService struct {
	pb.UnimplementedDaemonServer
	d *daemon
}

// ours returns the rank record, or an error for a rank this daemon does not run.
func (s *rankService) ours(r int32) (*rank, error) {
	d := s.d
	rk, ok := d.ranks[int(r)]
	if !ok || rk.pid == 0 {
		return nil, status.Errorf(codes.NotFound, "gompid: rank %d does not run on node %s", r, d.node)
	}
	return rk, nil
}

func (s *rankService) Hello(_ context.Context, req *pb.HelloRequest) (*pb.HelloResponse, error) {
	d := s.d
	d.mu.Lock()
	rk, err := s.ours(req.Rank)
	if err != nil {
		d.mu.Unlock()
		return nil, err
	}
	first := rk.phase < rankConnected
	if first {
		rk.phase = rankConnected
	}
	l := d.launch
	d.mu.Unlock()
	if first {
		d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Phase{Phase: &pb.RankPhase{Rank: req.Rank, Phase: pb.Phase_PHASE_CONNECTED}}})
	}
	return &pb.HelloResponse{
		Job: d.job, Rank: req.Rank, Size: l.Size, Node: d.node, NodeDir: d.nodeDir,
		Settings: d.settings, RankNodes: l.RankNodes,
	}, nil
}

func (s *rankService) Fence(ctx context.Context, req *pb.FenceRequest) (*pb.FenceResponse, error) {
	d := s.d
	d.mu.Lock()
	if _, err := s.ours(req.Rank); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	f := d.fenceLocked(req.Seq)
	if _, dup := f.contrib[req.Rank]; dup {
		d.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "gompid: rank %d joined fence %d twice", req.Rank, req.Seq)
	}
	data := req.Data
	if data == nil {
		data = map[string]string{}
	}
	f.contrib[req.Rank] = data
	send := d.contributionLocked(req.Seq, f)
	d.mu.Unlock()
	if send != nil {
		d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Fence{Fence: send}})
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	d.mu.Lock()
	f.readers++
	if f.readers >= d.liveLocalLocked() {
		delete(d.fences, req.Seq)
	}
	d.mu.Unlock()
	return &pb.FenceResponse{Entries: f.result, Failed: f.failed}, nil
}

func (s *rankService) Finalize(_ context.Context, req *pb.FinalizeRequest) (*pb.FinalizeResponse, error) {
	d := s.d
	d.mu.Lock()
	rk, err := s.ours(req.Rank)
	if err != nil {
		d.mu.Unlock()
		return nil, err
	}
	first := rk.phase < rankFinalizing
	if first {
		rk.phase = rankFinalizing
	}
	d.mu.Unlock()
	if first {
		d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Phase{Phase: &pb.RankPhase{Rank: req.Rank, Phase: pb.Phase_PHASE_FINALIZING}}})
	}
	return &pb.FinalizeResponse{}, nil
}

func (s *rankService) Abort(_ context.Context, req *pb.AbortRequest) (*pb.AbortResponse, error) {
	d := s.d
	d.mu.Lock()
	_, err := s.ours(req.Rank)
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	d.log.Info("rank asks to abort the job", "rank", req.Rank, "code", req.Code, "message", req.Message)
	d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Abort{Abort: &pb.RankAbort{Rank: req.Rank, Code: req.Code, Message: req.Message}}})
	return &pb.AbortResponse{}, nil
}

// Events is a rank's stream of notices: the ranks declared failed, those
// declared before it opened first, until the rank or the daemon leaves.
func (s *rankService) Events(req *pb.EventsRequest, stream grpc.ServerStreamingServer[pb.RankEvent]) error {
	d := s.d
	sub := queue.New[*pb.RankEvent]()
	d.mu.Lock()
	if _, err := s.ours(req.Rank); err != nil {
		d.mu.Unlock()
		return err
	}
	// Ranks declared failed before the stream opened come first, one
	// notice per reason.
	byWhy := map[string][]int32{}
	for r, why := range d.failed {
		byWhy[why] = append(byWhy[why], r)
	}
	for _, why := range slices.Sorted(maps.Keys(byWhy)) {
		ranks := byWhy[why]
		slices.Sort(ranks)
		sub.Put(&pb.RankEvent{Failed: ranks, Why: why})
	}
	if d.subs == nil {
		d.subs = map[*eventSub]bool{}
	}
	d.subs[sub] = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.subs, sub)
		d.mu.Unlock()
	}()
	for {
		ev, err := sub.Pop(stream.Context())
		if err != nil {
			return nil // the rank's stream ended
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
}

var _ pb.DaemonServer = (*rankService)(nil)

// String describes a rank for logs.
func (r *rank) String() string { return fmt.Sprintf("rank %d (pid %d)", r.rank, r.pid) }
