package control

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	pb "gompi/rte/control/proto"
)

func TestSnapcWireRoundTrip(t *testing.T) {
	for _, lr := range []snapc.LocalRequest{
		{ID: 7, Kind: snapc.LocalTarget, Seq: 3, Ref: snapshot.Ref{Dir: "/g", Name: "r.ckpt"}, Target: 12, Options: crs.Options{Term: true}},
		{ID: 8, Kind: snapc.LocalTarget, Seq: 4, Ref: snapshot.Ref{Dir: "/g", Name: "r.ckpt"}, Target: 13, Ranks: []int{2, 3}},
		{ID: 8, Kind: snapc.LocalRelease, Seq: 4, Leave: []int{2}, Peers: map[int]map[string]string{2: {"node": "n3", "btl_tcp": "127.0.0.1:5"}}},
		{ID: 9, Kind: snapc.LocalDump, Seq: 5, Ref: snapshot.Ref{Dir: "/g", Name: "r.ckpt"}, Options: crs.Options{Stop: true}},
	} {
		if got, err := LocalRequestFromProto(LocalRequestToProto(lr)); err != nil || !reflect.DeepEqual(got, lr) {
			t.Errorf("local request: %+v %v", got, err)
		}
	}
	rep := snapc.LocalReply{ID: 7, Kind: snapc.LocalSync, Node: "n2", Ranks: []snapc.RankReply{{Rank: 2, Count: 4, Checkpointable: true, Reason: "r", Dir: "/d", CRS: "self", Err: "e"}}}
	if got, err := LocalReplyFromProto(LocalReplyToProto(rep), "n2", 4); err != nil || !reflect.DeepEqual(got, rep) {
		t.Errorf("local reply: %+v %v", got, err)
	}
	for _, ar := range []snapc.AppRequest{
		{ID: 9, Kind: snapc.Target, Target: 5, Seq: 1, Dir: "/d", Options: crs.Options{Stop: true}},
		{ID: 10, Kind: snapc.Target, Target: 6, Seq: 2, Migrate: []int{1}},
		{ID: 10, Kind: snapc.ReleaseHold, Leave: true},
		{ID: 10, Kind: snapc.ReleaseHold, Peers: map[int]map[string]string{1: {"node": "n3"}}},
		{ID: 11, Kind: snapc.Quiesce, Seq: 3},
	} {
		if got, err := AppRequestFromProto(AppRequestToProto(ar)); err != nil || !reflect.DeepEqual(got, ar) {
			t.Errorf("app request: %+v %v", got, err)
		}
	}
	ap := snapc.AppReply{ID: 9, Kind: snapc.Query, Count: 3, Checkpointable: true, Reason: "x", Err: "y"}
	if got, err := AppReplyFromProto(AppReplyToProto(1, ap)); err != nil || got != ap {
		t.Errorf("app reply: %+v %v", got, err)
	}
	ev := snapc.Event{Phase: snapc.PhaseLocalWrite, Node: "n1", Seq: 2, Detail: "d", Time: time.Unix(5, 6)}
	if got := EventFromProto(EventToProto(ev)); !got.Time.Equal(ev.Time) || got.Phase != ev.Phase || got.Node != "n1" || got.Seq != 2 {
		t.Errorf("event: %+v", got)
	}
}

