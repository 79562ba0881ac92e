package rankclient

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/mca"
	"gompi/rte"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
)

// fakeDaemon serves one rank the way gompid does, with scripted requests.
type fakeDaemon struct {
	pb.UnimplementedDaemonServer
	requests []snapc.AppRequest
	mu       sync.Mutex
	replies  []*pb.AppReplyMsg
	streamUp chan struct{}
	ended    chan struct{} // the requests stream's context ended
}

func (d *fakeDaemon) Hello(_ context.Context, r *pb.HelloRequest) (*pb.HelloResponse, error) {
	return &pb.HelloResponse{Job: "abcd0123", Rank: r.Rank, Size: 1, Node: "n1", NodeDir: "/tmp", RankNodes: []string{"n1"}}, nil
}

func (d *fakeDaemon) Requests(_ *pb.AppRequestsRequest, s grpc.ServerStreamingServer[pb.AppRequestMsg]) error {
	if err := s.Send(&pb.AppRequestMsg{Ready: true}); err != nil {
		return err
	}
	close(d.streamUp)
	// The stream ends when the rank goes away, possibly while requests
	// are still being sent.
	defer close(d.ended)
	for _, r := range d.requests {
		if err := s.Send(control.AppRequestToProto(r)); err != nil {
			return err
		}
	}
	<-s.Context().Done()
	return nil
}

func (d *fakeDaemon) Reply(_ context.Context, m *pb.AppReplyMsg) (*pb.AppReplyResponse, error) {
	d.mu.Lock()
	d.replies = append(d.replies, m)
	d.mu.Unlock()
	return &pb.AppReplyResponse{}, nil
}

func (d *fakeDaemon) Checkpoint(_ context.Context, m *pb.RankCheckpointRequest) (*pb.RankCheckpointResponse, error) {
	if m.Options.GetStop() {
		return &pb.RankCheckpointResponse{Error: "snapc/full: checkpoint refused: stop"}, nil
	}
	return &pb.RankCheckpointResponse{Seq: int32(m.Target), Ref: "gompi_global_snapshot_abcd0123.ckpt", Dir: "/g"}, nil
}

func (d *fakeDaemon) Finalize(context.Context, *pb.FinalizeRequest) (*pb.FinalizeResponse, error) {
	return &pb.FinalizeResponse{}, nil
}

func (d *fakeDaemon) Fence(_ context.Context, r *pb.FenceRequest) (*pb.FenceResponse, error) {
	return &pb.FenceResponse{Entries: []*pb.RankData{{Rank: r.Rank, Data: r.Data}}}, nil
}

// serveFake starts d on a socket and sets the environment of a rank of it.
func serveFake(t *testing.T, d *fakeDaemon) {
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
	t.Setenv(rte.EnvRank, "0")
	setSecretFD(t, withData(t, secret).Text())
	t.Setenv(rte.EnvDaemon, filepath.Join(dir, "d.sock"))
	t.Setenv("GOMPI_SYSCONFDIR", t.TempDir())
}

