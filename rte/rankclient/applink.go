package rankclient

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"google.golang.org/grpc"

	"gompi/frameworks/crs"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/rte"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
)

// The rank client is the rank's snapc.AppLink: package cr's application
// coordinator receives the job's checkpoint requests through it, answers
// them, asks for checkpoints (cr.Checkpoint) and learns whether this start
// is a restart. It is also the mpi.Restorer of a restarted rank.

// readyBound bounds the wait for gompid to register a rank's application
// coordinator.
const readyBound = time.Minute

// restartFromEnv reads the restart variables gompid sets for a restarted
// rank and removes them from the process environment.
// rollbackFromEnv reads the fence count and the rollback epoch of a rank
// an in-job rollback started anew (rte.EnvRestartFence and
// rte.EnvRestartEpoch; 0 and 0 for any other start) and removes them.
func rollbackFromEnv(restarting bool) (fence, epoch uint64, err error) {
	fv, fset := os.LookupEnv(rte.EnvRestartFence)
	ev, eset := os.LookupEnv(rte.EnvRestartEpoch)
	os.Unsetenv(rte.EnvRestartFence)
	os.Unsetenv(rte.EnvRestartEpoch)
	if !fset && !eset {
		return 0, 0, nil
	}
	fence, ferr := strconv.ParseUint(fv, 10, 64)
	epoch, eerr := strconv.ParseUint(ev, 10, 64)
	switch {
	case !restarting:
		return 0, 0, fmt.Errorf("rankclient: %s and %s set without a snapshot to start from", rte.EnvRestartFence, rte.EnvRestartEpoch)
	case ferr != nil || eerr != nil || epoch == 0:
		return 0, 0, fmt.Errorf("rankclient: malformed rollback environment: %s=%q %s=%q", rte.EnvRestartFence, fv, rte.EnvRestartEpoch, ev)
	}
	return fence, epoch, nil
}

// RollbackEpoch implements mpi.RollbackEpocher: the epoch of the in-job
// rollback that started this rank, 0 for any other start.
func (c *Client) RollbackEpoch() uint64 { return c.rbEpoch }

func restartFromEnv() (info snapc.RestartInfo, restarting, migrated bool, err error) {
	refPath, dir, seqText := os.Getenv(rte.EnvRestartRef), os.Getenv(rte.EnvRestartDir), os.Getenv(rte.EnvRestartSeq)
	migrated = os.Getenv(rte.EnvRestartMigrate) == "1"
	for _, k := range []string{rte.EnvRestartRef, rte.EnvRestartDir, rte.EnvRestartSeq, rte.EnvRestartMigrate} {
		os.Unsetenv(k)
	}
	if refPath == "" && dir == "" && seqText == "" {
		if migrated {
			return snapc.RestartInfo{}, false, false, fmt.Errorf("rankclient: %s set without a snapshot to start from", rte.EnvRestartMigrate)
		}
		return snapc.RestartInfo{}, false, false, nil
	}
	info, restarting, err = restartInfo(refPath, dir, seqText)
	return info, restarting, migrated, err
}

func restartInfo(refPath, dir, seqText string) (snapc.RestartInfo, bool, error) {
	seq, err := strconv.Atoi(seqText)
	remote := (snapshot.Ref{Dir: refPath}).IsRemote()
	if err != nil || seq < 0 || !(filepath.IsAbs(refPath) || remote) || !filepath.IsAbs(dir) {
		return snapc.RestartInfo{}, false, fmt.Errorf("rankclient: malformed restart environment %s=%q %s=%q %s=%q",
			rte.EnvRestartRef, refPath, rte.EnvRestartSeq, seqText, rte.EnvRestartDir, dir)
	}
	ref, err := snapshot.ParseRef(refPath, "")
	if err != nil {
		return snapc.RestartInfo{}, false, fmt.Errorf("rankclient: %s: %w", rte.EnvRestartRef, err)
	}
	return snapc.RestartInfo{Ref: ref, Seq: seq, Dir: dir}, true, nil
}

// Requests delivers the job's checkpoint requests for this rank, in
// order. The first call registers the rank's application coordinator with
// gompid (until then the rank answers no checkpoint: it is "not
// checkpointable yet") and returns once gompid has it. The channel closes
// when the rank finalizes, closes, or loses its daemon; for a singleton it
// is closed at once.
func (c *Client) Requests() <-chan snapc.AppRequest {
	c.reqOnce.Do(c.openRequests)
	return c.reqCh
}

func (c *Client) openRequests() {
	c.mu.Lock()
	c.reqCh = make(chan snapc.AppRequest, 16)
	rpc, finalized := c.rpc, c.finalized
	c.mu.Unlock()
	if rpc == nil || finalized {
		c.closeRequests()
		return
	}
	if err := c.streamRequests(); err != nil {
		c.closeRequests()
		fmt.Fprintf(os.Stderr, "rank %d: rankclient: register the checkpoint coordinator with gompid: %v\n", c.rank, err)
	}
}

// closeRequests closes the requests channel for good.
func (c *Client) closeRequests() {
	c.mu.Lock()
	c.reqClosed = true
	c.mu.Unlock()
	close(c.reqCh)
}

