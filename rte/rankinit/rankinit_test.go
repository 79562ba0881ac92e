package rankinit

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"gompi/frameworks/crs"
	"gompi/frameworks/plm/proc"
)

// The test binary is the init (Main) and, with rankTest set, a rank.
const rankTest = "RANKINIT_TEST_RANK"

func TestMain(m *testing.M) {
	Main()
	switch os.Getenv(rankTest) {
	case "":
		os.Exit(m.Run())
	case "ids":
		// The rank's view of itself: its parent the init, PID 1; its
		// session the init's; its group its own; and its extra descriptor.
		f := os.NewFile(3, "extra")
		b := make([]byte, 16)
		n, _ := f.Read(b)
		sid, _ := unix.Getsid(0)
		fmt.Printf("%d %d %v %s\n", os.Getppid(), sid, syscall.Getpgrp() == os.Getpid(), b[:n])
		os.Exit(0)
	case "term":
		// Ends with 42 on SIGTERM, once it said it is ready.
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM, syscall.SIGUSR1)
		fmt.Println("ready")
		for s := range c {
			if s == syscall.SIGUSR1 {
				fmt.Println("usr1")
				continue
			}
			os.Exit(42)
		}
	case "orphan":
		os.Exit(orphanRank())
	}
}

// orphanRank leaves an orphan that ends at once and waits until the init
// reaped it (its PID is then gone, not a zombie): 0 when it was.
func orphanRank() int {
	out, err := exec.Command("/bin/sh", "-c", `sh -c 'exit 0' & echo $!`).Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// No event tells a process that another one was reaped: poll the
	// condition, boundedly.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			fmt.Println("reaped")
			return 0
		}
	}
	fmt.Fprintf(os.Stderr, "orphan %d not reaped\n", pid)
	return 1
}

// job is one init started as gompid starts it.
type job struct {
	cmd    *exec.Cmd
	status *Status
	out    *bufio.Reader
}

// start runs program (argv) under the init, as gompid does: Wrap, a
// process group of its own, one extra descriptor holding extra.
func start(t *testing.T, env []string, extra string, path string, argv ...string) *job {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace needs root")
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	exR, exW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	exW.WriteString(extra)
	exW.Close()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: append(os.Environ(), env...), Stdout: outW, Stderr: os.Stderr, ExtraFiles: []*os.File{exR}}
	Wrap(cmd, self, stW)
	if err := proc.Start(cmd, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	stW.Close()
	exR.Close()
	t.Cleanup(func() {
		_ = proc.SignalGroup(cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		outR.Close()
		stR.Close()
	})
	j := &job{cmd: cmd, status: NewStatus(stR), out: bufio.NewReader(outR)}
	if err := j.status.Started(); err != nil {
		t.Fatal(err)
	}
	return j
}

func rank(t *testing.T, mode, extra string) *job {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return start(t, []string{rankTest + "=" + mode}, extra, self, "rank")
}

func (j *job) line(t *testing.T) string {
	t.Helper()
	l, err := j.out.ReadString('\n')
	if err != nil {
		t.Fatalf("rank output: %q, %v", l, err)
	}
	return strings.TrimSuffix(l, "\n")
}

// wait reaps the init and returns its status and its report.
func (j *job) wait(t *testing.T) (code int, sig syscall.Signal, rep crs.Exit, ok bool) {
	t.Helper()
	_ = j.cmd.Wait()
	code, sig = proc.Status(j.cmd.ProcessState)
	rep, ok = j.status.Exit()
	return code, sig, rep, ok
}

// The rank runs in a namespace whose PID 1 is the init, the session's
// leader; the rank leads its own group; it has its descriptor. (It is not
// PID 2: the init's Go runtime starts its threads first, and a thread
// takes an id of the namespace.)
func TestNamespaceAndDescriptors(t *testing.T) {
	j := rank(t, "ids", "sesame")
	if got := j.line(t); got != "1 1 true sesame" {
		t.Errorf("rank's ppid, sid, own group and extra descriptor: %q, want \"1 1 true sesame\"", got)
	}
	self, _ := os.Readlink("/proc/self/ns/pid")
	init, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", j.cmd.Process.Pid))
	if err == nil && init == self {
		t.Errorf("the init is in the test's PID namespace %s", self)
	}
	if sid, err := unix.Getsid(j.cmd.Process.Pid); err == nil && sid != j.cmd.Process.Pid {
		t.Errorf("the init's session %d, want its own (%d)", sid, j.cmd.Process.Pid)
	}
	if code, sig, rep, ok := j.wait(t); code != 0 || sig != 0 || !ok || rep != (crs.Exit{}) {
		t.Errorf("init ended %d/%v, reported %+v %v; want 0", code, sig, rep, ok)
	}
}

// The init keeps the rank's descriptors for its life, the same pipes
// the rank holds (a dump records the root's pipes; a restore replaces
// them for the whole tree), and gives the rank none of its own status.
func TestInitKeepsRankDescriptors(t *testing.T) {
	j := start(t, nil, "", "/bin/sh", "sh", "-c", "readlink /proc/self/fd/3; [ -e /proc/self/fd/4 ] && echo leaked; echo checked; exec sleep 600")
	mine := j.line(t)
	if !strings.HasPrefix(mine, "pipe:[") {
		t.Fatalf("rank's descriptor 3 is %q, want the pipe it was given", mine)
	}
	if l := j.line(t); l != "checked" {
		t.Fatalf("rank said %q: it holds the init's status descriptor", l)
	}
	init := j.cmd.Process.Pid
	if got, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/3", init)); err != nil || got != mine {
		t.Errorf("the init's descriptor 3 is %q (%v), want the rank's %s", got, err, mine)
	}
}

