package daemon

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"gompi/frameworks/crs"
	"gompi/frameworks/plm"
	"gompi/mca"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
)

// harness is the daemon without its connections: the test feeds it
// gompirun's messages (handle), its ranks' control calls (rankService)
// and, through small real processes, its ranks' exits, and reads what it
// sends gompirun and which signals it sends its ranks.
type harness struct {
	t    *testing.T
	d    *daemon
	svc  *rankService
	data control.Secret // the data-plane secret the harness's launches carry

	mu      sync.Mutex
	sent    []*pb.DaemonMessage
	signals []signalled
	changed chan struct{} // closed and replaced on each record
}

type signalled struct {
	pid int
	sig syscall.Signal
}

func newHarness(t *testing.T) *harness { t.Helper(); return newHarnessCRS(t, "") }

// newHarnessCRS is a harness whose job's settings name crsName as the
// job's CRS ("" for none).
func newHarnessCRS(t *testing.T, crsName string) *harness {
	t.Helper()
	params := mca.NewParams()
	plm.NewFramework(params)
	mca.NewFramework[crs.Module](params, crs.Name, "the job's CRS, as gompirun chose it")
	var settings []mca.Setting
	if crsName != "" {
		settings = append(settings, mca.Setting{Name: crs.Name, Value: crsName})
	}
	vals, err := params.ResolveSettings(settings)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := control.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	data, err := control.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, data: data, changed: make(chan struct{})}
	cr := &crState{log: slog.New(slog.DiscardHandler), apps: map[int]*appConn{}, pending: map[uint64]chan *pb.RankCheckpointDone{}}
	h.d = newDaemon(Options{Job: "feed0001", Node: "n1"}, slog.New(slog.DiscardHandler), t.TempDir(), secret, vals, nil, cr,
		ports{send: h.record, gone: make(chan struct{})})
	signal := h.d.ports.signal
	h.d.ports.signal = func(pid int, sig syscall.Signal) error {
		h.mu.Lock()
		h.signals = append(h.signals, signalled{pid, sig})
		h.mu.Unlock()
		return signal(pid, sig)
	}
	h.svc = &rankService{d: h.d}
	t.Cleanup(func() {
		h.d.killAll(syscall.SIGKILL)
		h.d.waitRanks(10 * time.Second)
	})
	return h
}

func (h *harness) record(m *pb.DaemonMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sent = append(h.sent, m)
	close(h.changed)
	h.changed = make(chan struct{})
}

// waitSent waits until n messages matching pick were sent and returns them.
func (h *harness) waitSent(n int, what string, pick func(*pb.DaemonMessage) bool) []*pb.DaemonMessage {
	h.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		h.mu.Lock()
		var got []*pb.DaemonMessage
		for _, m := range h.sent {
			if pick(m) {
				got = append(got, m)
			}
		}
		changed := h.changed
		h.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-changed:
		case <-deadline:
			h.t.Fatalf("%d %s sent, want %d", len(got), what, n)
		}
	}
}

// sentNow returns the messages matching pick sent so far.
func (h *harness) sentNow(pick func(*pb.DaemonMessage) bool) []*pb.DaemonMessage {
	h.mu.Lock()
	defer h.mu.Unlock()
	var got []*pb.DaemonMessage
	for _, m := range h.sent {
		if pick(m) {
			got = append(got, m)
		}
	}
	return got
}

func isStarted(m *pb.DaemonMessage) bool { return m.GetStarted() != nil }
func isExited(m *pb.DaemonMessage) bool  { return m.GetExited() != nil }
func isFence(m *pb.DaemonMessage) bool   { return m.GetFence() != nil }
func isPhase(p pb.Phase) func(*pb.DaemonMessage) bool {
	return func(m *pb.DaemonMessage) bool { return m.GetPhase() != nil && m.GetPhase().Phase == p }
}

// launch sends the job's Launch for ranks of a job of size running
// sh -c script, and waits for their Started reports.
func (h *harness) launch(size int32, script string, ranks ...int32) map[int32]int32 {
	h.t.Helper()
	if h.d.handle(h.t.Context(), &pb.HNPMessage{Body: &pb.HNPMessage_Launch{Launch: &pb.Launch{
		Program: "/bin/sh", Args: []string{"-c", script}, Size: size, Ranks: ranks, DataSecret: h.data.Bytes()}}}) {
		h.t.Fatal("a Launch ended the daemon")
	}
	pids := map[int32]int32{}
	for _, m := range h.waitSent(len(ranks), "Started", isStarted) {
		s := m.GetStarted()
		if s.Error != "" || s.Pid <= 0 {
			h.t.Fatalf("rank %d did not start: %+v", s.Rank, s)
		}
		pids[s.Rank] = s.Pid
	}
	return pids
}

