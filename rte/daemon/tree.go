package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"gompi/frameworks/plm"
	"gompi/mca/queue"
	"gompi/rte"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
	"gompi/rte/routed"
)

// The daemon's place in the job's daemon tree (package rte/routed). A
// daemon attaches to its parent (gompirun, or the daemon the tree's shape
// names: its Unix socket in its node directory on this machine, or the
// address gompirun's Locate gives over TCP) and, when the shape gives it
// children, serves them the same Attach service gompirun serves, with
// the same authentication: the job's secret on every call, TLS with a
// certificate of its own whose pin its children get from gompirun. It
// relays its children's messages up (marked with their origin; its
// children's fence contributions it merges into its own, fence.go) and
// gompirun's messages down to the children whose subtree they are for
// (route). It watches its children's heartbeats and reports a child it
// lost; it leaves only after its children have left, so their last
// messages pass through it.

// tree is the daemon's part of the tree: its children and routes. Its
// methods are safe for concurrent use; each child's stream is served by
// its own Attach call (the child's goroutine), which owns the child.
type tree struct {
	// opts and hs are how the daemon reaches gompirun, to ask where to
	// attach when its parent is lost; out is its outbox, conn its
	// connection to its parent (replaced when it attaches elsewhere).
	opts Options
	hs   control.Handshake
	out  *outbox
	conn *grpc.ClientConn
	// stream is the stream to the parent (under mu).
	stream hnpStream

	node   string
	shape  routed.Tree
	parent string // the node attached to; routed.Root: gompirun
	table  *routed.Table
	log    *slog.Logger
	// send queues a message up (the daemon's outbox).
	send func(*pb.DaemonMessage)
	// contacts are where children reach the daemon, pin its certificate's
	// (TCP); none for a leaf.
	contacts []string
	pin      []byte
	stop     func()

	// fence takes a child's fence contribution (the daemon's merge, set
	// once the daemon runs; a child contributes only after the launch).
	fence atomic.Pointer[func(*pb.FenceContribution)]
	// lastSeq is the last of gompirun's messages received.
	lastSeq atomic.Uint64

	mu       sync.Mutex
	children map[string]*child
	counts   map[string]*routed.Counter // every child's link, also those that left
	leaving  bool
	changed  chan struct{} // closed and replaced when a child leaves
}

// child is one child's link.
type child struct {
	node     string
	box      *queue.Queue[*pb.HNPMessage] // down; its Attach sends it
	link     *routed.Counter
	lastSeen atomic.Int64
	ack      atomic.Uint64
	// cut ends its stream (heartbeats stopped), with why.
	cut func(why string)
}

func newTree(node string, hs control.Handshake, parent string, log *slog.Logger) *tree {
	return &tree{node: node, hs: hs, shape: routed.New(hs.Nodes, hs.Radix), parent: parent, table: routed.NewTable(), log: log,
		children: map[string]*child{}, counts: map[string]*routed.Counter{}, changed: make(chan struct{})}
}

// finishChildren bounds how long a leaving daemon waits for its children
// to leave before it does.
const finishChildren = 12 * time.Second

// parentName names where the daemon attaches, for messages.
func (t *tree) parentName(opts Options) string {
	if t.parent == routed.Root {
		return fmt.Sprintf("gompirun at %v", opts.HNP)
	}
	return "parent daemon " + t.parent
}

// dialParent connects to where the daemon attaches: gompirun, or its
// parent in the tree. On this machine (Unix sockets) the parent's socket
// is in its node directory; over TCP gompirun says where it listens.
func dialParent(ctx context.Context, opts Options, hs control.Handshake) (*grpc.ClientConn, string, error) {
	p := routed.New(hs.Nodes, hs.Radix).Parent(opts.Node)
	switch {
	case p == routed.Root:
		conn, err := control.Dial(opts.HNP, hs.Secret, hs.Pin)
		return conn, routed.Root, err
	case opts.HNP[0].Network == "unix":
		sock := filepath.Join(rte.NodeDir(rte.SessionBase(opts.SessionDir), opts.Job, p), rte.TreeSocket)
		conn, err := control.DialParent([]control.Contact{{Network: "unix", Addr: sock}}, hs.Secret, nil)
		return conn, p, err
	}
	return locate(ctx, opts, hs, "")
}

