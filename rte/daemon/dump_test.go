package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	crscriu "gompi/components/crs/criu"
	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	pb "gompi/rte/control/proto"
	"gompi/rte/rankclient"
)

// lifelineRankArg makes the test binary a rank with a lifeline
// (TestMain): it connects to its daemon with rankclient, registers its
// checkpoint coordinator, says "ready", and answers each AppRequest
// Quiesce as its mode says: "pause" pauses (rankclient.Pause, what
// package mpi calls once suspended) and says "resumed ID restarted=B"
// after gompid's word; "late" does the same once it got a SIGUSR1;
// "refuse" refuses on the lifeline; "exit" ends the rank with status 3;
// "ignore" does nothing.
const lifelineRankArg = "--gompi-test-lifeline-rank"

// lifelineRank is the rank's main; it returns its exit status.
func lifelineRank(mode string) int {
	ctx := context.Background()
	c, err := rankclient.Init(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	reqs := c.Requests()
	fmt.Println("ready")
	for req := range reqs {
		if req.Kind != snapc.Quiesce {
			continue
		}
		switch mode {
		case "refuse":
			if err := c.Refuse(req.ID, "the test rank refuses"); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		case "exit":
			return 3
		case "pause", "late":
			if mode == "late" {
				<-usr1
			}
			restarted, err := c.Pause(ctx, req.ID)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 4
			}
			fmt.Printf("resumed %d restarted=%v\n", req.ID, restarted)
		}
	}
	return 0
}

