package rankclient

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"

	"gompi/frameworks/snapc"
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
	t.Setenv(rte.EnvRank, "0")
	setSecretFD(t, secA.Text())
	t.Setenv(rte.EnvDaemon, sockA)
	t.Setenv("GOMPI_SYSCONFDIR", t.TempDir())
	ctx := context.Background()
	c, err := Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
	t.Setenv(rte.EnvRank, "0")
	setSecretFD(t, sec.Text())
	t.Setenv(rte.EnvDaemon, sock)
	t.Setenv("GOMPI_SYSCONFDIR", t.TempDir())
	c, err := Init(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