// locate asks gompirun where to attach (lost: the parent the daemon lost)
// and connects there.
func locate(ctx context.Context, opts Options, hs control.Handshake, lost string) (*grpc.ClientConn, string, error) {
	hnp, err := control.Dial(opts.HNP, hs.Secret, hs.Pin)
	if err != nil {
		return nil, "", err
	}
	defer hnp.Close()
	resp, err := pb.NewHNPClient(hnp).Locate(ctx, &pb.LocateRequest{Node: opts.Node, Lost: lost}, grpc.WaitForReady(true))
	if err != nil {
		return nil, "", fmt.Errorf("ask gompirun where to attach: %w", err)
	}
	if resp.GetParent() == routed.Root {
		conn, err := control.Dial(opts.HNP, hs.Secret, hs.Pin)
		return conn, routed.Root, err
	}
	contacts, err := control.ParseContacts(strings.Join(resp.GetContacts(), ","))
	if err != nil {
		return nil, "", fmt.Errorf("the address of parent %s: %w", resp.GetParent(), err)
	}
	conn, err := control.DialParent(contacts, hs.Secret, resp.GetPin())
	return conn, resp.GetParent(), err
}

// serve listens for the daemon's children, if the tree gives it any: on
// a Unix socket in its node directory when the job's daemons are on this
// machine, else on TCP with a certificate of its own.
func (t *tree) serve(nodeDir, network string, secret control.Secret) error {
	if len(t.shape.Children(t.node)) == 0 {
		return nil
	}
	var l net.Listener
	var creds credentials.TransportCredentials
	if network == "unix" {
		sock := filepath.Join(nodeDir, rte.TreeSocket)
		ul, err := control.ListenUnix(sock)
		if err != nil {
			return fmt.Errorf("gompid: listen for child daemons: %w", err)
		}
		l, t.contacts = ul, []string{"unix:" + sock}
	} else {
		cert, pin, err := control.NewCertificate()
		if err != nil {
			return fmt.Errorf("gompid: %w", err)
		}
		tl, addrs, err := control.ListenTCP("")
		if err != nil {
			return fmt.Errorf("gompid: listen for child daemons: %w", err)
		}
		l, t.contacts, t.pin = tl, addrs, pin
		creds = credentials.NewTLS(control.ServerTLS(cert))
	}
	srv := control.NewServer(secret, creds)
	pb.RegisterHNPServer(srv, &treeService{t: t})
	go srv.Serve(l)
	t.stop = srv.Stop
	return nil
}

// treeService is the Attach service a daemon serves its children.
type treeService struct {
	pb.UnimplementedHNPServer
	t *tree
}

type childStream = grpc.BidiStreamingServer[pb.DaemonMessage, pb.HNPMessage]

// Attach is one child's session: its hello goes up, gompirun's messages
// for its subtree come down, and its subtree's messages go up until the
// stream ends, its heartbeats stop, or it leaves.
func (s *treeService) Attach(stream childStream) error {
	t := s.t
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	h := first.GetHello()
	if h == nil || h.Node == "" || first.Origin != "" {
		return status.Error(codes.InvalidArgument, "gompid: a child daemon's first message must be its hello")
	}
	ctx, cancel := context.WithCancelCause(stream.Context())
	defer cancel(nil)
	c, err := t.adopt(h, func(why string) { cancel(errors.New(why)) })
	if err != nil {
		return err
	}
	c.link.Up(first)
	t.send(&pb.DaemonMessage{Body: first.Body, Origin: h.Node})
	go func() {
		for {
			q, err := c.box.PopAll(ctx)
			if err != nil {
				return
			}
			for _, m := range q {
				if err := stream.Send(m); err != nil {
					cancel(err)
					return
				}
				c.link.Down(m)
			}
		}
	}()
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			c.link.Up(m)
			c.lastSeen.Store(time.Now().UnixNano())
			t.fromChild(c, m)
		}
	}()
	var why string
	select {
	case err := <-recvErr:
		why = "its stream ended"
		if status.Code(err) != codes.Canceled && !errors.Is(err, context.Canceled) && err.Error() != "EOF" {
			why += " (" + err.Error() + ")"
		}
	case <-ctx.Done():
		why = context.Cause(ctx).Error()
	}
	t.left(c, why)
	return nil
}

// adopt records a child that attached (again: its new stream replaces a
// broken one's record).
func (t *tree) adopt(h *pb.DaemonHello, cut func(string)) (*child, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.leaving {
		return nil, status.Error(codes.Unavailable, "gompid: leaving; attach elsewhere")
	}
	if old := t.children[h.Node]; old != nil {
		old.cut("it attached again")
	}
	c := &child{node: h.Node, box: queue.New[*pb.HNPMessage](), link: &routed.Counter{}, cut: cut}
	c.lastSeen.Store(time.Now().UnixNano())
	t.children[h.Node] = c
	t.counts[h.Node] = c.link
	t.table.Learn(h.Node, h.Node)
	for _, n := range h.Subtree {
		t.table.Learn(n, h.Node)
	}
	return c, nil
}

