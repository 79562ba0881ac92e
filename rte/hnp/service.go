package hnp

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"gompi/frameworks/errmgr"
	"gompi/mca/queue"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
	"gompi/rte/routed"
)

// service serves the daemons' streams and the tools' calls.
type service struct {
	pb.UnimplementedHNPServer
	pb.UnimplementedToolServer
	cur atomic.Pointer[job] // the job's current run (a recovery starts another)
}

func newService(j *job) *service {
	s := &service{}
	s.cur.Store(j)
	return s
}

// job is the run calls go to; a daemon's session stays with the run it
// attached to.
func (s *service) job() *job { return s.cur.Load() }

// Attach is the session of a daemon linked to gompirun, which carries
// its own messages and those of the daemons below it in the tree (marked
// with their origin). Output is printed right here, in the order it
// arrives, before the daemon's next message (its exit report) goes to the
// job: a rank's last words always come before its end.
func (s *service) Attach(stream grpcStream) error {
	j := s.job()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	h := first.GetHello()
	if h == nil {
		return status.Error(codes.InvalidArgument, "hnp: a daemon's first message must be its hello")
	}
	link := &routed.Counter{}
	link.Up(first)
	box := newMailbox()
	d := j.attachEvent(h, box, h.Node, link)
	if d == nil {
		return status.Errorf(codes.FailedPrecondition, "hnp: node %q is not a node of job %s still waiting for its daemon", h.Node, j.id)
	}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		box.run(stream, link)
	}()
	for {
		m, err := stream.Recv()
		if err != nil {
			box.close()
			<-sent
			j.send(evStreamEnd{node: d.node, err: err})
			return nil
		}
		link.Up(m)
		d.lastSeen.Store(time.Now().UnixNano())
		if !j.fromDaemon(d, box, link, m) {
			box.close()
			<-sent
			return nil
		}
	}
}

// attachEvent hands a hello to the job (on the link of d's stream: its
// own, or its ancestor's) and returns the daemon, or nil when refused.
func (j *job) attachEvent(h *pb.DaemonHello, box *mailbox, via string, link *routed.Counter) *dconn {
	reply := make(chan *dconn, 1)
	if !j.send(evAttach{hello: h, box: box, via: via, link: link, reply: reply}) {
		return nil
	}
	return <-reply
}

// fromDaemon handles one message that came up the link of top, from top
// or, relayed, from a daemon below it; false once the job is over.
func (j *job) fromDaemon(top *dconn, box *mailbox, link *routed.Counter, m *pb.DaemonMessage) bool {
	node := top.node
	if m.Origin != "" {
		node = m.Origin
	}
	switch b := m.Body.(type) {
	case *pb.DaemonMessage_Heartbeat:
		if m.Origin == "" {
			top.ack.Store(b.Heartbeat.GetAck())
		}
	case *pb.DaemonMessage_Hello:
		if m.Origin == "" || j.attachEvent(b.Hello, box, top.node, nil) == nil {
			j.log.Warn("a daemon's hello was refused", "node", node, "via", top.node)
		}
	case *pb.DaemonMessage_Output:
		top.busy.Store(true)
		j.print(b.Output)
		top.lastSeen.Store(time.Now().UnixNano())
		top.busy.Store(false)
	case *pb.DaemonMessage_SnapcReply:
		if j.p.global == nil {
			return true
		}
		// The rank count never changes (j.m does, on the actor).
		rep, err := control.LocalReplyFromProto(b.SnapcReply, node, len(j.ranks))
		if err != nil {
			j.log.Warn("bad checkpoint reply", "node", node, "err", err)
			return true
		}
		j.p.global.Deliver(rep)
	case *pb.DaemonMessage_RankCheckpoint:
		// The actor checks that the node runs the rank (the placement
		// is its own: a migration changes it), then the checkpoint
		// runs on a goroutine of its own.
		return j.send(evRankCheckpoint{node: node, m: b.RankCheckpoint})
	default:
		return j.send(evMsg{node: node, m: m})
	}
	return true
}

