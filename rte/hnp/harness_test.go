package hnp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gompi/boot"
	"gompi/frameworks/crs"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
	"gompi/rte/mapping"
)

// The harness drives one job's actor from the test's goroutine, the way
// run does (step), with ports of its own: the work the job would run off
// the actor (faults through the ErrMgr stack, migration saves) waits in
// a queue until the test runs it; timers are armed but fire only when the
// test says; the daemons are mailboxes the test reads, their launch
// processes records of Kill calls; the SnapC coordinator records what it
// was told. So a test feeds events and checks what the job sent, with no
// process and no clock.

type harness struct {
	t      *testing.T
	j      *job
	stderr *bytes.Buffer
	work   []func() event
	boxes  map[string]*mailbox
	launch map[string]*testLaunch
	// launched is the Launch each daemon got when the job started.
	launched map[string]*pb.Launch
	global   *testGlobal
	// decide is the ErrMgr stack's only policy (nil: abort every fault).
	decide func(errmgr.Fault, *errmgr.Status) errmgr.Decision
	faults []errmgr.Fault // every fault the stack handled
}

// newHarness builds a job of the mapping's ranks and nodes, with a SnapC
// coordinator when coord is set, and attaches every daemon: the job runs
// (its ranks are launched).
func newHarness(t *testing.T, m mapping.Map, coord bool) *harness {
	t.Helper()
	h := newDetached(t, m, coord)
	for _, n := range m.Nodes {
		h.attach(n, n)
	}
	if h.j.state != jobRunning {
		t.Fatalf("job %s after every daemon attached", h.j.state)
	}
	for _, n := range m.Nodes {
		for _, msg := range h.sent(n) { // the welcome and the launch
			if l := msg.GetLaunch(); l != nil {
				h.launched[n] = l
			}
		}
	}
	return h
}

// attach feeds node's hello, on the link of via (node itself: its own
// stream to gompirun), and fails the test if it is refused.
func (h *harness) attach(node, via string, hello ...*pb.DaemonHello) {
	h.t.Helper()
	hl := &pb.DaemonHello{Node: node, Pid: 100}
	if len(hello) > 0 {
		hl = hello[0]
	}
	if h.boxes[via] == nil {
		h.boxes[via] = newMailbox()
	}
	reply := make(chan *dconn, 1)
	h.step(evAttach{hello: hl, box: h.boxes[via], via: via, reply: reply})
	if <-reply == nil {
		h.t.Fatalf("daemon of %s refused", node)
	}
}

