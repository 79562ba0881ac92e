package rankclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"gompi/mca"
	"gompi/rte"
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
	c.stopBeats()
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
	conn, rpc, hello, err := hello(ctx, sock, c.rank, secrets)
	if err != nil {
		return fmt.Errorf("reattach: %w", err)
	}
	if m.Kind == lifeline.Restart {
		c.warnKeptTransports(control.SettingsFromProto(hello.Settings))
	}
	c.mu.Lock()
	c.conn, c.rpc, c.detached = conn, rpc, false
	c.daemonSock, c.secrets = sock, secrets
	c.node, c.nodeDir, c.rankNodes = hello.Node, hello.NodeDir, hello.RankNodes
	reopen := c.reqCh != nil && !c.reqClosed
	c.mu.Unlock()
	c.startEvents()
	c.startBeats()
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

// lifelineFromEnv opens the lifeline gompid passed (rte.EnvLifelineFDs),
// marks it close-on-exec so programs the rank starts do not hold it, and
// removes the variable. Both files are nil when there is none.
func lifelineFromEnv() (r, w *os.File, err error) {
	v, ok := os.LookupEnv(rte.EnvLifelineFDs)
	os.Unsetenv(rte.EnvLifelineFDs)
	if !ok {
		return nil, nil, nil
	}
	rs, ws, ok := strings.Cut(v, ",")
	rfd, rerr := strconv.Atoi(rs)
	wfd, werr := strconv.Atoi(ws)
	if !ok || rerr != nil || werr != nil || rfd < 3 || wfd < 3 || rfd == wfd {
		return nil, nil, fmt.Errorf("%s=%q: want the lifeline's two descriptors as R,W (3 or above)", rte.EnvLifelineFDs, v)
	}
	for _, fd := range []int{rfd, wfd} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			return nil, nil, fmt.Errorf("%s: descriptor %d: %w", rte.EnvLifelineFDs, fd, err)
		}
		unix.CloseOnExec(fd)
	}
	// Non-blocking, so a read waiting for gompid's word can be given up
	// with a deadline (Pause's ctx).
	if err := unix.SetNonblock(rfd, true); err != nil {
		return nil, nil, fmt.Errorf("%s: descriptor %d: %w", rte.EnvLifelineFDs, rfd, err)
	}
	return os.NewFile(uintptr(rfd), "lifeline-in"), os.NewFile(uintptr(wfd), "lifeline-out"), nil
}

// Pause is the runtime's part of a transparent checkpoint, once package
// mpi has suspended the rank (request id): it detaches from gompid,
// tells gompid over the lifeline that the rank is ready to be dumped,
// and waits for its word: Continue (the dump is taken, or abandoned) or
// Restart (this process was restored from the dump). It then reattaches
// and reports whether this is a restored process. ctx bounds the wait; a
// lifeline that ends means gompid is gone, and the rank with it.
func (c *Client) Pause(ctx context.Context, id uint64) (restarted bool, err error) {
	c.mu.Lock()
	r, w := c.lifeIn, c.lifeOut
	c.mu.Unlock()
	if r == nil {
		return false, fmt.Errorf("rankclient: pause: %w: gompid gave this rank no lifeline (its job's CRS does not save ranks from outside)", errors.ErrUnsupported)
	}
	if err := c.Detach(); err != nil {
		return false, err
	}
	if err := lifeline.Write(w, lifeline.Message{Kind: lifeline.Ready, Request: id}); err != nil {
		return false, fmt.Errorf("rankclient: pause: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { r.SetReadDeadline(time.Now()) })
	m, err := c.awaitWord(r, id)
	if !stop() && ctx.Err() != nil {
		r.SetReadDeadline(time.Time{})
		return false, fmt.Errorf("rankclient: pause: waiting for gompid's word on request %d: %w", id, ctx.Err())
	}
	if err != nil {
		return false, err
	}
	if err := c.Reattach(ctx, m); err != nil {
		return false, err
	}
	return m.Kind == lifeline.Restart, nil
}

// awaitWord reads the lifeline until gompid's word on request id: a word
// on an older request (one given up while this rank waited) is skipped.
func (c *Client) awaitWord(r io.Reader, id uint64) (lifeline.Message, error) {
	for {
		m, err := lifeline.Read(r)
		switch {
		case errors.Is(err, io.EOF):
			return m, fmt.Errorf("rankclient: pause: the lifeline closed: gompid is gone")
		case err != nil:
			return m, fmt.Errorf("rankclient: pause: %w", err)
		case m.Kind == lifeline.Ready || m.Kind == lifeline.Refused:
			return m, fmt.Errorf("rankclient: pause: %w: gompid sent %s", lifeline.ErrBadFrame, m)
		case m.Request >= id || m.Kind == lifeline.Restart:
			return m, nil
		}
	}
}

// Refuse tells gompid over the lifeline that the rank could not be
// quiesced for request id (package mpi's suspension failed or was
// withdrawn), so gompid stops waiting for it. The rank stays attached.
func (c *Client) Refuse(id uint64, reason string) error {
	c.mu.Lock()
	w := c.lifeOut
	c.mu.Unlock()
	if w == nil {
		return fmt.Errorf("rankclient: refuse: %w: gompid gave this rank no lifeline", errors.ErrUnsupported)
	}
	if err := lifeline.Write(w, lifeline.Message{Kind: lifeline.Refused, Request: id, Reason: reason}); err != nil {
		return fmt.Errorf("rankclient: refuse: %w", err)
	}
	return nil
}

// Remodex exchanges the rank's new addresses after a suspension (package
// mpi's Rejoiner): a fence of the job, like the modex at start. Every
// rank resumes from the same suspension, so their fence counts agree.
func (c *Client) Remodex(ctx context.Context, epoch uint64, mine map[string]string) ([]map[string]string, error) {
	t, err := c.fence(ctx, mine)
	if err != nil {
		return nil, fmt.Errorf("rankclient: new addresses after suspension %d: %w", epoch, err)
	}
	return t, nil
}

// warnKeptTransports says once, after a restore, that the restarted job's
// transport settings that differ from the ones this process started with
// are not applied: its library keeps the transport modules it selected at
// Init (the placement still decides which peers share a node). Silence
// would let a user believe a restart's --mca btl took effect.
func (c *Client) warnKeptTransports(now []mca.Setting) {
	var differ []string
	for _, s := range now {
		if (s.Name == "btl" || strings.HasPrefix(s.Name, "btl_")) && c.proc.Values.Has(s.Name) && c.proc.Values.String(s.Name) != s.Value {
			differ = append(differ, fmt.Sprintf("%s = %q (was %q)", s.Name, s.Value, c.proc.Values.String(s.Name)))
		}
	}
	if len(differ) > 0 {
		slog.New(c.proc.LogHandler).Warn("a restored rank keeps the transports it selected when it started; the restart's transport settings are not applied to it",
			"settings", strings.Join(differ, ", "))
	}
}
