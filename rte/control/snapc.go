package control

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	pb "gompi/rte/control/proto"
)

// The checkpoint messages of the control plane and the snapc types they
// carry. Each FromProto checks what a peer sent (kinds, ranks, sequence
// numbers) so the coordinators only ever see well-formed requests.

// OptionsToProto converts checkpoint options for the wire.
func OptionsToProto(o crs.Options) *pb.CROptions { return &pb.CROptions{Term: o.Term, Stop: o.Stop} }

// OptionsFromProto converts checkpoint options from the wire.
func OptionsFromProto(o *pb.CROptions) crs.Options {
	return crs.Options{Term: o.GetTerm(), Stop: o.GetStop()}
}

// LocalRequestToProto converts a global coordinator's request.
func LocalRequestToProto(r snapc.LocalRequest) *pb.SnapcRequest {
	return &pb.SnapcRequest{Id: r.ID, Kind: int32(r.Kind), Seq: int32(r.Seq), RefDir: r.Ref.Dir, RefName: r.Ref.Name,
		Target: r.Target, Options: OptionsToProto(r.Options), Ranks: ranksToProto(r.Ranks), Leave: ranksToProto(r.Leave),
		Peers: PeersToProto(r.Peers)}
}

func ranksToProto(in []int) []int32 {
	var out []int32
	for _, r := range in {
		out = append(out, int32(r))
	}
	return out
}

func ranksFromProto(in []int32) ([]int, error) {
	var out []int
	for _, r := range in {
		if r < 0 {
			return nil, fmt.Errorf("rank %d", r)
		}
		out = append(out, int(r))
	}
	return out, nil
}

// PeersToProto converts moved ranks' endpoints, by rank, for the wire.
func PeersToProto(in map[int]map[string]string) []*pb.RankData {
	var out []*pb.RankData
	for _, r := range slices.Sorted(maps.Keys(in)) {
		out = append(out, &pb.RankData{Rank: int32(r), Data: in[r]})
	}
	return out
}

// PeersFromProto converts and checks moved ranks' endpoints.
func PeersFromProto(in []*pb.RankData) (map[int]map[string]string, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[int]map[string]string, len(in))
	for _, e := range in {
		if e.GetRank() < 0 {
			return nil, fmt.Errorf("endpoints of rank %d", e.GetRank())
		}
		if _, dup := out[int(e.GetRank())]; dup {
			return nil, fmt.Errorf("endpoints of rank %d twice", e.GetRank())
		}
		out[int(e.GetRank())] = e.GetData()
	}
	return out, nil
}

// LocalRequestFromProto converts and checks a global coordinator's request.
func LocalRequestFromProto(m *pb.SnapcRequest) (snapc.LocalRequest, error) {
	k := snapc.LocalKind(m.GetKind())
	if k < snapc.LocalQuery || k > snapc.LocalDump || k == snapc.LocalProgress {
		return snapc.LocalRequest{}, fmt.Errorf("control: checkpoint request %d of unknown kind %d (a newer gompirun?)", m.GetId(), m.GetKind())
	}
	if m.GetSeq() < 0 && k != snapc.LocalCancel {
		return snapc.LocalRequest{}, fmt.Errorf("control: checkpoint request %d: sequence %d", m.GetId(), m.GetSeq())
	}
	ranks, err := ranksFromProto(m.GetRanks())
	if err == nil {
		var leave []int
		if leave, err = ranksFromProto(m.GetLeave()); err == nil {
			var peers map[int]map[string]string
			if peers, err = PeersFromProto(m.GetPeers()); err == nil {
				return snapc.LocalRequest{ID: m.GetId(), Kind: k, Seq: int(m.GetSeq()), Ref: snapshot.Ref{Dir: m.GetRefDir(), Name: m.GetRefName()},
					Target: m.GetTarget(), Options: OptionsFromProto(m.GetOptions()), Ranks: ranks, Leave: leave, Peers: peers}, nil
			}
		}
	}
	return snapc.LocalRequest{}, fmt.Errorf("control: checkpoint request %d: %w", m.GetId(), err)
}