// newDetached builds the job of newHarness, its daemons not attached yet,
// with these settings of gompirun's.
func newDetached(t *testing.T, m mapping.Map, coord bool, settings ...mca.Setting) *harness {
	t.Helper()
	proc, err := boot.Load(context.Background(), boot.Options{Role: mca.RoleHNP, Settings: append([]mca.Setting{}, settings...), NoPlugins: true, LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, stderr: &bytes.Buffer{}, boxes: map[string]*mailbox{}, launch: map[string]*testLaunch{}, launched: map[string]*pb.Launch{}}
	stack := errmgr.NewStack([]errmgr.Named{{Name: "policy", Module: policyFunc(func(f errmgr.Fault, st *errmgr.Status) errmgr.Decision {
		h.faults = append(h.faults, f)
		if h.decide == nil {
			return errmgr.Abort
		}
		return h.decide(f, st)
	})}})
	p := ports{
		stack:  stack,
		stderr: h.stderr,
		now:    time.Now,
		after:  func(time.Duration) <-chan time.Time { return make(chan time.Time) },
		spawn:  func(work func() event, _ func(event) bool) { h.work = append(h.work, work) },
		later:  func(_ time.Duration, e event, _ func(event) bool) { h.work = append(h.work, func() event { return e }) },
	}
	if coord {
		h.global = &testGlobal{ref: snapshot.Ref{Dir: "/g", Name: "job.ckpt"}}
		p.global = h.global
	}
	discard := slog.New(slog.DiscardHandler)
	data, err := control.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	h.j = newJob("j1", data, Options{Proc: proc, Stderr: h.stderr, Stdout: io.Discard}, m, "/bin/app", "/", &boot.HNP{}, p, discard, discard)
	for _, n := range m.Nodes {
		l := &testLaunch{node: n}
		h.launch[n] = l
		h.j.daemons[n].launch = l
	}
	return h
}

func (h *harness) step(e event) { h.j.step(e) }

// settle runs the work the job left off the actor, and feeds the events
// it returns, until none is left.
func (h *harness) settle() {
	for len(h.work) > 0 {
		w := h.work[0]
		h.work = h.work[1:]
		if e := w(); e != nil {
			h.step(e)
		}
	}
}

// msg feeds a daemon's message.
func (h *harness) msg(node string, m *pb.DaemonMessage) { h.step(evMsg{node: node, m: m}) }

func (h *harness) exited(node string, rank int, ex *pb.RankExited) {
	ex.Rank = int32(rank)
	h.msg(node, &pb.DaemonMessage{Body: &pb.DaemonMessage_Exited{Exited: ex}})
}

// sent takes what the job put in node's mailbox since the last call.
func (h *harness) sent(node string) []*pb.HNPMessage {
	b := h.boxes[node]
	if b.q.Len() == 0 {
		return nil
	}
	q, err := b.q.PopAll(context.Background()) // queued: returns at once
	if err != nil {
		h.t.Fatal(err)
	}
	return q
}

// kinds names the bodies of msgs ("Kill", "Fence", ...).
func kinds(msgs []*pb.HNPMessage) []string {
	var out []string
	for _, m := range msgs {
		t := fmt.Sprintf("%T", m.Body) // *controlpb.HNPMessage_Kill
		out = append(out, t[strings.LastIndex(t, "_")+1:])
	}
	return out
}

type policyFunc func(errmgr.Fault, *errmgr.Status) errmgr.Decision

func (p policyFunc) Handle(_ context.Context, f errmgr.Fault, st *errmgr.Status) (errmgr.Decision, error) {
	return p(f, st), nil
}

// testLaunch is a daemon's launch process: its exit is fed by the test.
type testLaunch struct {
	node  string
	kills int
}

func (l *testLaunch) Node() string { return l.node }
func (l *testLaunch) PID() int     { return 0 }
func (l *testLaunch) Wait() error  { panic("the harness feeds launch exits as events") }
func (l *testLaunch) Kill() error  { l.kills++; return nil }

// testGlobal is a SnapC coordinator that records what the job told it;
// a migration's save commits sequence seq (or fails with saveErr).
type testGlobal struct {
	mu       sync.Mutex
	ref      snapshot.Ref
	seq      int
	saveErr  error
	closed   []string
	lost     []string
	released []snapc.Release
	placed   [][]string
	appCkpt  []int
}

func (g *testGlobal) Checkpoint(_ context.Context, req snapc.Request, _ func(snapc.Event)) (snapc.Result, error) {
	return snapc.Result{Seq: g.seq}, g.saveErr
}

func (g *testGlobal) AppCheckpoint(_ context.Context, rank int, _ uint64, _ crs.Options) (snapc.Result, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.appCkpt = append(g.appCkpt, rank)
	return snapc.Result{Seq: g.seq}, nil
}
func (g *testGlobal) Deliver(snapc.LocalReply) {}
func (g *testGlobal) NodeLost(node, why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lost = append(g.lost, node)
}
func (g *testGlobal) Close(why error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = append(g.closed, why.Error())
}
func (g *testGlobal) Ref() snapshot.Ref { return g.ref }
func (g *testGlobal) Release(rel snapc.Release) error {
	g.released = append(g.released, rel)
	return nil
}
func (g *testGlobal) Place(rankNodes []string) { g.placed = append(g.placed, slices.Clone(rankNodes)) }

var _ snapc.Global = (*testGlobal)(nil)

var errSave = errors.New("save failed")
