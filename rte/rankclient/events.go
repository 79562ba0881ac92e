package rankclient

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "gompi/rte/control/proto"
)

// A rank learns of failed ranks from its daemon (Daemon.Events) as soon as
// gompirun declares them, whether or not it is waiting on them: the job
// runs on after a failure (errmgr sustain) and package mpi fails what
// involves them (mpi.Proc.MarkFailed). The stream is opened at Init and
// read on its own goroutine; failures are recorded, so a callback
// registered later (OnFailed) hears of those already known first.

// failures is the record of declared-failed ranks and who hears of them.
type failures struct {
	failMu sync.Mutex // serializes recording and the callback's calls
	failed map[int]string
	order  []int // in the order declared
	notify func(rank int, why string)
}

// OnFailed registers fn to be called once for each rank the runtime
// declares failed: first, before OnFailed returns, for those declared
// already, then as each declaration arrives, on the client's own
// goroutine. Calls are never concurrent. fn must not block for long (the
// next notices wait behind it) and must not call OnFailed. Registering
// again replaces fn, which then hears of every failure declared so far.
func (c *Client) OnFailed(fn func(rank int, why string)) {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	c.notify = fn
	if fn == nil {
		return
	}
	for _, r := range c.order {
		fn(r, c.failed[r])
	}
}

// Failed returns the ranks the runtime declared failed so far, ascending.
func (c *Client) Failed() []int {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	out := slices.Clone(c.order)
	slices.Sort(out)
	return out
}

// noteFailed records ranks declared failed and tells the callback of the
// new ones. Out-of-range ranks and this rank itself (a rank that reads
// this is alive) are ignored.
func (c *Client) noteFailed(ranks []int32, why string) {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	for _, r32 := range ranks {
		r := int(r32)
		if r < 0 || r >= c.size || r == c.rank {
			continue
		}
		if _, known := c.failed[r]; known {
			continue
		}
		if c.failed == nil {
			c.failed = map[int]string{}
		}
		c.failed[r] = why
		c.order = append(c.order, r)
		if c.notify != nil {
			c.notify(r, why)
		}
	}
}

// startEvents opens the events stream and reads it until the client
// closes or the daemon goes away.
func (c *Client) startEvents() {
	if c.rpc == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c.mu.Lock()
	c.evCancel, c.evDone = cancel, done
	rpc := c.rpc
	c.mu.Unlock()
	go func() {
		defer close(done)
		stream, err := rpc.Events(ctx, &pb.EventsRequest{Rank: int32(c.rank)}, grpc.WaitForReady(true))
		if err != nil {
			c.eventsEnded(ctx, err)
			return
		}
		for {
			ev, err := stream.Recv()
			if err != nil {
				c.eventsEnded(ctx, err)
				return
			}
			why := ev.GetWhy()
			if why == "" {
				why = "declared failed by gompirun"
			}
			c.noteFailed(ev.GetFailed(), why)
		}
	}()
}

// eventsEnded reports a stream that ended for another reason than the
// client closing it: the rank then no longer hears of failures.
func (c *Client) eventsEnded(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled:
		return // the daemon left: the job is over for this rank too
	case codes.Unimplemented:
		fmt.Fprintf(os.Stderr, "rank %d: rankclient: gompid does not report failed ranks (an older gompid?): this rank will learn of failures only through broken connections\n", c.rank)
		return
	}
	fmt.Fprintf(os.Stderr, "rank %d: rankclient: failure notices from gompid ended: %v\n", c.rank, err)
}

// stopEvents ends the events stream and waits for its goroutine.
func (c *Client) stopEvents() {
	c.mu.Lock()
	cancel, done := c.evCancel, c.evDone
	c.evCancel = nil
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