// LocalReplyToProto converts a node's reply.
func LocalReplyToProto(r snapc.LocalReply) *pb.SnapcReply {
	m := &pb.SnapcReply{Id: r.ID, Kind: int32(r.Kind), Node: r.Node, Error: r.Err, Progress: ProgressToProto(r.Progress)}
	for _, rr := range r.Ranks {
		m.Ranks = append(m.Ranks, &pb.SnapcRankReply{Rank: int32(rr.Rank), Count: rr.Count, Checkpointable: rr.Checkpointable,
			Reason: rr.Reason, Dir: rr.Dir, Crs: rr.CRS, Error: rr.Err})
	}
	return m
}

// LocalReplyFromProto converts and checks a node's reply; node is the
// daemon that sent it (a reply cannot speak for another node).
func LocalReplyFromProto(m *pb.SnapcReply, node string, size int) (snapc.LocalReply, error) {
	k := snapc.LocalKind(m.GetKind())
	if k < snapc.LocalQuery || k > snapc.LocalProgress {
		return snapc.LocalReply{}, fmt.Errorf("control: node %s: checkpoint reply of unknown kind %d", node, m.GetKind())
	}
	if m.GetNode() != node {
		return snapc.LocalReply{}, fmt.Errorf("control: node %s answered as node %q", node, m.GetNode())
	}
	r := snapc.LocalReply{ID: m.GetId(), Kind: k, Node: node, Err: m.GetError(), Progress: ProgressFromProto(m.GetProgress())}
	for _, rr := range m.GetRanks() {
		if rr.GetRank() < 0 || int(rr.GetRank()) >= size {
			return snapc.LocalReply{}, fmt.Errorf("control: node %s answered for rank %d of a job of %d", node, rr.GetRank(), size)
		}
		r.Ranks = append(r.Ranks, snapc.RankReply{Rank: int(rr.GetRank()), Count: rr.GetCount(), Checkpointable: rr.GetCheckpointable(),
			Reason: rr.GetReason(), Dir: rr.GetDir(), CRS: rr.GetCrs(), Err: rr.GetError()})
	}
	return r, nil
}

// AppRequestToProto converts a request for a rank's coordinator.
func AppRequestToProto(r snapc.AppRequest) *pb.AppRequestMsg {
	return &pb.AppRequestMsg{Id: r.ID, Kind: int32(r.Kind), Target: r.Target, Seq: int32(r.Seq), Dir: r.Dir, Options: OptionsToProto(r.Options),
		Migrate: ranksToProto(r.Migrate), Leave: r.Leave, Peers: PeersToProto(r.Peers)}
}

// AppRequestFromProto converts and checks a request for a rank's coordinator.
func AppRequestFromProto(m *pb.AppRequestMsg) (snapc.AppRequest, error) {
	k := snapc.AppRequestKind(m.GetKind())
	if k < snapc.Query || k > snapc.Rollback {
		return snapc.AppRequest{}, fmt.Errorf("control: checkpoint request %d of unknown kind %d (a newer gompid?)", m.GetId(), m.GetKind())
	}
	// A migration's target has no directory for the ranks it holds.
	if k == snapc.Target && ((m.GetDir() == "" && len(m.GetMigrate()) == 0) || m.GetTarget() == 0 || m.GetSeq() < 0) {
		return snapc.AppRequest{}, fmt.Errorf("control: checkpoint request %d: target %d, sequence %d, directory %q", m.GetId(), m.GetTarget(), m.GetSeq(), m.GetDir())
	}
	if k == snapc.Rollback && (m.GetDir() == "" || m.GetTarget() == 0 || m.GetSeq() < 0) {
		return snapc.AppRequest{}, fmt.Errorf("control: rollback request %d: epoch %d, sequence %d, directory %q", m.GetId(), m.GetTarget(), m.GetSeq(), m.GetDir())
	}
	mig, err := ranksFromProto(m.GetMigrate())
	if err != nil {
		return snapc.AppRequest{}, fmt.Errorf("control: checkpoint request %d: migration of %w", m.GetId(), err)
	}
	peers, err := PeersFromProto(m.GetPeers())
	if err != nil {
		return snapc.AppRequest{}, fmt.Errorf("control: checkpoint request %d: %w", m.GetId(), err)
	}
	return snapc.AppRequest{ID: m.GetId(), Kind: k, Target: m.GetTarget(), Seq: int(m.GetSeq()), Dir: m.GetDir(), Options: OptionsFromProto(m.GetOptions()),
		Migrate: mig, Leave: m.GetLeave(), Peers: peers}, nil
}

