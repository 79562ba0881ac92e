package rankclient

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"gompi/rte"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
)

// eventsDaemon serves rank 1 of 4 and sends scripted failure notices:
// the first batch at once, the second when more is closed.
type eventsDaemon struct {
	pb.UnimplementedDaemonServer
	first, second []*pb.RankEvent
	more          chan struct{}
	ended         chan struct{} // the events stream's context ended
}

func (d *eventsDaemon) Hello(_ context.Context, r *pb.HelloRequest) (*pb.HelloResponse, error) {
	return &pb.HelloResponse{Job: "abcd0123", Rank: r.Rank, Size: 4, Node: "n1", NodeDir: "/tmp", RankNodes: []string{"n1", "n1", "n2", "n2"}}, nil
}

func (d *eventsDaemon) Events(_ *pb.EventsRequest, s grpc.ServerStreamingServer[pb.RankEvent]) error {
	defer close(d.ended)
	for _, batch := range [][]*pb.RankEvent{d.first, d.second} {
		for _, ev := range batch {
			if err := s.Send(ev); err != nil {
				return err
			}
		}
		select {
		case <-d.more:
		case <-s.Context().Done():
			return nil
		}
	}
	<-s.Context().Done()
	return nil
}

func serveDaemon(t *testing.T, rank int, d pb.DaemonServer) {
	t.Helper()
	dir, err := os.MkdirTemp("", "rc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	secret, _ := control.NewSecret()
	l, err := control.ListenUnix(filepath.Join(dir, "d.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := control.NewServer(secret, nil)
	pb.RegisterDaemonServer(srv, d)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	t.Setenv(rte.EnvRank, string(rune('0'+rank)))
	setSecretFD(t, withData(t, secret).Text())
	t.Setenv(rte.EnvDaemon, filepath.Join(dir, "d.sock"))
	t.Setenv("GOMPI_SYSCONFDIR", t.TempDir())
}

type notice struct {
	rank int
	why  string
}

// A rank hears of each failed rank once, in the order declared, whether
// its callback was registered before or after the notice came; its own
// rank and ranks outside the job are ignored.
func TestFailureNotices(t *testing.T) {
	d := &eventsDaemon{
		first: []*pb.RankEvent{
			{Failed: []int32{2}, Why: "rank 2 on node n2 was killed by signal 9 (killed)"},
			{Failed: []int32{2, 1, 9, -1}, Why: "again"},
		},
		second: []*pb.RankEvent{{Failed: []int32{3, 0}, Why: "node n2 was lost"}, {Failed: []int32{0}}},
		more:   make(chan struct{}),
		ended:  make(chan struct{}),
	}
	serveDaemon(t, 1, d)
	c, err := Init(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	early := make(chan notice, 10)
	c.OnFailed(func(r int, why string) { early <- notice{r, why} })
	if n := <-early; n != (notice{2, "rank 2 on node n2 was killed by signal 9 (killed)"}) {
		t.Fatalf("first notice %+v", n)
	}
	// A callback registered now hears of rank 2 before OnFailed returns.
	var late []notice
	c.OnFailed(func(r int, why string) { late = append(late, notice{r, why}) })
	if want := []notice{{2, "rank 2 on node n2 was killed by signal 9 (killed)"}}; !slices.Equal(late, want) {
		t.Fatalf("replayed %+v, want %+v", late, want)
	}
	got := make(chan notice, 10)
	c.OnFailed(func(r int, why string) { got <- notice{r, why} })
	<-got // the replay of rank 2
	close(d.more)
	want := []notice{{3, "node n2 was lost"}, {0, "node n2 was lost"}}
	for _, w := range want {
		if n := <-got; n != w {
			t.Fatalf("notice %+v, want %+v", n, w)
		}
	}
	if f := c.Failed(); !slices.Equal(f, []int{0, 2, 3}) {
		t.Errorf("Failed() = %v", f)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	<-d.ended // Close ended the stream
	select {
	case n := <-early:
		t.Errorf("a replaced callback heard of %+v", n)
	case n := <-got:
		t.Errorf("a notice beyond the script: %+v", n)
	default:
	}
}

func TestFenceTable(t *testing.T) {
	entry := func(r int32) *pb.RankData { return &pb.RankData{Rank: r, Data: map[string]string{"k": "v"}} }
	tests := []struct {
		name    string
		resp    *pb.FenceResponse
		wantNil []int  // ranks with a nil map
		err     string // "" = no error
	}{
		{name: "every rank", resp: &pb.FenceResponse{Entries: []*pb.RankData{entry(0), entry(1), entry(2)}}},
		{name: "a failed rank without entry", resp: &pb.FenceResponse{Entries: []*pb.RankData{entry(0), entry(2)}, Failed: []int32{1}}, wantNil: []int{1}},
		{name: "a failed rank that contributed before failing", resp: &pb.FenceResponse{Entries: []*pb.RankData{entry(0), entry(1), entry(2)}, Failed: []int32{}}},
		{name: "a rank missing", resp: &pb.FenceResponse{Entries: []*pb.RankData{entry(0), entry(2)}}, err: "no entry for rank 1"},
		{name: "failed out of range", resp: &pb.FenceResponse{Entries: []*pb.RankData{entry(0), entry(1), entry(2)}, Failed: []int32{3}}, err: "failed rank 3"},
		{name: "twice", resp: &pb.FenceResponse{Entries: []*pb.RankData{entry(0), entry(1), entry(1), entry(2)}}, err: "malformed table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := fenceTable(7, 3, tt.resp)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for r, m := range out {
				if (m == nil) != slices.Contains(tt.wantNil, r) {
					t.Errorf("rank %d: map %v", r, m)
				}
			}
		})
	}
}

func FuzzFenceTable(f *testing.F) {
	f.Add(3, []byte{0, 1, 2}, []byte{})
	f.Add(3, []byte{0, 2}, []byte{1})
	f.Add(2, []byte{0, 0}, []byte{5})
	f.Fuzz(func(t *testing.T, size int, ranks, failed []byte) {
		if size < 1 || size > 64 {
			return
		}
		resp := &pb.FenceResponse{}
		for _, r := range ranks {
			resp.Entries = append(resp.Entries, &pb.RankData{Rank: int32(int8(r))})
		}
		for _, r := range failed {
			resp.Failed = append(resp.Failed, int32(int8(r)))
		}
		out, err := fenceTable(1, size, resp)
		if err != nil {
			return
		}
		// Accepted: one slot per rank, nil only for ranks declared failed.
		if len(out) != size {
			t.Fatalf("%d slots for %d ranks", len(out), size)
		}
		for r, m := range out {
			if m == nil && !slices.Contains(resp.Failed, int32(r)) {
				t.Fatalf("rank %d has no entry and was not declared failed", r)
			}
		}
	})
}