// exits waits for n exit reports and returns them by rank.
func (h *harness) exits(n int) map[int32]*pb.RankExited {
	h.t.Helper()
	out := map[int32]*pb.RankExited{}
	for _, m := range h.waitSent(n, "Exited", isExited) {
		out[m.GetExited().Rank] = m.GetExited()
	}
	return out
}

func (h *harness) state() daemonState {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	return h.d.state
}

// Ranks that end by themselves are reported with their status, after
// their start; a second Launch starts nothing.
func TestHarnessLaunchAndExit(t *testing.T) {
	forEachShape(t, func(t *testing.T, h *harness) {
		if s := h.state(); s != awaitingLaunch {
			t.Fatalf("state %v before the launch", s)
		}
		h.launch(2, "exit 3", 0, 1)
		if s := h.state(); s != running {
			t.Errorf("state %v after the launch, want running", s)
		}
		ex := h.exits(2)
		for r := range int32(2) {
			e := ex[r]
			if e == nil || e.ExitCode != 3 || e.Signal != 0 || e.Connected || e.Finalized || e.Killed {
				t.Errorf("rank %d exit %+v, want status 3, never connected, not killed", r, e)
			}
		}
		h.d.handle(t.Context(), &pb.HNPMessage{Body: &pb.HNPMessage_Launch{Launch: &pb.Launch{
			Program: "/bin/sh", Args: []string{"-c", "exit 0"}, Size: 2, Ranks: []int32{0, 1}}}})
		if n := len(h.sentNow(isStarted)); n != 2 {
			t.Errorf("%d Started after a second launch, want 2", n)
		}
		// Every report of a rank comes after its start.
		h.mu.Lock()
		seen := map[int32]bool{}
		for _, m := range h.sent {
			if s := m.GetStarted(); s != nil {
				seen[s.Rank] = true
			}
			if e := m.GetExited(); e != nil && !seen[e.Rank] {
				t.Errorf("rank %d's exit before its start", e.Rank)
			}
		}
		h.mu.Unlock()
	})
}