// AppReplyToProto converts a rank's answer.
func AppReplyToProto(rank int, r snapc.AppReply) *pb.AppReplyMsg {
	return &pb.AppReplyMsg{Rank: int32(rank), Id: r.ID, Kind: int32(r.Kind), Count: r.Count, Checkpointable: r.Checkpointable,
		Reason: r.Reason, Error: r.Err}
}

// AppReplyFromProto converts and checks a rank's answer.
func AppReplyFromProto(m *pb.AppReplyMsg) (snapc.AppReply, error) {
	k := snapc.AppRequestKind(m.GetKind())
	if k < snapc.Query || k > snapc.Cancel {
		return snapc.AppReply{}, fmt.Errorf("control: rank %d answered with unknown kind %d", m.GetRank(), m.GetKind())
	}
	return snapc.AppReply{ID: m.GetId(), Kind: k, Count: m.GetCount(), Checkpointable: m.GetCheckpointable(), Reason: m.GetReason(), Err: m.GetError()}, nil
}

// EventToProto converts a phase's end.
func EventToProto(e snapc.Event) *pb.CheckpointEvent {
	return &pb.CheckpointEvent{Phase: string(e.Phase), Node: e.Node, Seq: int32(e.Seq), Detail: e.Detail, UnixNano: e.Time.UnixNano(),
		Progress: ProgressToProto(e.Progress)}
}

// ProgressToProto converts a drain's progress (nil stays nil).
func ProgressToProto(p *sstore.Progress) *pb.DrainProgress {
	if p == nil {
		return nil
	}
	return &pb.DrainProgress{Files: int32(p.Files), FilesDone: int32(p.FilesDone), Bytes: p.Bytes, BytesDone: p.BytesDone,
		Stored: p.Stored, ElapsedNano: int64(p.Elapsed)}
}

// ProgressFromProto converts a drain's progress (nil stays nil).
func ProgressFromProto(m *pb.DrainProgress) *sstore.Progress {
	if m == nil {
		return nil
	}
	return &sstore.Progress{Files: int(m.GetFiles()), FilesDone: int(m.GetFilesDone()), Bytes: m.GetBytes(), BytesDone: m.GetBytesDone(),
		Stored: m.GetStored(), Elapsed: time.Duration(m.GetElapsedNano())}
}

// EventFromProto converts a phase's end.
func EventFromProto(m *pb.CheckpointEvent) snapc.Event {
	return snapc.Event{Phase: snapc.Phase(m.GetPhase()), Node: m.GetNode(), Seq: int(m.GetSeq()), Detail: m.GetDetail(),
		Time: time.Unix(0, m.GetUnixNano()), Progress: ProgressFromProto(m.GetProgress())}
}

// ResultFromProto reads the outcome of a checkpoint from its last event.
func ResultFromProto(m *pb.CheckpointEvent) (snapc.Result, error) {
	if m.GetError() != "" {
		return snapc.Result{}, fmt.Errorf("%s", m.GetError())
	}
	if m.GetRef() == "" || m.GetSeq() < 0 {
		return snapc.Result{}, fmt.Errorf("control: checkpoint outcome without a reference (seq %d, ref %q)", m.GetSeq(), m.GetRef())
	}
	return snapc.Result{Ref: m.GetRef(), Dir: m.GetDir(), Seq: int(m.GetSeq()), Duration: time.Duration(m.GetDurationNano())}, nil
}