func TestAppLink(t *testing.T) {
	d := &fakeDaemon{streamUp: make(chan struct{}), ended: make(chan struct{})}
	for i := range 50 {
		d.requests = append(d.requests, snapc.AppRequest{ID: uint64(i + 1), Kind: snapc.AppRequestKind(i % 3), Target: 7, Seq: 1, Dir: "/d"})
	}
	serveFake(t, d)
	snapDir := t.TempDir()
	t.Setenv(rte.EnvRestartRef, "/global/gompi_global_snapshot_0ld.ckpt")
	t.Setenv(rte.EnvRestartSeq, "3")
	t.Setenv(rte.EnvRestartDir, snapDir)
	ctx := context.Background()
	c, err := Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, ok := c.Restart()
	if !ok || info.Seq != 3 || info.Dir != snapDir || info.Ref.Dir != "/global" || info.Ref.Name != "gompi_global_snapshot_0ld.ckpt" {
		t.Errorf("Restart() = %+v, %v", info, ok)
	}
	if os.Getenv(rte.EnvRestartRef) != "" {
		t.Error("restart variables left in the environment")
	}
	if st, err := c.RestoreState(); st != nil || err != nil {
		t.Errorf("RestoreState without a library state: %q, %v", st, err)
	}
	os.WriteFile(filepath.Join(snapDir, snapc.LibraryStateFile), []byte("lib"), 0o644)
	if st, err := c.RestoreState(); string(st) != "lib" || err != nil {
		t.Errorf("RestoreState = %q, %v", st, err)
	}

	ch := c.Requests()
	select {
	case <-d.streamUp: // registered before Requests returned
	default:
		t.Fatal("Requests returned before gompid registered the coordinator")
	}
	if c.Requests() != ch {
		t.Error("a second Requests call opened another stream")
	}
	for i := range 50 {
		r := <-ch
		if r.ID != uint64(i+1) {
			t.Fatalf("request %d arrived as %d: out of order", i+1, r.ID)
		}
		if err := c.Reply(ctx, snapc.AppReply{ID: r.ID, Kind: r.Kind, Count: 5, Checkpointable: true}); err != nil {
			t.Fatal(err)
		}
	}
	d.mu.Lock()
	if len(d.replies) != 50 || d.replies[49].Id != 50 || d.replies[49].Count != 5 {
		t.Errorf("replies %v", d.replies)
	}
	d.mu.Unlock()
	res, err := c.Checkpoint(ctx, 9, crs.Options{})
	if err != nil || res.Seq != 9 || res.Ref != "gompi_global_snapshot_abcd0123.ckpt" {
		t.Errorf("Checkpoint = %+v, %v", res, err)
	}
	if _, err := c.Checkpoint(ctx, 9, crs.Options{Stop: true}); err == nil || !strings.Contains(err.Error(), "checkpoint refused: stop") {
		t.Errorf("refused checkpoint: %v", err)
	}
	if err := c.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	// Finalize ended the stream and its goroutine: the channel is closed.
	if _, open := <-ch; open {
		t.Error("requests channel still open after Finalize")
	}
	<-d.ended
	if err := c.Reply(ctx, snapc.AppReply{}); !errors.Is(err, ErrFinalized) {
		t.Errorf("Reply after Finalize: %v", err)
	}
}

// A coordinator that stops reading does not keep the stream's goroutine
// alive after Close.
func TestRequestsClosedWhileBlocked(t *testing.T) {
	d := &fakeDaemon{streamUp: make(chan struct{}), ended: make(chan struct{})}
	for i := range 40 { // more than the channel holds
		d.requests = append(d.requests, snapc.AppRequest{ID: uint64(i + 1), Kind: snapc.Query})
	}
	serveFake(t, d)
	c, err := Init(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ch := c.Requests()
	<-ch
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range ch { // drains what was queued, then ends
	}
	<-d.ended
}

func TestRestartEnvironment(t *testing.T) {
	tests := []struct {
		ref, seq, dir string
		ok            bool
		err           string
		migrate       string
	}{
		{"", "", "", false, "", ""},
		{"/g/r.ckpt", "0", "/g/r.ckpt/0/gompi_snapshot_0.ckpt", true, "", ""},
		{"/g/r.ckpt", "0", "/g/r.ckpt/0/gompi_snapshot_0.ckpt", true, "", "1"},
		{"/g/r.ckpt", "x", "/d", false, "malformed restart environment", ""},
		{"rel/r.ckpt", "1", "/d", false, "malformed", ""},
		{"/g/r.ckpt", "1", "", false, "malformed", ""},
		{"", "", "", false, "without a snapshot", "1"},
	}
	for _, tt := range tests {
		t.Setenv(rte.EnvRestartRef, tt.ref)
		t.Setenv(rte.EnvRestartSeq, tt.seq)
		t.Setenv(rte.EnvRestartDir, tt.dir)
		t.Setenv(rte.EnvRestartMigrate, tt.migrate)
		info, ok, migrated, err := restartFromEnv()
		if err == nil && migrated != (tt.migrate == "1") {
			t.Errorf("%+v: migrated %v", tt, migrated)
		}
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%+v: %v", tt, err)
			}
			continue
		}
		if err != nil || ok != tt.ok || (ok && (info.Ref.Path() != tt.ref || info.Dir != tt.dir)) {
			t.Errorf("%+v: %+v %v %v", tt, info, ok, err)
		}
	}
}