// left forgets a child whose stream ended, and the routes through it, and
// reports it lost unless the daemon is leaving (it then waits for its
// children to leave).
func (t *tree) left(c *child, why string) {
	c.box.Close()
	t.mu.Lock()
	current := t.children[c.node] == c
	if current {
		delete(t.children, c.node)
		close(t.changed)
		t.changed = make(chan struct{})
	}
	leaving := t.leaving
	t.mu.Unlock()
	if !current {
		return // replaced by its new stream
	}
	t.table.Forget(c.node)
	if !leaving {
		t.log.Warn("lost a child daemon", "child", c.node, "why", why)
		t.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_ChildLost{ChildLost: &pb.ChildLost{Node: c.node, Detail: why}}})
	}
}

// fromChild passes a child's message on: heartbeats stay here, a fence
// contribution is merged into the daemon's own, the rest goes up marked
// with its origin (a relayed hello teaches the route to its node).
func (t *tree) fromChild(c *child, m *pb.DaemonMessage) {
	switch b := m.Body.(type) {
	case *pb.DaemonMessage_Heartbeat:
		if m.Origin == "" {
			c.ack.Store(b.Heartbeat.GetAck())
			return
		}
	case *pb.DaemonMessage_Hello:
		if m.Origin != "" {
			t.table.Learn(m.Origin, c.node)
			for _, n := range b.Hello.Subtree {
				t.table.Learn(n, c.node)
			}
		}
	case *pb.DaemonMessage_Fence:
		if f := t.fence.Load(); f != nil && m.Origin == "" {
			(*f)(b.Fence)
			return
		}
	}
	if m.Origin == "" {
		m.Origin = c.node
	} else if via, ok := t.table.Via(m.Origin); !ok || via != c.node {
		t.log.Warn("dropped a message a child relayed for a node not below it", "child", c.node, "origin", m.Origin)
		return
	}
	t.send(m)
}

// route passes one of gompirun's messages down to the children whose
// subtree it is for, and reports whether it is for this daemon too.
func (t *tree) route(m *pb.HNPMessage) (mine bool) {
	if s := m.GetSeq(); s > t.lastSeq.Load() {
		t.lastSeq.Store(s)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if m.All {
		for _, c := range t.children {
			c.box.Put(m)
		}
		return true
	}
	if len(m.To) == 0 {
		return true
	}
	byChild, rest := t.table.Split(m.To)
	for cn, to := range byChild {
		if c := t.children[cn]; c != nil {
			c.box.Put(&pb.HNPMessage{Body: m.Body, To: to, Seq: m.Seq})
		}
	}
	return slices.Contains(rest, t.node)
}

// beat tells the daemon's parent it lives, every period, until ctx ends
// or nothing more goes up. The daemon does not watch its parent the same
// way: it learns of a lost parent from its stream (a stopped parent is
// found silent by its own parent, which ends it), of a lost HNP from its
// stream, its standard input, its parent-death signal, and, across
// machines, TCP keepalive.
func (t *tree) beat(ctx context.Context, period time.Duration) {
	if period <= 0 {
		return
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.out.done:
			return
		case <-tick.C:
			t.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Heartbeat{Heartbeat: &pb.Heartbeat{Ack: t.ack()}}})
		}
	}
}

// beatPeriod is the job's errmgr_base_heartbeat_period, read from its
// welcome (before the daemon resolves the job's parameters); 1s when
// absent or malformed.
func beatPeriod(settings []*pb.Setting) time.Duration {
	for _, s := range settings {
		if s.GetName() == plm.ParamHBPeriod {
			if d, err := time.ParseDuration(s.GetValue()); err == nil {
				return d
			}
		}
	}
	return time.Second
}

// ack is the heartbeat's: the lowest last sequence received in the
// daemon's subtree.
func (t *tree) ack() uint64 {
	a := t.lastSeq.Load()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.children {
		a = min(a, c.ack.Load())
	}
	return a
}

// watch cuts the children silent for timeout; it ends with ctx.
func (t *tree) watch(ctx context.Context, timeout time.Duration) {
	if timeout <= 0 {
		return
	}
	every := min(max(timeout/10, 10*time.Millisecond), time.Second)
	tick := time.NewTicker(every)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			stalled := now.Sub(last) > timeout/2 // gompid itself did not run
			last = now
			t.mu.Lock()
			for _, c := range t.children {
				if stalled {
					c.lastSeen.Store(now.UnixNano())
				} else if silent := now.Sub(time.Unix(0, c.lastSeen.Load())); silent > timeout {
					c.cut(fmt.Sprintf("no heartbeat for %v", silent.Round(time.Millisecond)))
				}
			}
			t.mu.Unlock()
		}
	}
}

