package control

import (
	"fmt"
	"time"

	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
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
		Target: r.Target, Options: OptionsToProto(r.Options)}
}

// LocalRequestFromProto converts and checks a global coordinator's request.
func LocalRequestFromProto(m *pb.SnapcRequest) (snapc.LocalRequest, error) {
	k := snapc.LocalKind(m.GetKind())
	if k < snapc.LocalQuery || k > snapc.LocalDone {
		return snapc.LocalRequest{}, fmt.Errorf("control: checkpoint request %d of unknown kind %d (a newer gompirun?)", m.GetId(), m.GetKind())
	}
	if m.GetSeq() < 0 && k != snapc.LocalCancel {
		return snapc.LocalRequest{}, fmt.Errorf("control: checkpoint request %d: sequence %d", m.GetId(), m.GetSeq())
	}
	return snapc.LocalRequest{ID: m.GetId(), Kind: k, Seq: int(m.GetSeq()), Ref: sstore.Ref{Dir: m.GetRefDir(), Name: m.GetRefName()},
		Target: m.GetTarget(), Options: OptionsFromProto(m.GetOptions())}, nil
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
	return &pb.AppRequestMsg{Id: r.ID, Kind: int32(r.Kind), Target: r.Target, Seq: int32(r.Seq), Dir: r.Dir, Options: OptionsToProto(r.Options)}
}

// AppRequestFromProto converts and checks a request for a rank's coordinator.
func AppRequestFromProto(m *pb.AppRequestMsg) (snapc.AppRequest, error) {
	k := snapc.AppRequestKind(m.GetKind())
	if k < snapc.Query || k > snapc.Cancel {
		return snapc.AppRequest{}, fmt.Errorf("control: checkpoint request %d of unknown kind %d (a newer gompid?)", m.GetId(), m.GetKind())
	}
	if k == snapc.Target && (m.GetDir() == "" || m.GetTarget() == 0 || m.GetSeq() < 0) {
		return snapc.AppRequest{}, fmt.Errorf("control: checkpoint request %d: target %d, sequence %d, directory %q", m.GetId(), m.GetTarget(), m.GetSeq(), m.GetDir())
	}
	return snapc.AppRequest{ID: m.GetId(), Kind: k, Target: m.GetTarget(), Seq: int(m.GetSeq()), Dir: m.GetDir(), Options: OptionsFromProto(m.GetOptions())}, nil
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
