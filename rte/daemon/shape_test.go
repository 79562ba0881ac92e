package daemon

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gompi/frameworks/plm/proc"
	pb "gompi/rte/control/proto"
	"gompi/rte/rankinit"
)

// The test binary is the rank init of the harness's ranks, as gompid is
// of a job's (rankShape takes the running binary), and, with
// lifelineRankArg, a rank with a lifeline (dump_test.go).
func TestMain(m *testing.M) {
	rankinit.Main()
	if len(os.Args) > 2 && os.Args[1] == lifelineRankArg {
		os.Exit(lifelineRank(os.Args[2]))
	}
	os.Exit(m.Run())
}

// With crs=criu a rank runs under the rank init: in a PID namespace of
// its own (its parent is PID 1 there, the init, its session's leader;
// its lifeline follows the secret pipe, and the init's status descriptor,
// after them, is not the rank's), the reported PID being the init's; its
// output and its death by a signal are reported as a fresh rank's.
func TestHarnessRankUnderInit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace needs root")
	}
	h := newHarnessCRS(t, criuCRS)
	pids := h.launch(1, `echo $PPID; echo $GOMPI_LIFELINE_FDS; [ -p /proc/self/fd/4 ] && [ -p /proc/self/fd/5 ] && echo lifeline; [ -e /proc/self/fd/6 ] && echo leaked; kill -TERM $$`, 0)
	e := h.exits(1)[0]
	if e.Signal != int32(syscall.SIGTERM) || e.ExitCode != 0 || e.Killed {
		t.Errorf("exit %+v, want SIGTERM, not killed by the daemon", e)
	}
	if got := h.rankOutput(0); got != "1\n4,5\nlifeline\n" {
		t.Errorf("rank said %q, want its parent 1 (the init), its lifeline 4,5 (pipes) and no descriptor 6 (the init's status)", got)
	}
	self, _ := os.Readlink("/proc/self/ns/pid")
	if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pids[0])); err == nil && ns == self {
		t.Errorf("the reported process %d is in the daemon's PID namespace", pids[0])
	}
}

// Under the rank init, a program that cannot be started is a start
// error, as it is without the init.
func TestHarnessInitStartError(t *testing.T) {
	forEachShape(t, func(t *testing.T, h *harness) {
		h.d.handle(t.Context(), &pb.HNPMessage{Body: &pb.HNPMessage_Launch{Launch: &pb.Launch{
			Program: "/nonexistent/rank", Size: 1, Ranks: []int32{0}, DataSecret: h.data.Bytes()}}})
		s := h.waitSent(1, "Started", isStarted)[0].GetStarted()
		if s.Error == "" || !strings.Contains(s.Error, "/nonexistent/rank") || s.Pid != 0 {
			t.Errorf("start of a missing program: %+v", s)
		}
		if n := len(h.sentNow(isExited)); n != 0 {
			t.Errorf("%d exits of a rank that never started", n)
		}
	})
}

// As a child subreaper, the daemon gets the orphans of its descendants
// (a rank CRIU restored, once CRIU exits) and waits for one by its PID,
// without taking the exit of a child os/exec waits for.
func TestSubreaperWaitsAdopted(t *testing.T) {
	if err := becomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	// sh starts sleep and exits: sleep is orphaned, and comes to us.
	out, err := exec.Command("/bin/sh", "-c", "sleep 600 </dev/null >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	if ppid := parentOf(t, pid); ppid != os.Getpid() {
		t.Fatalf("orphan %d's parent is %d, want the test (%d)", pid, ppid, os.Getpid())
	}
	other := exec.Command("/bin/sh", "-c", "read x; exit 5")
	in, err := other.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	type result struct {
		code int
		sig  syscall.Signal
		err  error
	}
	adopted := make(chan result, 1)
	go func() {
		code, sig, err := proc.WaitAdopted(ctx, pid)
		adopted <- result{code, sig, err}
	}()
	in.Close() // the other child ends while the adopted one is waited for
	if err := other.Wait(); other.ProcessState == nil || other.ProcessState.ExitCode() != 5 {
		t.Errorf("os/exec's child: %v, %v; want status 5", other.ProcessState, err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := <-adopted; r.err != nil || r.sig != syscall.SIGTERM || r.code != 0 {
		t.Errorf("adopted process ended %+v, want SIGTERM", r)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("adopted process %d still there (not reaped)", pid)
	}
}

// parentOf reads pid's parent from /proc/pid/stat.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ppid ...: comm may hold spaces; it ends at the last ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}

// A gompid that is not root cannot start ranks in PID namespaces: with
// crs=criu its ranks fail to start, saying why; other jobs are not
// concerned.
func TestRankShapeNotRoot(t *testing.T) {
	h := newHarnessCRS(t, criuCRS)
	under, _, err := rankShapeAs(h.d.vals, 1000)
	if !under || err == nil || !strings.Contains(err.Error(), "needs root") || !strings.Contains(err.Error(), "uid 1000") {
		t.Errorf("crs=criu as uid 1000: under init %v, %v", under, err)
	}
	if under, _, err := rankShapeAs(newHarness(t).d.vals, 1000); under || err != nil {
		t.Errorf("no CRS as uid 1000: under init %v, %v", under, err)
	}
	h.d.initErr = err
	h.d.handle(t.Context(), &pb.HNPMessage{Body: &pb.HNPMessage_Launch{Launch: &pb.Launch{
		Program: "/bin/sh", Args: []string{"-c", "exit 0"}, Size: 1, Ranks: []int32{0}, DataSecret: h.data.Bytes()}}})
	if s := h.waitSent(1, "Started", isStarted)[0].GetStarted(); s.Pid != 0 || !strings.Contains(s.Error, "needs root") {
		t.Errorf("start as not root with crs=criu: %+v", s)
	}
}