// The ranks' calls become phases, a fence contribution and an abort; a
// Kill ends them with SIGTERM, and their exits say what they reached.
func TestHarnessControlCallsAndKill(t *testing.T) {
	forEachShape(t, func(t *testing.T, h *harness) {
		pids := h.launch(2, "exec sleep 60", 0, 1)
		ctx := t.Context()
		for range 2 { // a second hello is not a new phase
			resp, err := h.svc.Hello(ctx, &pb.HelloRequest{Rank: 0})
			if err != nil || resp.Job != "feed0001" || resp.Size != 2 || resp.Node != "n1" {
				t.Fatalf("hello: %+v, %v", resp, err)
			}
		}
		if _, err := h.svc.Hello(ctx, &pb.HelloRequest{Rank: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Hello(ctx, &pb.HelloRequest{Rank: 5}); status.Code(err) != codes.NotFound {
			t.Errorf("hello of a rank not on the node: %v", err)
		}
		if got := h.waitSent(2, "connected phases", isPhase(pb.Phase_PHASE_CONNECTED)); len(got) != 2 {
			t.Errorf("%d connected phases, want one per rank", len(got))
		}

		// The fence: the node's contribution goes once both ranks joined;
		// gompirun's answer reaches both.
		answers := make(chan *pb.FenceResponse, 2)
		join := func(r int32) {
			resp, err := h.svc.Fence(ctx, &pb.FenceRequest{Rank: r, Seq: 1, Data: map[string]string{"ep": string('a' + rune(r))}})
			if err != nil {
				t.Error(err)
			}
			answers <- resp
		}
		go join(0)
		time.Sleep(20 * time.Millisecond)
		if n := len(h.sentNow(isFence)); n != 0 {
			t.Fatalf("contribution sent with one of two ranks in the fence")
		}
		go join(1)
		c := h.waitSent(1, "fence contributions", isFence)[0].GetFence()
		if c.Seq != 1 || len(c.Entries) != 2 || c.Entries[0].Rank != 0 || c.Entries[1].Rank != 1 || c.Entries[1].Data["ep"] != "b" {
			t.Errorf("contribution %v", c)
		}
		h.d.handle(ctx, &pb.HNPMessage{Body: &pb.HNPMessage_Fence{Fence: &pb.FenceComplete{Seq: 1, Entries: c.Entries}}})
		for range 2 {
			if resp := <-answers; resp == nil || !proto.Equal(resp, &pb.FenceResponse{Entries: c.Entries}) {
				t.Errorf("fence answer %v", resp)
			}
		}

		if _, err := h.svc.Finalize(ctx, &pb.FinalizeRequest{Rank: 1}); err != nil {
			t.Fatal(err)
		}
		h.waitSent(1, "finalizing phases", isPhase(pb.Phase_PHASE_FINALIZING))
		if _, err := h.svc.Abort(ctx, &pb.AbortRequest{Rank: 0, Code: 7, Message: "bye"}); err != nil {
			t.Fatal(err)
		}
		ab := h.waitSent(1, "aborts", func(m *pb.DaemonMessage) bool { return m.GetAbort() != nil })[0].GetAbort()
		if ab.Rank != 0 || ab.Code != 7 || ab.Message != "bye" {
			t.Errorf("abort %v", ab)
		}

		h.d.handle(ctx, &pb.HNPMessage{Body: &pb.HNPMessage_Kill{Kill: &pb.KillRanks{}}})
		if s := h.state(); s != ending {
			t.Errorf("state %v after Kill, want ending", s)
		}
		ex := h.exits(2)
		for r, e := range ex {
			if e.Signal != int32(syscall.SIGTERM) || !e.Killed || !e.Connected || e.Finalized != (r == 1) {
				t.Errorf("rank %d exit %+v, want SIGTERM, killed, connected, finalized only rank 1", r, e)
			}
		}
		h.mu.Lock()
		for _, pid := range pids {
			if !slices.Contains(h.signals, signalled{int(pid), syscall.SIGTERM}) {
				t.Errorf("no SIGTERM to the group of pid %d: %v", pid, h.signals)
			}
		}
		h.mu.Unlock()
	})
}

// A rank gompirun declares failed no longer holds up the fence: its
// contribution goes without it, and the answer says which rank failed.
func TestHarnessProcFailedCompletesFence(t *testing.T) {
	h := newHarness(t)
	h.launch(3, "exec sleep 60", 0, 1, 2)
	ctx := t.Context()
	answers := make(chan *pb.FenceResponse, 2)
	for _, r := range []int32{0, 1} {
		go func() {
			resp, err := h.svc.Fence(ctx, &pb.FenceRequest{Rank: r, Seq: 4})
			if err != nil {
				t.Error(err)
			}
			answers <- resp
		}()
	}
	time.Sleep(20 * time.Millisecond)
	if n := len(h.sentNow(isFence)); n != 0 {
		t.Fatal("contribution sent while rank 2 was still expected")
	}
	h.d.handle(ctx, &pb.HNPMessage{Body: &pb.HNPMessage_ProcFailed{ProcFailed: &pb.ProcFailed{Ranks: []int32{2}, Why: "its node went away"}}})
	c := h.waitSent(1, "fence contributions", isFence)[0].GetFence()
	if c.Seq != 4 || len(c.Entries) != 2 {
		t.Fatalf("contribution %v, want ranks 0 and 1 of fence 4", c)
	}
	h.d.handle(ctx, &pb.HNPMessage{Body: &pb.HNPMessage_Fence{Fence: &pb.FenceComplete{Seq: 4, Entries: c.Entries, Failed: []int32{2}}}})
	for range 2 {
		if resp := <-answers; resp == nil || !slices.Equal(resp.Failed, []int32{2}) || len(resp.Entries) != 2 {
			t.Errorf("fence answer %v", resp)
		}
	}
}

// Shutdown ends the daemon's loop and its ranks.
func TestHarnessShutdown(t *testing.T) {
	forEachShape(t, func(t *testing.T, h *harness) {
		h.launch(1, "exec sleep 60", 0)
		if !h.d.handle(t.Context(), &pb.HNPMessage{Body: &pb.HNPMessage_Shutdown{Shutdown: &pb.Shutdown{}}}) {
			t.Fatal("Shutdown did not end the daemon's loop")
		}
		if e := h.exits(1)[0]; e.Signal != int32(syscall.SIGTERM) || !e.Killed {
			t.Errorf("exit after Shutdown %+v", e)
		}
		// Unknown messages (a newer gompirun's) are logged, not fatal.
		if h.d.handle(context.Background(), &pb.HNPMessage{}) {
			t.Error("an empty message ended the daemon")
		}
	})
}

// forEachShape runs a harness test for both shapes of rank: started
// directly, and under the rank init (the job's CRS is criu).
func forEachShape(t *testing.T, test func(t *testing.T, h *harness)) {
	t.Run("plain", func(t *testing.T) { test(t, newHarness(t)) })
	t.Run("init", func(t *testing.T) {
		h := newHarnessCRS(t, criuCRS)
		if !h.d.underInit || h.d.initErr != nil {
			t.Fatalf("crs=%s: under init %v, %v", criuCRS, h.d.underInit, h.d.initErr)
		}
		test(t, h)
	})
}
