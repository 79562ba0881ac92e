// Package rankclient is a rank's side of the runtime: it connects to the
// gompid of its node (from the environment gompid started it with), learns
// its job and the job's parameters, and offers what package mpi needs from
// the runtime: the modex (an allgather of every rank's endpoint map), a
// barrier, a finalize handshake, abort, and the ranks the runtime declares
// failed while the job runs on (events.go), and the rank's heartbeat to
// gompid's detector of unresponsive ranks (heartbeat.go); and what package cr needs: the
// checkpoint requests of the job's coordinators (snapc.AppLink, in
// applink.go) and, for a restarted rank, where it restarts from.
//
// A program started without gompirun is a singleton: rank 0 of 1, whose
// modex returns its own map, with parameters read the usual way.
package rankclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"

	"gompi/boot"
	"gompi/frameworks"
	"gompi/frameworks/snapc"
	"gompi/mca"
	"gompi/rte"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
)

// ErrNotLaunched is returned by Init when the process was not started by
// gompirun (no GOMPI_RANK in its environment); Singleton then applies.
var ErrNotLaunched = errors.New("rankclient: not started by gompirun")

// ErrFinalized is wrapped by calls made after Finalize.
var ErrFinalized = errors.New("rankclient: finalized")

// Client is a rank's connection to its daemon. Its methods are safe for
// concurrent use; collective calls (Modex, Barrier, Finalize) must be made
// by every rank in the same order, as MPI collectives are.
type Client struct {
	rank, size int
	job, node  string
	nodeDir    string
	rankNodes  []string
	// secrets are the job's control secret, which the rank proves to
	// gompid (Init and Reattach), and the data-plane secret of its launch
	// generation, which rank processes prove to each other (mpi hello).
	// daemonSock is gompid's socket. Reattach changes all three after a
	// restore (link.go), so they are read under mu.
	secrets    control.RankSecrets
	daemonSock string
	// lifeIn and lifeOut are the lifeline's pipes (link.go), nil unless
	// the job's CRS saves ranks from outside.
	lifeIn, lifeOut *os.File
	proc            *boot.Process
	conn            *grpc.ClientConn // nil for a singleton
	rpc             pb.DaemonClient

	restart    snapc.RestartInfo
	restarting bool
	migrated   bool   // started by a migration: the modex is a rejoin
	rbEpoch    uint64 // started anew by in-job rollback epoch (0: not)

	mu        sync.Mutex
	seq       uint64
	finalized bool
	detached  bool // between Detach and Reattach (link.go)

	reqOnce   sync.Once
	reqCh     chan snapc.AppRequest
	reqClosed bool               // reqCh is closed: the stream ended for good
	reqCancel context.CancelFunc // ends the requests stream
	reqDone   chan struct{}      // closed when its goroutine is gone

	failures                    // ranks the runtime declared failed (events.go)
	evCancel context.CancelFunc // ends the events stream
	evDone   chan struct{}      // closed when its goroutine is gone
	hbCancel context.CancelFunc // ends the heartbeat stream (heartbeat.go)
	hbDone   chan struct{}      // closed when its goroutine is gone
}

// InJob reports whether the process was started by gompirun.
func InJob() bool { return os.Getenv(rte.EnvRank) != "" }