func TestSnapcWireRefuses(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"local kind", second(LocalRequestFromProto(&pb.SnapcRequest{Kind: 99})), "unknown kind 99"},
		{"local seq", second(LocalRequestFromProto(&pb.SnapcRequest{Kind: int32(snapc.LocalTarget), Seq: -2})), "sequence -2"},
		{"reply other node", second(LocalReplyFromProto(&pb.SnapcReply{Kind: 1, Node: "n1"}, "n2", 4)), "answered as node \"n1\""},
		{"reply rank", second(LocalReplyFromProto(&pb.SnapcReply{Kind: 1, Node: "n2", Ranks: []*pb.SnapcRankReply{{Rank: 4}}}, "n2", 4)), "rank 4 of a job of 4"},
		{"app kind", second(AppRequestFromProto(&pb.AppRequestMsg{Kind: -1})), "unknown kind -1"},
		{"app target", second(AppRequestFromProto(&pb.AppRequestMsg{Kind: int32(snapc.Target), Target: 3})), "directory \"\""},
		{"reply kind", second(AppReplyFromProto(&pb.AppReplyMsg{Kind: 3})), "unknown kind 3"},
		{"result", second(ResultFromProto(&pb.CheckpointEvent{Done: true, Seq: 1})), "without a reference"},
		{"result error", second(ResultFromProto(&pb.CheckpointEvent{Done: true, Error: "boom"})), "boom"},
	}
	for _, tt := range tests {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, tt.err, tt.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// FuzzSnapcWire feeds arbitrary bytes to each checkpoint message: what is
// accepted converts back to the same message.
func FuzzSnapcWire(f *testing.F) {
	for _, m := range []proto.Message{
		LocalRequestToProto(snapc.LocalRequest{ID: 1, Kind: snapc.LocalQuery, Ref: snapshot.Ref{Dir: "/a", Name: "b"}}),
		LocalReplyToProto(snapc.LocalReply{ID: 1, Kind: snapc.LocalQuery, Node: "n", Ranks: []snapc.RankReply{{Rank: 1}}}),
		AppRequestToProto(snapc.AppRequest{ID: 2, Kind: snapc.Target, Target: 3, Dir: "/d"}),
		AppReplyToProto(0, snapc.AppReply{ID: 2, Kind: snapc.Cancel}),
		LocalRequestToProto(snapc.LocalRequest{ID: 3, Kind: snapc.LocalRelease, Leave: []int{1}, Peers: map[int]map[string]string{1: {"node": "n2"}}}),
		AppRequestToProto(snapc.AppRequest{ID: 4, Kind: snapc.Target, Target: 3, Migrate: []int{1, 2}}),
		AppRequestToProto(snapc.AppRequest{ID: 4, Kind: snapc.ReleaseHold, Leave: true, Peers: map[int]map[string]string{2: {"btl_tcp": "x"}}}),
	} {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var lr pb.SnapcRequest
		if proto.Unmarshal(b, &lr) == nil {
			if r, err := LocalRequestFromProto(&lr); err == nil {
				if again, err := LocalRequestFromProto(LocalRequestToProto(r)); err != nil || !reflect.DeepEqual(again, r) {
					t.Fatalf("local request %+v: %+v %v", r, again, err)
				}
			}
		}
		var rep pb.SnapcReply
		if proto.Unmarshal(b, &rep) == nil {
			if r, err := LocalReplyFromProto(&rep, rep.GetNode(), 8); err == nil {
				if again, err := LocalReplyFromProto(LocalReplyToProto(r), r.Node, 8); err != nil || !reflect.DeepEqual(again, r) {
					t.Fatalf("local reply %+v: %+v %v", r, again, err)
				}
			}
		}
		var ar pb.AppRequestMsg
		if proto.Unmarshal(b, &ar) == nil {
			if r, err := AppRequestFromProto(&ar); err == nil {
				if again, err := AppRequestFromProto(AppRequestToProto(r)); err != nil || !reflect.DeepEqual(again, r) {
					t.Fatalf("app request %+v: %+v %v", r, again, err)
				}
			}
		}
		var ap pb.AppReplyMsg
		if proto.Unmarshal(b, &ap) == nil {
			if r, err := AppReplyFromProto(&ap); err == nil {
				if again, err := AppReplyFromProto(AppReplyToProto(int(ap.GetRank()), r)); err != nil || again != r {
					t.Fatalf("app reply %+v: %+v %v", r, again, err)
				}
			}
		}
	})
}