// streamRequests registers the rank's coordinator with gompid and starts
// the goroutine that feeds the stream's requests into reqCh. The
// goroutine's owner is the client: stopRequests ends it (Finalize, Close,
// Detach); it also ends when gompid goes away. It closes reqCh as it ends
// unless the client is detached, when Reattach streams into it again.
func (c *Client) streamRequests() error {
	c.mu.Lock()
	rpc := c.rpc
	c.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := rpc.Requests(ctx, &pb.AppRequestsRequest{Rank: int32(c.rank)}, grpc.WaitForReady(true))
	if err == nil {
		t := time.AfterFunc(readyBound, cancel)
		var first *pb.AppRequestMsg
		if first, err = stream.Recv(); err == nil && !first.GetReady() {
			err = fmt.Errorf("gompid's first message is not the ready mark")
		}
		t.Stop()
	}
	if err != nil {
		cancel()
		return err
	}
	done := make(chan struct{})
	c.mu.Lock()
	c.reqCancel, c.reqDone = cancel, done
	c.mu.Unlock()
	go func() {
		defer close(done)
		defer func() {
			c.mu.Lock()
			keep := c.detached
			c.mu.Unlock()
			if !keep {
				c.closeRequests()
			}
		}()
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			req, err := control.AppRequestFromProto(m)
			if err != nil {
				fmt.Fprintf(os.Stderr, "rank %d: rankclient: %v\n", c.rank, err)
				continue
			}
			select {
			case c.reqCh <- req:
			case <-ctx.Done():
				return
			}
		}
	}()
	return nil
}

// stopRequests ends the requests stream and waits for its goroutine.
func (c *Client) stopRequests() {
	c.mu.Lock()
	cancel, done := c.reqCancel, c.reqDone
	c.reqCancel = nil
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// Reply answers a request of the job's coordinator.
func (c *Client) Reply(ctx context.Context, r snapc.AppReply) error {
	rpc, err := c.daemon("reply")
	if err != nil {
		return err
	}
	if _, err := rpc.Reply(ctx, control.AppReplyToProto(c.rank, r)); err != nil {
		return fmt.Errorf("rankclient: reply to checkpoint request %d: %w", r.ID, err)
	}
	return nil
}

// Checkpoint asks for a checkpoint of the whole job at safe point target
// and returns once it is committed or has failed.
func (c *Client) Checkpoint(ctx context.Context, target uint64, opts crs.Options) (snapc.Result, error) {
	rpc, err := c.daemon("checkpoint")
	if err != nil {
		return snapc.Result{}, err
	}
	resp, err := rpc.Checkpoint(ctx, &pb.RankCheckpointRequest{Rank: int32(c.rank), Target: target, Options: control.OptionsToProto(opts)})
	if err != nil {
		return snapc.Result{}, fmt.Errorf("rankclient: checkpoint at safe point %d: %w", target, err)
	}
	if resp.GetError() != "" {
		return snapc.Result{}, fmt.Errorf("rankclient: checkpoint at safe point %d: %s", target, resp.GetError())
	}
	return snapc.Result{Ref: resp.GetRef(), Dir: resp.GetDir(), Seq: int(resp.GetSeq()), Duration: time.Duration(resp.GetDurationNano())}, nil
}

// daemon returns the connection for a checkpoint call, or why there is none.
func (c *Client) daemon(what string) (pb.DaemonClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.finalized:
		return nil, fmt.Errorf("rankclient: %s: %w", what, ErrFinalized)
	case c.detached:
		return nil, fmt.Errorf("rankclient: %s: %w", what, ErrDetached)
	case c.rpc == nil || c.conn == nil:
		return nil, fmt.Errorf("rankclient: %s: this process has no gompid (a singleton, or closed): run it with gompirun -am ft-enable-cr to checkpoint it", what)
	}
	return c.rpc, nil
}

// Restart says whether this rank was started from a snapshot, and from
// which: gompi-restart's job passes each rank its reference, sequence and
// local snapshot directory.
func (c *Client) Restart() (snapc.RestartInfo, bool) { return c.restart, c.restarting }

// RestoreState returns the library state saved with the rank's local
// snapshot (snapc.LibraryStateFile), or nil when this start is not a
// restart or the snapshot holds none.
func (c *Client) RestoreState() ([]byte, error) {
	if !c.restarting {
		return nil, nil
	}
	b, err := os.ReadFile(filepath.Join(c.restart.Dir, snapc.LibraryStateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rankclient: library state of the restart: %w", err)
	}
	return b, nil
}

// Migrate sends a cr.Migrate request (the communicator leader's, with
// every member's wish) to gompirun; it returns once gompirun accepted it.
func (c *Client) Migrate(ctx context.Context, wishes []errmgr.MigrateWish) error {
	rpc, err := c.daemon("migrate")
	if err != nil {
		return err
	}
	req := &pb.MigrateRequest{Rank: int32(c.rank)}
	for _, w := range wishes {
		req.Wishes = append(req.Wishes, &pb.MigrateWish{Rank: int32(w.Rank), Host: w.Host, Near: int32(w.Near), OffNode: w.OffNode})
	}
	resp, err := rpc.Migrate(ctx, req)
	if err != nil {
		return fmt.Errorf("rankclient: migrate: %w", err)
	}
	if resp.GetError() != "" {
		return fmt.Errorf("rankclient: migrate: %s", resp.GetError())
	}
	return nil
}

var _ snapc.AppLink = (*Client)(nil)
