package rankclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	"gompi/boot"
	"gompi/frameworks/snapc"
	"gompi/mca"
	"gompi/rte"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
	"gompi/rte/lifeline"
)

// linkDaemon is a gompid a rank detaches from and reattaches to: each
// requests stream it serves sends the ready mark and then one request
// whose ID says which daemon and which stream sent it.
type linkDaemon struct {
	pb.UnimplementedDaemonServer
	node    string
	base    uint64 // request IDs start here
	streams atomic.Int64
	ended   chan struct{} // one value per stream that ended
}

func (d *linkDaemon) Hello(_ context.Context, r *pb.HelloRequest) (*pb.HelloResponse, error) {
	return &pb.HelloResponse{Job: "abcd0123", Rank: r.Rank, Size: 1, Node: d.node, NodeDir: "/tmp/" + d.node, RankNodes: []string{d.node}}, nil
}

func (d *linkDaemon) Requests(_ *pb.AppRequestsRequest, s grpc.ServerStreamingServer[pb.AppRequestMsg]) error {
	defer func() { d.ended <- struct{}{} }()
	n := d.streams.Add(1)
	if err := s.Send(&pb.AppRequestMsg{Ready: true}); err != nil {
		return err
	}
	if err := s.Send(control.AppRequestToProto(snapc.AppRequest{ID: d.base + uint64(n), Kind: snapc.Query})); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func (d *linkDaemon) Fence(_ context.Context, r *pb.FenceRequest) (*pb.FenceResponse, error) {
	return &pb.FenceResponse{Entries: []*pb.RankData{{Rank: r.Rank, Data: r.Data}}}, nil
}

// serveLink serves d on a new socket with a new control secret and
// returns the socket and the rank secrets a rank of it gets.
func serveLink(t *testing.T, d *linkDaemon) (string, control.RankSecrets) {
	t.Helper()
	dir, err := os.MkdirTemp("", "rc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	secret, err := control.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "d.sock")
	l, err := control.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := control.NewServer(secret, nil)
	pb.RegisterDaemonServer(srv, d)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return sock, withData(t, secret)
}

// initRank starts rank 0 of the daemon at sock, as gompid starts it
// (with whatever else the test put in the environment first).
func initRank(t *testing.T, sock string, sec control.RankSecrets) *Client {
	t.Helper()
	t.Setenv(rte.EnvRank, "0")
	setSecretFD(t, sec.Text())
	t.Setenv(rte.EnvDaemon, sock)
	t.Setenv("GOMPI_SYSCONFDIR", t.TempDir())
	c, err := Init(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func nextRequest(t *testing.T, ch <-chan snapc.AppRequest) snapc.AppRequest {
	t.Helper()
	r, ok := <-ch
	if !ok {
		t.Fatal("the requests channel closed")
	}
	return r
}

// TestDetachReattach: a detached rank holds no connection and its calls
// fail with ErrDetached; the requests channel stays open and is fed again
// after a Continue (same daemon) and after a Restart (another daemon, its
// secrets and node), and fences work again.
func TestDetachReattach(t *testing.T) {
	a := &linkDaemon{node: "a", base: 100, ended: make(chan struct{}, 4)}
	b := &linkDaemon{node: "b", base: 200, ended: make(chan struct{}, 4)}
	sockA, secA := serveLink(t, a)
	sockB, secB := serveLink(t, b)
	ctx := context.Background()
	c := initRank(t, sockA, secA)
	ch := c.Requests()
	if r := nextRequest(t, ch); r.ID != 101 {
		t.Fatalf("first request %d, want 101", r.ID)
	}

	if err := c.Detach(); err != nil {
		t.Fatal(err)
	}
	<-a.ended // the stream's server side saw the connection go
	if err := c.Detach(); err != nil {
		t.Fatalf("second Detach: %v", err)
	}
	if err := c.Reply(ctx, snapc.AppReply{ID: 101}); !errors.Is(err, ErrDetached) {
		t.Fatalf("Reply while detached: %v, want ErrDetached", err)
	}
	if err := c.Barrier(ctx); !errors.Is(err, ErrDetached) {
		t.Fatalf("Barrier while detached: %v, want ErrDetached", err)
	}
	if err := c.Reattach(ctx, lifeline.Message{Kind: lifeline.Ready}); err == nil || !strings.Contains(err.Error(), "does not end a checkpoint") {
		t.Fatalf("Reattach with a ready message: %v", err)
	}

	if err := c.Reattach(ctx, lifeline.Message{Kind: lifeline.Continue}); err != nil {
		t.Fatal(err)
	}
	if r := nextRequest(t, ch); r.ID != 102 {
		t.Fatalf("request after continue %d, want 102 (daemon a's second stream)", r.ID)
	}
	if err := c.Barrier(ctx); err != nil {
		t.Fatalf("Barrier after continue: %v", err)
	}

	if err := c.Detach(); err != nil {
		t.Fatal(err)
	}
	if err := c.Reattach(ctx, lifeline.Message{Kind: lifeline.Restart, Daemon: sockB, Secrets: secA.Text()}); err == nil {
		t.Fatal("reattached to daemon b with daemon a's control secret")
	}
	if err := c.Reattach(ctx, lifeline.Message{Kind: lifeline.Restart, Daemon: sockB, Secrets: secB.Text()}); err != nil {
		t.Fatal(err)
	}
	if r := nextRequest(t, ch); r.ID/100 != 2 {
		t.Fatalf("request after restart %d, want one of daemon b's", r.ID)
	}
	if c.Node() != "b" || c.NodeDir() != "/tmp/b" || !bytes.Equal(c.Secret(), secB.Data.Bytes()) {
		t.Fatalf("after restart: node %q, dir %q, data secret changed %v", c.Node(), c.NodeDir(), bytes.Equal(c.Secret(), secB.Data.Bytes()))
	}
	if err := c.Barrier(ctx); err != nil {
		t.Fatalf("Barrier after restart: %v", err)
	}
	if err := c.Reattach(ctx, lifeline.Message{Kind: lifeline.Continue}); err == nil {
		t.Fatal("Reattach of an attached client accepted")
	}
}

// TestReattachToNoDaemon: a Continue whose daemon is gone fails with the
// socket named, and the client stays detached.
func TestReattachToNoDaemon(t *testing.T) {
	a := &linkDaemon{node: "a", ended: make(chan struct{}, 4)}
	sock, sec := serveLink(t, a)
	c := initRank(t, sock, sec)
	if err := c.Detach(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	gone := lifeline.Message{Kind: lifeline.Restart, Daemon: filepath.Join(t.TempDir(), "none.sock"), Secrets: sec.Text()}
	if err := c.Reattach(ctx, gone); err == nil || !strings.Contains(err.Error(), "none.sock") {
		t.Fatalf("Reattach to a missing daemon: %v", err)
	}
	if err := c.Barrier(context.Background()); !errors.Is(err, ErrDetached) {
		t.Fatalf("Barrier after a failed reattach: %v, want ErrDetached", err)
	}
}

// lifelineEnv makes the two pipes of a lifeline, names the rank's ends in
// the environment as gompid does, and returns gompid's ends: the one it
// reads the rank's word from and the one it writes its own on.
func lifelineEnv(t *testing.T) (fromRank *os.File, toRank *os.File) {
	t.Helper()
	inR, inW, err := os.Pipe() // gompid -> rank
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe() // rank -> gompid
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inW.Close(); outR.Close() })
	// The rank's ends are fresh descriptors, as a process inherits them
	// (the *os.File of a pipe made here is already in the runtime's
	// poller); the client closes them (Close).
	var fds [2]int
	for i, f := range []*os.File{inR, outW} {
		if fds[i], err = unix.Dup(int(f.Fd())); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	t.Setenv(rte.EnvLifelineFDs, fmt.Sprintf("%d,%d", fds[0], fds[1]))
	return outR, inW
}

// TestPause: the rank says ready on the lifeline with no connection left,
// goes on after Continue (same daemon) and after Restart (another), skips
// a word on an older request, and a lifeline that ends is gompid gone.
func TestPause(t *testing.T) {
	a := &linkDaemon{node: "a", ended: make(chan struct{}, 4)}
	b := &linkDaemon{node: "b", ended: make(chan struct{}, 4)}
	sockA, secA := serveLink(t, a)
	sockB, secB := serveLink(t, b)
	fromRank, toRank := lifelineEnv(t)
	ctx := context.Background()
	c := initRank(t, sockA, secA)
	if _, ok := os.LookupEnv(rte.EnvLifelineFDs); ok {
		t.Fatal("the lifeline variable is left in the environment")
	}
	pause := func(id uint64, words ...lifeline.Message) (bool, error) {
		t.Helper()
		type result struct {
			restarted bool
			err       error
		}
		done := make(chan result, 1)
		go func() {
			r, err := c.Pause(ctx, id)
			done <- result{r, err}
		}()
		m, err := lifeline.Read(fromRank)
		if err != nil || m.Kind != lifeline.Ready || m.Request != id {
			t.Fatalf("gompid read %v, %v; want ready for request %d", m, err, id)
		}
		if err := c.Barrier(ctx); !errors.Is(err, ErrDetached) {
			t.Fatalf("a ready rank still reaches gompid: %v", err)
		}
		for _, w := range words {
			if err := lifeline.Write(toRank, w); err != nil {
				t.Fatal(err)
			}
		}
		res := <-done
		return res.restarted, res.err
	}
	if restarted, err := pause(1, lifeline.Message{Kind: lifeline.Continue, Request: 1}); err != nil || restarted {
		t.Fatalf("pause with continue: restarted %v, %v", restarted, err)
	}
	if err := c.Barrier(ctx); err != nil {
		t.Fatalf("Barrier after continue: %v", err)
	}
	restart := lifeline.Message{Kind: lifeline.Restart, Request: 2, Daemon: sockB, Secrets: secB.Text()}
	if restarted, err := pause(2, lifeline.Message{Kind: lifeline.Continue, Request: 1}, restart); err != nil || !restarted {
		t.Fatalf("pause with restart: restarted %v, %v", restarted, err)
	}
	if c.Node() != "b" {
		t.Fatalf("node %q after a restart on daemon b's node", c.Node())
	}
	if err := c.Refuse(3, "rank 0 is finalizing"); err != nil {
		t.Fatal(err)
	}
	if m, err := lifeline.Read(fromRank); err != nil || m.Kind != lifeline.Refused || m.Request != 3 || m.Reason != "rank 0 is finalizing" {
		t.Fatalf("gompid read %v, %v; want the refusal of request 3", m, err)
	}
	toRank.Close()
	if _, err := pause(4); err == nil || !strings.Contains(err.Error(), "gompid is gone") {
		t.Fatalf("pause with the lifeline closed: %v", err)
	}
}

func TestPauseWithoutLifeline(t *testing.T) {
	a := &linkDaemon{node: "a", ended: make(chan struct{}, 4)}
	sock, sec := serveLink(t, a)
	c := initRank(t, sock, sec)
	if _, err := c.Pause(context.Background(), 1); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Pause without a lifeline: %v, want errors.ErrUnsupported", err)
	}
	if err := c.Barrier(context.Background()); err != nil {
		t.Fatalf("a refused Pause detached the rank: %v", err)
	}
}

func TestBadLifelineEnvironment(t *testing.T) {
	for _, v := range []string{"", "4", "x,5", "4,4", "1,2", "900,901"} {
		t.Setenv(rte.EnvLifelineFDs, v)
		if _, _, err := lifelineFromEnv(); err == nil || !strings.Contains(err.Error(), rte.EnvLifelineFDs) {
			t.Errorf("%s=%q: %v", rte.EnvLifelineFDs, v, err)
		}
	}
}

// A restored rank says once that a restart's transport settings that
// differ from its own are not applied to it; equal or other settings are
// silent.
func TestWarnKeptTransports(t *testing.T) {
	var logs bytes.Buffer
	p, err := boot.Load(t.Context(), boot.Options{Role: mca.RoleApp, NoPlugins: true, LogOutput: &logs,
		Settings: []mca.Setting{{Name: "btl", Value: "uds,tcp"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := &Client{proc: p}
	for _, tt := range []struct {
		name string
		now  []mca.Setting
		warn string
	}{
		{"same", []mca.Setting{{Name: "btl", Value: "uds,tcp"}, {Name: "crs", Value: "criu"}}, ""},
		{"other btl", []mca.Setting{{Name: "btl", Value: "tcp"}}, `btl = \"tcp\" (was \"uds,tcp\")`},
		{"unknown here", []mca.Setting{{Name: "btl_nobody_param", Value: "1"}}, ""},
	} {
		logs.Reset()
		c.warnKeptTransports(tt.now)
		if got := logs.String(); (tt.warn == "") != (got == "") || !strings.Contains(got, tt.warn) {
			t.Errorf("%s: logged %q, want %q", tt.name, got, tt.warn)
		}
	}
}