func TestSingletonAppLink(t *testing.T) {
	c, err := Singleton(context.Background(), mcaIsolated(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, open := <-c.Requests(); open {
		t.Error("a singleton receives checkpoint requests")
	}
	if _, err := c.Checkpoint(context.Background(), 1, crs.Options{}); err == nil || !strings.Contains(err.Error(), "gompirun -am ft-enable-cr") {
		t.Errorf("singleton checkpoint: %v", err)
	}
	if _, ok := c.Restart(); ok {
		t.Error("singleton restarting")
	}
}

func mcaIsolated(t *testing.T) mca.SourceOptions {
	return mca.SourceOptions{NoUserFiles: true, SysconfDir: t.TempDir()}
}

// FuzzRestartEnvironment: whatever gompid's restart variables hold, the
// rank client accepts only absolute paths and a sequence number.
func FuzzRestartEnvironment(f *testing.F) {
	f.Add("/g/r.ckpt", "0", "/g/r.ckpt/0/gompi_snapshot_0.ckpt")
	f.Add("r.ckpt", "-1", "")
	f.Add("/", "99999999999999999999", "/x")
	f.Fuzz(func(t *testing.T, ref, seq, dir string) {
		if strings.ContainsRune(ref+seq+dir, 0) {
			return // the environment cannot hold NUL
		}
		t.Setenv(rte.EnvRestartRef, ref)
		t.Setenv(rte.EnvRestartSeq, seq)
		t.Setenv(rte.EnvRestartDir, dir)
		info, ok, _, err := restartFromEnv()
		if err != nil || !ok {
			return
		}
		if !filepath.IsAbs(info.Ref.Dir) || !filepath.IsAbs(info.Dir) || info.Seq < 0 || info.Ref.Name == "" {
			t.Fatalf("accepted %q %q %q as %+v", ref, seq, dir, info)
		}
	})
}

// TestRollbackFromEnv: a rank an in-job rollback started anew reads the
// job's fence count and the rollback's epoch from its environment; any
// other start counts from 0 in epoch 0.
func TestRollbackFromEnv(t *testing.T) {
	tests := []struct {
		fence, epoch string // "-" for unset
		restarting   bool
		wantF, wantE uint64
		err          string
	}{
		{fence: "-", epoch: "-", restarting: false},
		{fence: "-", epoch: "-", restarting: true},
		{fence: "3", epoch: "1", restarting: true, wantF: 3, wantE: 1},
		{fence: "0", epoch: "2", restarting: true, wantF: 0, wantE: 2},
		{fence: "x", epoch: "1", restarting: true, err: "malformed rollback environment"},
		{fence: "3", epoch: "-", restarting: true, err: "malformed rollback environment"},
		{fence: "3", epoch: "0", restarting: true, err: "malformed rollback environment"},
		{fence: "3", epoch: "1", restarting: false, err: "without a snapshot"},
	}
	set := func(k, v string) {
		t.Setenv(k, "")
		if v == "-" {
			os.Unsetenv(k)
		} else {
			os.Setenv(k, v)
		}
	}
	for _, tt := range tests {
		set(rte.EnvRestartFence, tt.fence)
		set(rte.EnvRestartEpoch, tt.epoch)
		f, e, err := rollbackFromEnv(tt.restarting)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%+v: %d %d, %v; want an error saying %q", tt, f, e, err, tt.err)
			}
			continue
		}
		if err != nil || f != tt.wantF || e != tt.wantE {
			t.Errorf("%+v: %d %d, %v; want %d %d", tt, f, e, err, tt.wantF, tt.wantE)
		}
		for _, k := range []string{rte.EnvRestartFence, rte.EnvRestartEpoch} {
			if _, still := os.LookupEnv(k); still {
				t.Errorf("%+v: %s left in the environment", tt, k)
			}
		}
	}
}
