package rankclient

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"gompi/frameworks/plm"
	pb "gompi/rte/control/proto"
)

// The rank's side of the unresponsive-rank detector (gompid's
// liveness.go): while attached to gompid, a goroutine of the client's
// beats on a Heartbeat stream every errmgr_base_rank_heartbeat_period. It
// runs whatever the application does, so a rank that computes without
// calling MPI is not taken for a dead one; only a process that does not
// run at all (stopped, never scheduled) falls silent. Detach ends the
// stream (gompid stops watching the rank for the dump) and Reattach opens
// a new one.

// startBeats opens the heartbeat stream when the job's period is not 0.
func (c *Client) startBeats() {
	period := time.Duration(0)
	if c.proc != nil && c.proc.Values.Has(plm.ParamRankHBPeriod) {
		period = c.proc.Values.Duration(plm.ParamRankHBPeriod)
	}
	if c.rpc == nil || period <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c.mu.Lock()
	c.hbCancel, c.hbDone = cancel, done
	rpc := c.rpc
	c.mu.Unlock()
	// Its owner is the client: stopBeats (Detach, Close) ends it and
	// waits. It ends by itself when the stream breaks (gompid gone).
	go func() {
		defer close(done)
		stream, err := rpc.Heartbeat(ctx, grpc.WaitForReady(true))
		if err != nil {
			return
		}
		tick := time.NewTicker(period)
		defer tick.Stop()
		beat := &pb.RankBeat{Rank: int32(c.rank)}
		for {
			if err := stream.Send(beat); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				_, _ = stream.CloseAndRecv()
				return
			case <-tick.C:
			}
		}
	}()
}

// stopBeats ends the heartbeat stream and waits for its goroutine.
func (c *Client) stopBeats() {
	c.mu.Lock()
	cancel, done := c.hbCancel, c.hbDone
	c.hbCancel = nil
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