// Init connects to the daemon named by the environment, says hello, and
// loads the job's parameters (as resolved by gompirun) with boot.Load. It
// reads its secrets (the job's control secret and its launch generation's
// data-plane secret) from the descriptor its daemon passed
// (rte.EnvSecretFD) and closes it, so they are never in the process's
// environment and programs the rank starts do not inherit them.
func Init(ctx context.Context) (*Client, error) {
	if !InJob() {
		return nil, ErrNotLaunched
	}
	rank, err := strconv.Atoi(os.Getenv(rte.EnvRank))
	if err != nil || rank < 0 {
		return nil, fmt.Errorf("rankclient: %s=%q is not a rank", rte.EnvRank, os.Getenv(rte.EnvRank))
	}
	secrets, err := readSecrets()
	if err != nil {
		return nil, fmt.Errorf("rankclient: %w", err)
	}
	restart, restarting, migrated, err := restartFromEnv()
	if err != nil {
		return nil, err
	}
	fence, rbEpoch, err := rollbackFromEnv(restarting)
	if err != nil {
		return nil, err
	}
	lifeIn, lifeOut, err := lifelineFromEnv()
	if err != nil {
		return nil, fmt.Errorf("rankclient: %w", err)
	}
	sock := os.Getenv(rte.EnvDaemon)
	conn, rpc, hello, err := hello(ctx, sock, rank, secrets)
	var p *boot.Process
	if err == nil {
		// A rank with a lifeline is saved from outside (crs criu): it has
		// no use for plugins, whose processes would be children it
		// cannot be dumped with, and its CRS is gompid's.
		p, err = boot.Load(ctx, boot.Options{Role: mca.RoleApp, Settings: control.SettingsFromProto(hello.Settings),
			LogAttrs: rankAttrs(rank, hello.Node), NoPlugins: lifeIn != nil})
		if err != nil {
			conn.Close()
			err = fmt.Errorf("rankclient: job parameters: %w", err)
		}
	}
	if err != nil {
		for _, f := range []*os.File{lifeIn, lifeOut} {
			if f != nil {
				f.Close()
			}
		}
		return nil, err
	}
	c := &Client{
		rank: rank, size: int(hello.Size), job: hello.Job, node: hello.Node, nodeDir: hello.NodeDir,
		rankNodes: hello.RankNodes, proc: p, conn: conn, rpc: rpc, restart: restart, restarting: restarting, migrated: migrated,
		secrets: secrets, daemonSock: sock, lifeIn: lifeIn, lifeOut: lifeOut, seq: fence, rbEpoch: rbEpoch,
	}
	c.startEvents()
	c.startBeats()
	return c, nil
}

// hello connects to the daemon at sock and says hello (Init, Reattach).
func hello(ctx context.Context, sock string, rank int, secrets control.RankSecrets) (*grpc.ClientConn, pb.DaemonClient, *pb.HelloResponse, error) {
	conn, err := control.DialUnix(sock, secrets.Control)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("rankclient: %w", err)
	}
	rpc := pb.NewDaemonClient(conn)
	hctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	resp, err := rpc.Hello(hctx, &pb.HelloRequest{Rank: int32(rank), Pid: int32(os.Getpid())}, grpc.WaitForReady(true))
	if err != nil {
		conn.Close()
		return nil, nil, nil, fmt.Errorf("rankclient: hello to gompid at %s: %w", sock, err)
	}
	return conn, rpc, resp, nil
}

// readSecrets reads the rank's secrets from the descriptor
// rte.EnvSecretFD names (the daemon's pipe), closes it and removes the
// variable, so neither the secrets nor the descriptor reach programs the
// rank starts.
func readSecrets() (control.RankSecrets, error) {
	v := os.Getenv(rte.EnvSecretFD)
	os.Unsetenv(rte.EnvSecretFD)
	fd, err := strconv.Atoi(v)
	if err != nil || fd <= 2 {
		return control.RankSecrets{}, fmt.Errorf("%s=%q: want the descriptor of the secrets' pipe", rte.EnvSecretFD, v)
	}
	f := os.NewFile(uintptr(fd), "job secret")
	defer f.Close()
	// One byte more than the secrets' text: a longer stream is not theirs.
	b, err := io.ReadAll(io.LimitReader(f, control.RankSecretsLen+1))
	if err != nil {
		return control.RankSecrets{}, fmt.Errorf("%s: read descriptor %d: %w", rte.EnvSecretFD, fd, err)
	}
	s, err := control.ParseRankSecrets(string(b))
	if err != nil {
		return control.RankSecrets{}, fmt.Errorf("%s: descriptor %d: %w", rte.EnvSecretFD, fd, err)
	}
	return s, nil
}