// leave waits (up to bound) for the children to leave, and returns what
// was counted on every child's link.
func (t *tree) leave(bound time.Duration) map[string]*pb.LinkStats {
	deadline := time.After(bound)
wait:
	for {
		t.mu.Lock()
		t.leaving = true
		n, changed := len(t.children), t.changed
		t.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.log.Warn("child daemons did not leave in time", "left", n, "bound", bound)
			break wait
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]*pb.LinkStats, len(t.counts))
	for n, c := range t.counts {
		out[n] = c.Stats()
	}
	return out
}

// upstream is the current stream to the parent.
func (t *tree) upstream() hnpStream {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stream
}

// reattachTries bounds how often a daemon that lost its parent asks
// gompirun for another before it gives up (and ends, as when gompirun is
// lost).
const reattachTries = 3

// reattach attaches the daemon to a live ancestor after its stream to its
// parent broke (cause), keeping its children, and returns the new stream:
// gompirun sends it again what it sent the subtree since the daemon's
// last message, and asks the subtree for its state again (Resync). An
// error wrapping ErrHNPLost when the parent was gompirun or none is left.
func (d *daemon) reattach(ctx context.Context, cause error) (hnpStream, error) {
	t := d.tree
	if t == nil || t.parent == routed.Root {
		return nil, fmt.Errorf("%w: %w", ErrHNPLost, cause)
	}
	for range reattachTries {
		lost := t.parent
		d.log.Warn("lost the parent daemon; attaching to a live ancestor", "parent", lost, "why", cause)
		conn, parent, err := locate(ctx, t.opts, t.hs, lost)
		if err != nil {
			return nil, fmt.Errorf("%w: parent daemon %s lost (%v), and %w", ErrHNPLost, lost, cause, err)
		}
		stream, err := pb.NewHNPClient(conn).Attach(ctx, grpc.WaitForReady(true))
		if err == nil {
			err = stream.Send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Hello{Hello: &pb.DaemonHello{
				Node: t.node, Pid: int32(os.Getpid()), NodeDir: d.nodeDir, Contacts: t.contacts, Pin: t.pin,
				Reattach: true, Subtree: t.table.Below(""), LastSeq: t.lastSeq.Load(), Parent: parent}}})
		}
		t.conn.Close()
		t.conn, t.parent = conn, parent
		if err != nil {
			cause = err
			continue
		}
		t.mu.Lock()
		t.stream = stream
		t.mu.Unlock()
		if !t.out.swap(stream) {
			return nil, fmt.Errorf("%w: %w", ErrHNPLost, cause)
		}
		d.log.Info("attached again", "parent", parent)
		return stream, nil
	}
	return nil, fmt.Errorf("%w: could not attach again after losing the parent daemon: %w", ErrHNPLost, cause)
}

// resync sends again what may have been lost with a lost parent: each
// rank's start, phase and end, and the contributions of the fences sent
// but not completed. gompirun takes each once.
func (d *daemon) resync() {
	d.mu.Lock()
	var msgs []*pb.DaemonMessage
	for _, r := range slices.Sorted(maps.Keys(d.ranks)) {
		rk := d.ranks[r]
		if rk.pid > 0 {
			msgs = append(msgs, &pb.DaemonMessage{Body: &pb.DaemonMessage_Started{Started: &pb.RankStarted{Rank: int32(r), Pid: int32(rk.pid)}}})
		}
		phase := pb.Phase_PHASE_UNSPECIFIED
		switch {
		case rk.exit != nil:
			msgs = append(msgs, &pb.DaemonMessage{Body: &pb.DaemonMessage_Exited{Exited: rk.exit}})
		case rk.phase == rankConnected:
			phase = pb.Phase_PHASE_CONNECTED
		case rk.phase == rankFinalizing:
			phase = pb.Phase_PHASE_FINALIZING
		}
		if phase != pb.Phase_PHASE_UNSPECIFIED {
			msgs = append(msgs, &pb.DaemonMessage{Body: &pb.DaemonMessage_Phase{Phase: &pb.RankPhase{Rank: int32(r), Phase: phase}}})
		}
	}
	for _, seq := range slices.Sorted(maps.Keys(d.fences)) {
		if f := d.fences[seq]; f.sent && !isClosed(f.done) {
			msgs = append(msgs, &pb.DaemonMessage{Body: &pb.DaemonMessage_Fence{Fence: contributionOf(seq, f)}})
		}
	}
	d.mu.Unlock()
	for _, m := range msgs {
		d.send(m)
	}
	d.send(&pb.DaemonMessage{Body: &pb.DaemonMessage_Resynced{Resynced: &pb.Resynced{}}})
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