// lifelineHarness is a harness whose job's CRS is criu, mod, with the
// ranks' socket served (the test's ranks connect to it).
func lifelineHarness(t *testing.T, h *harness, mod crs.Module) *harness {
	t.Helper()
	if !h.d.underInit || h.d.initErr != nil {
		t.Fatalf("crs=%s: under init %v, %v", criuCRS, h.d.underInit, h.d.initErr)
	}
	h.d.cr.crs, h.d.cr.crsName = mod, crscriu.Name
	stop, err := h.d.serveRanks(h.d.secret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return h
}

// launchLifelineRank starts rank 0, the test binary in mode, and waits
// until it is ready (its checkpoint coordinator registered).
func (h *harness) launchLifelineRank(mode string) int32 {
	h.t.Helper()
	return h.launchLifelineRanks(mode, 1)[0]
}

// launchLifelineRanks starts ranks 0 to n-1 of a job of n, the test
// binary in mode, and waits until they are ready; it returns their PIDs.
func (h *harness) launchLifelineRanks(mode string, n int32) map[int32]int32 {
	h.t.Helper()
	self, err := os.Executable()
	if err != nil {
		h.t.Fatal(err)
	}
	ranks := make([]int32, n)
	for i := range ranks {
		ranks[i] = int32(i)
	}
	h.d.handle(h.t.Context(), &pb.HNPMessage{Body: &pb.HNPMessage_Launch{Launch: &pb.Launch{
		Program: self, Args: []string{lifelineRankArg, mode}, Size: n, Ranks: ranks, DataSecret: h.data.Bytes()}}})
	pids := map[int32]int32{}
	for _, m := range h.waitSent(int(n), "Started", isStarted) {
		s := m.GetStarted()
		if s.Error != "" || s.Pid <= 0 {
			h.t.Fatalf("rank did not start: %+v", s)
		}
		pids[s.Rank] = s.Pid
	}
	for _, r := range ranks {
		h.waitOutput(r, "ready\n")
	}
	return pids
}

// quiesce runs the Dumper's Quiesce of rank 0 with a generous bound.
func (h *harness) quiesce(id uint64) error {
	ctx, cancel := context.WithTimeout(h.t.Context(), time.Minute)
	defer cancel()
	return (*dumper)(h.d).Quiesce(ctx, 0, id, int(id))
}

// dumpTo dumps quiesced rank 0 into a fresh reference's sequence 0.
func (h *harness) dumpTo(opts crs.Options) (snapshot.Ref, error) {
	h.t.Helper()
	ref := snapshot.Ref{Dir: h.t.TempDir(), Name: "ref"}
	dir := ref.LocalPath(0, 0)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(h.t.Context(), 2*time.Minute)
	defer cancel()
	return ref, (*dumper)(h.d).Dump(ctx, 0, dir, opts)
}

// A rank with no C/R code of its own beyond the runtime's Pause is
// quiesced through its checkpoint coordinator and its lifeline, dumped
// by crs criu with the local snapshot's metadata, and continued; it can
// be quiesced again. Its images restore in another daemon, which says
// Restart on the new lifeline: the restored rank reconnects to that
// daemon with its secrets and goes on, and that daemon quiesces and
// continues it in turn.
func TestHarnessDumpContinueAndRestore(t *testing.T) {
	mod := criuModule(t)
	h1 := lifelineHarness(t, newHarnessCRS(t, criuCRS), mod)
	pid := h1.launchLifelineRank("pause")
	start := time.Now()
	if err := h1.quiesce(1); err != nil {
		t.Fatalf("quiesce: %v", err)
	}
	quiesced := time.Now()
	ref, err := h1.dumpTo(crs.Options{})
	if err != nil {
		t.Fatalf("dump: %v", err)
	}
	dumped := time.Now()
	dir := ref.LocalPath(0, 0)
	meta, err := snapshot.ReadLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, f := range meta.Files {
		size += f.Size
	}
	t.Logf("one rank (the test binary, rankclient only) under its init: quiesce %v, dump with metadata %v, %d files, %d bytes",
		quiesced.Sub(start), dumped.Sub(quiesced), len(meta.Files), size)
	if meta.Rank != 0 || meta.PID != int(pid) || meta.Node != "n1" || meta.CRS != crscriu.Name || len(meta.Files) == 0 || meta.CRSMeta["criu_fd_4"] == "" {
		t.Errorf("local metadata %+v: want rank 0, the init's pid %d, node n1, crs criu, its files and the lifeline among the root's pipes", meta, pid)
	}
	if err := meta.Verify(dir); err != nil {
		t.Errorf("the dump's files against its metadata: %v", err)
	}
	if err := (*dumper)(h1.d).Resume(0, 1); err != nil {
		t.Fatal(err)
	}
	h1.waitOutput(0, "resumed 1 restarted=false\n")
	// Reconnected: its coordinator answers again.
	if err := h1.quiesce(2); err != nil {
		t.Fatalf("second quiesce: %v", err)
	}
	if err := (*dumper)(h1.d).Resume(0, 2); err != nil {
		t.Fatal(err)
	}
	h1.waitOutput(0, "resumed 2 restarted=false\n")

	h2, _ := restartHarness(t, criuCRS, mod, crscriu.Name, nil)
	lifelineHarness(t, h2, mod)
	start = time.Now()
	if s := h2.restart(ref, "exit 99"); s.Error != "" || s.Pid <= 0 {
		t.Fatalf("restored rank's start: %+v", s)
	}
	h2.waitOutput(0, "resumed 1 restarted=true\n")
	t.Logf("restore until the rank reconnected and went on: %v", time.Since(start))
	h2.waitSent(1, "connected phases", isPhase(pb.Phase_PHASE_CONNECTED))
	if err := h2.quiesce(7); err != nil {
		t.Fatalf("quiesce of the restored rank: %v", err)
	}
	if err := (*dumper)(h2.d).Resume(0, 7); err != nil {
		t.Fatal(err)
	}
	h2.waitOutput(0, "resumed 7 restarted=false\n")
	h2.mu.Lock()
	out := h2.stdoutLocked(0)
	h2.mu.Unlock()
	if out != "resumed 1 restarted=true\nresumed 7 restarted=false\n" {
		t.Errorf("restored rank's output %q, want only what it said after the restore", out)
	}
}

// The ranks of a node are quiesced, dumped and continued at once, as
// the local coordinator does it: each lifeline carries its own rank's
// words.
func TestHarnessDumpRanksAtOnce(t *testing.T) {
	h := lifelineHarness(t, newHarnessCRS(t, criuCRS), criuModule(t))
	const n = 3
	pids := h.launchLifelineRanks("pause", n)
	ref := snapshot.Ref{Dir: t.TempDir(), Name: "ref"}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dm := (*dumper)(h.d)
	errs := make(chan error, n)
	for r := range n {
		go func() {
			dir := ref.LocalPath(0, r)
			err := os.MkdirAll(dir, 0o700)
			if err == nil {
				err = dm.Quiesce(ctx, r, 5, 5)
			}
			if err == nil {
				err = dm.Dump(ctx, r, dir, crs.Options{})
			}
			if err == nil {
				err = dm.Resume(r, 5)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for r := range int32(n) {
		h.waitOutput(r, "resumed 5 restarted=false\n")
		if meta, err := snapshot.ReadLocal(ref.LocalPath(0, int(r))); err != nil || meta.Rank != int(r) || meta.PID != int(pids[r]) {
			t.Errorf("rank %d's local metadata %+v, %v", r, meta, err)
		}
	}
}

// A dump with Term ends the rank (its CRS kills the tree once saved),
// which is reported as a rank that saved and ended itself: status 0.
func TestHarnessDumpTerm(t *testing.T) {
	h := lifelineHarness(t, newHarnessCRS(t, criuCRS), criuModule(t))
	h.launchLifelineRank("pause")
	if err := h.quiesce(1); err != nil {
		t.Fatalf("quiesce: %v", err)
	}
	if _, err := h.dumpTo(crs.Options{Term: true}); err != nil {
		t.Fatalf("dump: %v", err)
	}
	if e := h.exits(1)[0]; e.ExitCode != 0 || e.Signal != 0 || e.Killed || !e.Connected {
		t.Errorf("exit after a dump with Term %+v, want status 0, connected, not killed by the daemon", e)
	}
	if err := (*dumper)(h.d).Resume(0, 1); err == nil {
		t.Error("resume of a rank ended by its dump succeeded")
	}
}

// A dump with Stop leaves the tree stopped; the Continue waits in the
// lifeline until a SIGCONT, sent to the init's group and forwarded by
// the init to the rank.
func TestHarnessDumpStop(t *testing.T) {
	h := lifelineHarness(t, newHarnessCRS(t, criuCRS), criuModule(t))
	pid := h.launchLifelineRank("pause")
	if err := h.quiesce(1); err != nil {
		t.Fatalf("quiesce: %v", err)
	}
	if _, err := h.dumpTo(crs.Options{Stop: true}); err != nil {
		t.Fatalf("dump: %v", err)
	}
	if st := procState(t, int(pid)); st != "T" {
		t.Errorf("the init's state %q after a dump with Stop, want T (stopped)", st)
	}
	if err := (*dumper)(h.d).Resume(0, 1); err != nil {
		t.Fatal(err)
	}
	h.d.signalAll(syscall.SIGCONT)
	h.waitOutput(0, "resumed 1 restarted=false\n")
}

// procState is pid's state letter in /proc/pid/stat.
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0]
}

// A rank that refuses to quiesce fails the Quiesce with its reason
// (snapc.ErrRefused) and stays attached; one that ends instead fails it
// as ended (its lifeline's end); one that does not answer is given up
// when ctx ends. A rank not quiesced is not dumped.
func TestHarnessQuiesceRefusedEndedIgnored(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the rank init's PID namespace needs root")
	}
	restorer := restorerModule(t)
	h := lifelineHarness(t, newHarnessCRS(t, criuCRS), restorer)
	h.launchLifelineRank("refuse")
	for id := range uint64(2) {
		if err := h.quiesce(id + 1); !errors.Is(err, snapc.ErrRefused) || !strings.Contains(err.Error(), "the test rank refuses") {
			t.Errorf("quiesce %d of a rank that refuses: %v", id+1, err)
		}
	}
	if _, err := h.dumpTo(crs.Options{}); err == nil || !strings.Contains(err.Error(), "not quiesced") {
		t.Errorf("dump of a rank not quiesced: %v", err)
	}

	h = lifelineHarness(t, newHarnessCRS(t, criuCRS), restorer)
	h.launchLifelineRank("exit")
	if err := h.quiesce(1); err == nil || !strings.Contains(err.Error(), "rank 0 ended") {
		t.Errorf("quiesce of a rank that ends: %v", err)
	}
	if e := h.exits(1)[0]; e.ExitCode != 3 {
		t.Errorf("exit %+v, want the rank's status 3", e)
	}

	h = lifelineHarness(t, newHarnessCRS(t, criuCRS), restorer)
	h.launchLifelineRank("ignore")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := (*dumper)(h.d).Quiesce(ctx, 0, 1, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("quiesce of a rank that does not answer: %v", err)
	}
}

// A rank that says it is ready after its Quiesce gave up is let go at
// once: nobody will dump it, and, detached, nothing else reaches it.
func TestHarnessLateReadyGoesOn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the rank init's PID namespace needs root")
	}
	restorer := restorerModule(t)
	h := lifelineHarness(t, newHarnessCRS(t, criuCRS), restorer)
	h.launchLifelineRank("late")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := (*dumper)(h.d).Quiesce(ctx, 0, 1, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("quiesce of a rank that answers late: %v", err)
	}
	h.d.signalAll(syscall.SIGUSR1) // the rank pauses now
	h.waitOutput(0, "resumed 1 restarted=false\n")
	// It reattached: the next request, its signal already there, is
	// answered at once.
	h.d.signalAll(syscall.SIGUSR1)
	if err := h.quiesce(2); err != nil {
		t.Fatalf("quiesce after a late ready: %v", err)
	}
	if err := (*dumper)(h.d).Resume(0, 2); err != nil {
		t.Fatal(err)
	}
	h.waitOutput(0, "resumed 2 restarted=false\n")
}

// The daemon is its local coordinator's Dumper only when its ranks have
// lifelines (under the rank init) and the job's CRS restores them
// itself; a rank without a lifeline is refused.
func TestDumperOnlyForRestorers(t *testing.T) {
	restorer := restorerModule(t)
	plain := newHarness(t)
	plain.d.cr.crs = restorer
	if plain.d.dumper() != nil {
		t.Error("a Dumper for ranks started without the rank init")
	}
	h := newHarnessCRS(t, criuCRS)
	if h.d.dumper() != nil {
		t.Error("a Dumper without a CRS")
	}
	h.d.cr.crs = restorer
	if os.Geteuid() == 0 && h.d.dumper() == nil {
		t.Error("no Dumper for a job whose CRS restores ranks, under the rank init")
	}
	plain.launch(1, "exec sleep 60", 0)
	if err := (*dumper)(plain.d).Quiesce(t.Context(), 0, 1, 1); err == nil || !strings.Contains(err.Error(), "no lifeline") {
		t.Errorf("quiesce of a rank without a lifeline: %v", err)
	}
}