// Singleton returns the client of a program run without gompirun: rank 0
// of a job of 1 on node "localhost", parameters from opts' sources.
func Singleton(ctx context.Context, opts mca.SourceOptions) (*Client, error) {
	p, err := boot.Load(ctx, boot.Options{Role: mca.RoleApp, Sources: opts, LogAttrs: rankAttrs(0, singletonNode)})
	if err != nil {
		return nil, fmt.Errorf("rankclient: %w", err)
	}
	// A job of one has no peers to prove itself to; its secret is
	// random all the same, so nothing can connect to it as a rank.
	secret, err := control.NewSecret()
	if err != nil {
		return nil, fmt.Errorf("rankclient: %w", err)
	}
	return &Client{rank: 0, size: 1, job: fmt.Sprintf("singleton-%d", os.Getpid()), node: singletonNode,
		rankNodes: []string{singletonNode}, nodeDir: os.TempDir(), proc: p, secrets: control.RankSecrets{Data: secret}}, nil
}

// singletonNode is the node of a program run without gompirun.
const singletonNode = "localhost"

// rankAttrs are what every log record of a rank carries, so its lines
// can be told apart in the job's one stream.
func rankAttrs(rank int, node string) []slog.Attr {
	return []slog.Attr{slog.Int("rank", rank), slog.String("node", node)}
}

// LogHandler is the rank's log handler: the job's format, every record
// naming the rank and its node (mpi logs through it).
func (c *Client) LogHandler() slog.Handler { return c.proc.LogHandler }

// Rank is this process's world rank.
func (c *Client) Rank() int { return c.rank }

// Size is the number of ranks of the job.
func (c *Client) Size() int { return c.size }

// Job is the job id.
func (c *Client) Job() string { return c.job }

// Secret is the data-plane secret of the rank's launch generation, which
// ranks prove to each other that they know when they connect
// (mpi.Bootstrap): new for each launch and each recovery of the job, the
// current one for ranks a migration moves.
func (c *Client) Secret() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.secrets.Data.Bytes()
}

// Node is the name of the node the rank runs on; ranks with equal node
// names share a machine (and a node directory).
func (c *Client) Node() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.node
}

// NodeOf returns the node of any rank of the job.
func (c *Client) NodeOf(rank int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rank < 0 || rank >= len(c.rankNodes) {
		return ""
	}
	return c.rankNodes[rank]
}

// NodeDir is the node-local directory of the job, shared by the node's
// ranks and removed by gompid when the job ends.
func (c *Client) NodeDir() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodeDir
}

// Values are the job's parameters, resolved once by gompirun.
func (c *Client) Values() *mca.Values { return c.proc.Values }

// Frameworks holds the rank's framework registries, built-in components
// registered; Values were resolved against their parameters.
func (c *Client) Frameworks() *frameworks.Set { return c.proc.Frameworks }

// Process is the rank's started component system.
func (c *Client) Process() *boot.Process { return c.proc }

// fence runs one allgather round.
func (c *Client) fence(ctx context.Context, data map[string]string) ([]map[string]string, error) {
	c.mu.Lock()
	if c.finalized {
		c.mu.Unlock()
		return nil, ErrFinalized
	}
	c.seq++
	seq := c.seq
	c.mu.Unlock()
	rpc, err := c.live()
	if err != nil {
		return nil, fmt.Errorf("rankclient: fence %d: %w", seq, err)
	}
	if rpc == nil {
		return []map[string]string{clone(data)}, nil
	}
	resp, err := rpc.Fence(ctx, &pb.FenceRequest{Rank: int32(c.rank), Seq: seq, Data: data})
	if err != nil {
		return nil, fmt.Errorf("rankclient: fence %d: %w", seq, err)
	}
	return fenceTable(seq, c.size, resp)
}

