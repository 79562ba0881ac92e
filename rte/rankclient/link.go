package rankclient

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"

	"gompi/rte/control"
	pb "gompi/rte/control/proto"
	"gompi/rte/lifeline"
)

// A transparent checkpoint (a CRS that dumps the rank from outside, such
// as criu) needs the rank to own no socket while it is dumped, its
// connection to gompid included. Detach closes that connection and the
// streams on it without ending what package mpi and package cr read:
// the Requests channel stays open and failure notices resume where they
// were. Reattach connects again, to the same gompid after a checkpoint
// that continues, or, in a process restored from the images, to the
// daemon and with the secrets a lifeline Restart message names. Calls to
// gompid made while detached fail with ErrDetached; the library's own
// gate keeps them from being made.

// ErrDetached is wrapped by calls to gompid made between Detach and
// Reattach.
var ErrDetached = errors.New("rankclient: detached from gompid for a checkpoint")

// Detach closes the connection to gompid for a transparent checkpoint.
// The requests stream ends (a request gompid had sent and the client had
// not yet delivered is dropped: gompid sends none to a rank it asked to
// quiesce) and so do failure notices; both come back with Reattach.
func (c *Client) Detach() error {
	c.mu.Lock()
	switch {
	case c.finalized:
		c.mu.Unlock()
		return fmt.Errorf("rankclient: detach: %w", ErrFinalized)
	case c.detached:
		c.mu.Unlock()
		return nil
	case c.conn == nil:
		c.mu.Unlock()
		return errors.New("rankclient: detach: this process has no gompid (a singleton, or closed)")
	}
	c.detached = true
	conn := c.conn
	c.mu.Unlock()
	c.stopEvents()
	c.stopRequests()
	c.mu.Lock()
	c.conn, c.rpc = nil, nil
	c.mu.Unlock()
	if err := conn.Close(); err != nil {
		return fmt.Errorf("rankclient: detach: %w", err)
	}
	return nil
}

// Reattach connects to gompid again after Detach, as m says: Continue
// reconnects to the daemon the rank had; Restart to m.Daemon with
// m.Secrets (the data-plane secret of the restarted launch replaces the
// old one: Secret returns it from now on), and the node the daemon names
// in its hello becomes the rank's node. The requests stream is registered
// again when it was open, feeding the same channel, and failure notices
// start again (gompid repeats those declared meanwhile).
func (c *Client) Reattach(ctx context.Context, m lifeline.Message) error {
	c.mu.Lock()
	detached, sock, secrets := c.detached, c.daemonSock, c.secrets
	c.mu.Unlock()
	if !detached {
		return errors.New("rankclient: reattach: the client is not detached")
	}
	switch m.Kind {
	case lifeline.Continue:
	case lifeline.Restart:
		var err error
		if secrets, err = control.ParseRankSecrets(m.Secrets); err != nil {
			return fmt.Errorf("rankclient: reattach: %w", err)
		}
		sock = m.Daemon
	default:
		return fmt.Errorf("rankclient: reattach: a %s message does not end a checkpoint", m.Kind)
	}
	conn, err := control.DialUnix(sock, secrets.Control)
	if err != nil {
		return fmt.Errorf("rankclient: reattach: %w", err)
	}
	rpc := pb.NewDaemonClient(conn)
	hctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	hello, err := rpc.Hello(hctx, &pb.HelloRequest{Rank: int32(c.rank), Pid: int32(os.Getpid())}, grpc.WaitForReady(true))
	if err != nil {
		conn.Close()
		return fmt.Errorf("rankclient: reattach: hello to gompid at %s: %w", sock, err)
	}
	c.mu.Lock()
	c.conn, c.rpc, c.detached = conn, rpc, false
	c.daemonSock, c.secrets = sock, secrets
	c.node, c.nodeDir, c.rankNodes = hello.Node, hello.NodeDir, hello.RankNodes
	reopen := c.reqCh != nil && !c.reqClosed
	c.mu.Unlock()
	c.startEvents()
	if reopen {
		if err := c.streamRequests(); err != nil {
			return fmt.Errorf("rankclient: reattach: register the checkpoint coordinator with gompid: %w", err)
		}
	}
	return nil
}

// live returns the connection to gompid: nil for a singleton (or a
// closed client), ErrDetached while detached.
func (c *Client) live() (pb.DaemonClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.detached {
		return nil, ErrDetached
	}
	return c.rpc, nil
}