// Status answers gompi-ps.
func (s *service) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	j := s.job()
	reply := make(chan *pb.StatusResponse, 1)
	if !j.send(evStatus{reply: reply}) {
		return nil, status.Error(codes.Unavailable, "hnp: the job is over")
	}
	select {
	case st := <-reply:
		return st, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// Migrate answers gompi-migrate: the prediction goes to the ErrMgr stack,
// and the answer says what it did, once done. A tool that stops waiting
// does not stop the migration.
func (s *service) Migrate(ctx context.Context, req *pb.MigrateRequest) (*pb.MigrateResponse, error) {
	j := s.job()
	accepted, done := make(chan error, 1), make(chan evFault, 1)
	if !j.send(evPredict{p: predictionFromProto(req, time.Now()), from: "announced with gompi-migrate", accepted: accepted, done: done}) {
		return nil, status.Error(codes.Unavailable, "hnp: the job is over")
	}
	if err := <-accepted; err != nil {
		return &pb.MigrateResponse{Error: err.Error()}, nil
	}
	var e evFault
	select {
	case e = <-done:
	case <-j.done:
		return &pb.MigrateResponse{Error: "the job ended (or was recovered from a failure) before the migration was done; gompirun's output says what happened"}, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	resp := &pb.MigrateResponse{Actions: e.st.Actions, Migrated: e.d == errmgr.Recovered}
	if m := e.mig; resp.Migrated && m != nil {
		resp.Seq = int32(m.res.Seq)
		resp.DurationNano, resp.CheckpointNano, resp.RestartNano = int64(m.res.Took), int64(m.res.Checkpoint), int64(m.res.Restart)
		for _, r := range slices.Sorted(maps.Keys(m.dest)) {
			resp.Moves = append(resp.Moves, &pb.RankMove{Rank: int32(r), From: m.from[r], To: m.dest[r]})
		}
	} else if !resp.Migrated {
		// crmig's own account says why; the stack's last line only that
		// nobody acted.
		resp.Error = "no rank was moved"
		for _, a := range e.st.Actions {
			if strings.HasPrefix(a, "crmig: ") {
				resp.Error += ": " + strings.TrimPrefix(a, "crmig: ")
			}
		}
	}
	return resp, nil
}

// print writes a piece of a rank's output, tagged when asked.
func (j *job) print(o *pb.RankOutput) {
	w, name := j.o.Stdout, "stdout"
	if o.Stream == pb.Stream_STREAM_STDERR {
		w, name = j.o.Stderr, "stderr"
	}
	data := o.Data
	if j.o.TagOutput {
		prefix := fmt.Sprintf("[%s,%d]<%s>:", j.id, o.Rank, name)
		var b bytes.Buffer
		for len(data) > 0 {
			line := data
			if i := bytes.IndexByte(data, '\n'); i >= 0 {
				line = data[:i+1]
			}
			data = data[len(line):]
			b.WriteString(prefix)
			b.Write(line)
			if line[len(line)-1] != '\n' {
				b.WriteByte('\n')
			}
		}
		data = b.Bytes()
	}
	j.outMu.Lock()
	defer j.outMu.Unlock()
	if _, err := w.Write(data); err != nil {
		j.log.Warn("could not print a rank's output", "rank", o.Rank, "err", err)
	}
}

// mailbox is an unbounded, ordered queue of messages to one daemon: the
// job never blocks on a slow daemon. The daemon's Attach owns it: its run
// is the one consumer.
type mailbox struct{ q *queue.Queue[*pb.HNPMessage] }

func newMailbox() *mailbox { return &mailbox{q: queue.New[*pb.HNPMessage]()} }

// put queues m; once the mailbox is closed, m is dropped.
func (b *mailbox) put(m *pb.HNPMessage) { b.q.Put(m) }

// close stops the mailbox once what is queued has been sent.
func (b *mailbox) close() { b.q.Close() }

// run sends the queued messages in order until the mailbox is closed and
// empty or the stream breaks, counting them on link.
func (b *mailbox) run(stream grpcStream, link *routed.Counter) {
	for {
		q, err := b.q.PopAll(context.Background()) // close ends it
		if err != nil {
			return
		}
		for _, m := range q {
			if err := stream.Send(m); err != nil {
				return
			}
			link.Down(m)
		}
	}
}

var (
	_ pb.HNPServer  = (*service)(nil)
	_ pb.ToolServer = (*service)(nil)
)