// fenceTable checks a fence's result: one entry per rank, but for ranks
// declared failed, which have none (nil in the table). A rank that failed
// after contributing keeps its entry.
func fenceTable(seq uint64, size int, resp *pb.FenceResponse) ([]map[string]string, error) {
	out := make([]map[string]string, size)
	for _, e := range resp.Entries {
		if e.Rank < 0 || int(e.Rank) >= size || out[e.Rank] != nil {
			return nil, fmt.Errorf("rankclient: fence %d: malformed table from gompid (rank %d)", seq, e.Rank)
		}
		out[e.Rank] = e.Data
		if out[e.Rank] == nil {
			out[e.Rank] = map[string]string{}
		}
	}
	failed := map[int32]bool{}
	for _, r := range resp.Failed {
		if r < 0 || int(r) >= size {
			return nil, fmt.Errorf("rankclient: fence %d: malformed table from gompid (failed rank %d)", seq, r)
		}
		failed[r] = true
	}
	for r, m := range out {
		if m == nil && !failed[int32(r)] {
			return nil, fmt.Errorf("rankclient: fence %d: no entry for rank %d", seq, r)
		}
	}
	return out, nil
}

// Modex publishes this rank's map (its transport endpoints) and returns
// every rank's, indexed by rank. It returns once all ranks have called it:
// it is also the barrier saying every rank is initialized. A rank declared
// failed before it published has a nil map.
//
// A rank a migration started on a new node rejoins instead: it publishes
// its map and gets the job's table once every moving rank has, and its
// fences continue the job's count.
func (c *Client) Modex(ctx context.Context, mine map[string]string) ([]map[string]string, error) {
	if !c.migrated || c.rpc == nil {
		return c.fence(ctx, mine)
	}
	resp, err := c.rpc.Rejoin(ctx, &pb.FenceRequest{Rank: int32(c.rank), Data: mine})
	if err != nil {
		return nil, fmt.Errorf("rankclient: rejoin the job after a migration: %w", err)
	}
	c.mu.Lock()
	c.seq = resp.GetSeq()
	c.mu.Unlock()
	return fenceTable(resp.GetSeq(), c.size, resp)
}

// Barrier returns once every rank has called it, but for ranks declared
// failed (see OnFailed).
func (c *Client) Barrier(ctx context.Context) error {
	_, err := c.fence(ctx, nil)
	return err
}

// Finalize says the rank is ending normally and waits for every rank to
// say so (but ranks declared failed), so no rank exits while another may
// still talk to it. After it, an exit with status 0 is not a fault. It
// closes the connection.
func (c *Client) Finalize(ctx context.Context) error {
	// A finalizing rank reaches no more safe points: its coordinator leaves
	// first, so a checkpoint waiting for it fails at once.
	c.stopRequests()
	if c.rpc != nil {
		if _, err := c.rpc.Finalize(ctx, &pb.FinalizeRequest{Rank: int32(c.rank)}); err != nil {
			return fmt.Errorf("rankclient: finalize: %w", err)
		}
	}
	if _, err := c.fence(ctx, nil); err != nil {
		return err
	}
	c.mu.Lock()
	c.finalized = true
	c.mu.Unlock()
	return c.Close()
}

// Abort ends the whole job: gompirun reports msg naming this rank, kills
// every rank and exits with code. It does not return: the rank exits with
// code once the daemon has the request (or after a few seconds if the
// daemon cannot be reached).
func (c *Client) Abort(code int, msg string) {
	if c.rpc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.rpc.Abort(ctx, &pb.AbortRequest{Rank: int32(c.rank), Code: int32(code), Message: msg})
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "rank %d: abort: could not reach gompid: %v\n", c.rank, err)
		}
	} else {
		fmt.Fprintf(os.Stderr, "rank %d aborted with status %d: %s\n", c.rank, code, msg)
	}
	os.Exit(code)
}

// Close drops the connection to the daemon without finalizing, and stops
// what the rank's start-up started (plugin processes).
func (c *Client) Close() error {
	c.stopRequests()
	c.stopEvents()
	c.stopBeats()
	c.mu.Lock()
	conn, proc := c.conn, c.proc
	c.conn = nil // proc stays: Values and Frameworks remain readable after Close
	life := []*os.File{c.lifeIn, c.lifeOut}
	c.lifeIn, c.lifeOut = nil, nil
	c.mu.Unlock()
	var errs []error
	for _, f := range life {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	if conn != nil {
		errs = append(errs, conn.Close())
	}
	if proc != nil {
		errs = append(errs, proc.Close())
	}
	return errors.Join(errs...)
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