// The init exits with the rank's code.
func TestExitCode(t *testing.T) {
	j := start(t, nil, "", "/bin/sh", "sh", "-c", "exit 3")
	if code, sig, rep, ok := j.wait(t); code != 3 || sig != 0 || !ok || rep != (crs.Exit{Code: 3}) {
		t.Errorf("init ended %d/%v, reported %+v %v; want 3", code, sig, rep, ok)
	}
}

// A rank killed by a signal is reported as killed by it; the init, which
// cannot die of it, exits as a shell would say it.
func TestDeathBySignal(t *testing.T) {
	j := start(t, nil, "", "/bin/sh", "sh", "-c", "kill -KILL $$")
	if code, sig, rep, ok := j.wait(t); code != 128+9 || sig != 0 || !ok || rep != (crs.Exit{Signal: syscall.SIGKILL}) {
		t.Errorf("init ended %d/%v, reported %+v %v; want 137 and SIGKILL", code, sig, rep, ok)
	}
}

// Signals sent to the init's group reach the rank, once each; a rank that
// handles SIGTERM ends as it chose.
func TestSignalForwarding(t *testing.T) {
	j := rank(t, "term", "")
	if got := j.line(t); got != "ready" {
		t.Fatalf("rank said %q", got)
	}
	if err := proc.SignalGroup(j.cmd.Process.Pid, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if got := j.line(t); got != "usr1" {
		t.Fatalf("rank said %q after SIGUSR1", got)
	}
	if err := proc.SignalGroup(j.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, sig, rep, ok := j.wait(t); code != 42 || sig != 0 || !ok || rep != (crs.Exit{Code: 42}) {
		t.Errorf("init ended %d/%v, reported %+v %v; want 42", code, sig, rep, ok)
	}
	if l, err := j.out.ReadString('\n'); err == nil {
		t.Errorf("rank said %q more: a signal delivered twice?", l)
	}
}

// A rank that does not handle SIGTERM dies of it, and that is reported.
func TestForwardedSignalDeath(t *testing.T) {
	j := start(t, nil, "", "/bin/sh", "sh", "-c", "echo ready; exec sleep 600")
	if got := j.line(t); got != "ready" {
		t.Fatalf("rank said %q", got)
	}
	if err := proc.SignalGroup(j.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, _, rep, ok := j.wait(t); !ok || rep != (crs.Exit{Signal: syscall.SIGTERM}) {
		t.Errorf("reported %+v %v; want SIGTERM", rep, ok)
	}
}

// SIGKILL of the init ends the namespace: the rank with it. The status
// then says nothing more, and the init's own death is the answer.
func TestKillInit(t *testing.T) {
	j := start(t, nil, "", "/bin/sh", "sh", "-c", "echo ready; exec sleep 600")
	if got := j.line(t); got != "ready" {
		t.Fatalf("rank said %q", got)
	}
	if err := proc.SignalGroup(j.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	code, sig, _, ok := j.wait(t)
	if sig != syscall.SIGKILL || ok {
		t.Errorf("init ended %d/%v, report given %v; want SIGKILL and no report", code, sig, ok)
	}
	// The rank held the output pipe: its end of file means it is gone too.
	if _, err := j.out.ReadString('\n'); err == nil {
		t.Error("more output after the init was killed")
	}
}

// The init reaps the rank's orphans.
func TestReapsOrphans(t *testing.T) {
	j := rank(t, "orphan", "")
	if got := j.line(t); got != "reaped" {
		t.Errorf("rank said %q", got)
	}
	if code, _, rep, ok := j.wait(t); code != 0 || !ok || rep != (crs.Exit{}) {
		t.Errorf("init ended %d, reported %+v %v", code, rep, ok)
	}
}

// A program that cannot be started is said on the status, and the init
// ends with 127.
func TestStartError(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace needs root")
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stR.Close()
	self, _ := os.Executable()
	cmd := &exec.Cmd{Path: "/nonexistent/prog", Args: []string{"prog"}}
	Wrap(cmd, self, stW)
	if err := proc.Start(cmd, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	stW.Close()
	st := NewStatus(stR)
	if err := st.Started(); !errors.Is(err, ErrNotStarted) || !strings.Contains(err.Error(), "/nonexistent/prog") {
		t.Errorf("Started: %v", err)
	}
	_ = cmd.Wait()
	if code, _ := proc.Status(cmd.ProcessState); code != 127 {
		t.Errorf("init ended %d, want 127", code)
	}
}
