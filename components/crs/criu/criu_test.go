package crscriu

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/crs/crstest"
	"gompi/mca"
)

// needRoot skips a test that runs CRIU when the tests do not run as root
// (CRIU cannot work there). As root a missing or broken CRIU fails the
// test: CI, root with CRIU installed, runs every one.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("CRIU needs root")
	}
}

// newModule selects criu as gompid would, with C/R on.
func newModule(t *testing.T) crs.Module {
	t.Helper()
	needRoot(t)
	params := mca.NewParams()
	set := frameworks.New(params)
	set.CRS.Register(New())
	vals, err := params.ResolveSettings([]mca.Setting{{Name: mca.ParamCREnabled, Value: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.CRS.SelectOne(t.Context(), vals, mca.RoleDaemon, nil)
	if err != nil {
		t.Fatalf("select crs=criu as root: %v", err)
	}
	if _, err := mca.Provision(t.Context(), c.Module, crs.Host{Daemon: &crs.DaemonHost{Node: "n0"}}); err != nil {
		t.Fatal(err)
	}
	return c.Module
}

func TestConformance(t *testing.T) {
	crstest.Run(t, newModule, crstest.Options{CanCheckpoint: true, Isolate: true})
}

// counter is a process tree as gompid runs a rank: a shell, init of its
// own PID namespace and its session's leader, writing 1, 2, 3, ... to
// its standard output (a pipe the test reads) every 20 ms, and holding a
// pipe as descriptor 3 (a lifeline) into which it writes "alive" once.
type counter struct {
	cmd   *exec.Cmd
	lines *bufio.Reader
	life  *os.File // read end of descriptor 3's pipe
}

const counterScript = `echo alive >&3; i=0; while :; do i=$((i+1)); echo $i; sleep 0.02; done`

func startCounter(t *testing.T) *counter {
	t.Helper()
	out, life := pipe(t), pipe(t)
	cmd := exec.Command("/bin/sh", "-c", counterScript)
	cmd.Stdout, cmd.ExtraFiles = out[1], []*os.File{life[1]}
	crstest.StartIsolated(t, cmd)
	out[1].Close()
	life[1].Close()
	c := &counter{cmd: cmd, lines: bufio.NewReader(out[0]), life: life[0]}
	if line := readLine(t, bufio.NewReader(c.life)); line != "alive" {
		t.Fatalf("descriptor 3 carried %q, want alive", line)
	}
	return c
}

// pipe returns a pipe's read and write ends, closed at the test's end.
func pipe(t *testing.T) [2]*os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return [2]*os.File{r, w}
}

// readLine reads one line within a minute.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() { // ends with the read: the pipe closes at the test's end at the latest
		line, err := r.ReadString('\n')
		if err != nil {
			line = "error: " + err.Error()
		}
		got <- strings.TrimSuffix(line, "\n")
	}()
	select {
	case line := <-got:
		return line
	case <-time.After(time.Minute):
		t.Fatal("no line in a minute")
		return ""
	}
}

// count reads the counter's next number.
func count(t *testing.T, r *bufio.Reader) int {
	t.Helper()
	line := readLine(t, r)
	n, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("counter wrote %q, want a number", line)
	}
	return n
}

// TestDumpAndRestore: a counting tree dumped with leave-running goes on
// counting; killed and restored with new pipes in place of its standard
// output and descriptor 3, it counts on from where the dump caught it,
// into the new pipe; its Wait says how it ended.
func TestDumpAndRestore(t *testing.T) {
	m := newModule(t)
	c := startCounter(t)
	n0 := count(t, c.lines)
	dir := t.TempDir()
	res, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: c.cmd.Process.Pid, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != crs.StateContinue || res.Meta[metaFD(1)] == "" || res.Meta[metaFD(3)] == "" || res.Meta[metaFD(1)] == res.Meta[metaFD(3)] {
		t.Fatalf("checkpoint: state %v, meta %v; want continue and descriptors 1 and 3 recorded as two pipes", res.State, res.Meta)
	}
	if _, err := os.Stat(filepath.Join(dir, "dump.log")); err == nil {
		t.Error("CRIU's log is in the snapshot folder")
	}
	// Still counting after the dump; the dump caught it between n0 and n1.
	n1 := count(t, c.lines)
	if n1 <= n0 {
		t.Fatalf("counted %d after %d", n1, n0)
	}
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
	// The last number the original wrote: the dump caught it before that.
	rest, err := io.ReadAll(c.lines)
	if err != nil {
		t.Fatal(err)
	}
	last := n1
	if f := strings.Fields(string(rest)); len(f) > 0 {
		if last, err = strconv.Atoi(f[len(f)-1]); err != nil {
			t.Fatalf("counter wrote %q", rest)
		}
	}

	out, life := pipe(t), pipe(t)
	p, err := m.(crs.Restorer).Restore(t.Context(), crs.RestoreRequest{Rank: 2, Dir: dir, Meta: res.Meta,
		Stdout: out[1], Files: []*os.File{life[1]}})
	if err != nil {
		t.Fatal(err)
	}
	out[1].Close()
	life[1].Close()
	killOnCleanup(t, p)
	r := bufio.NewReader(out[0])
	first := count(t, r)
	if first <= n0 || first > last+1 {
		t.Errorf("restored counter starts at %d; the dump was taken after it wrote %d and before it wrote %d", first, n0, last)
	}
	if next := count(t, r); next != first+1 {
		t.Errorf("restored counter wrote %d after %d", next, first)
	}
	// Descriptor 3 is the new pipe: its read end sees EOF once the
	// restored tree, the only writer, is gone.
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	exit := wait(t, p)
	if exit.Signal != syscall.SIGKILL {
		t.Errorf("restored counter killed: %+v, want SIGKILL", exit)
	}
	if b, err := io.ReadAll(life[0]); err != nil || len(b) != 0 {
		t.Errorf("descriptor 3 after the restored tree ended: %q, %v; want EOF", b, err)
	}
}

func killOnCleanup(t *testing.T, p crs.Process) {
	t.Cleanup(func() {
		_ = syscall.Kill(p.PID(), syscall.SIGKILL)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = p.Wait(ctx)
	})
}

func wait(t *testing.T, p crs.Process) crs.Exit {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	exit, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("wait for restored pid %d: %v", p.PID(), err)
	}
	return exit
}

// procState is pid's state letter in /proc/PID/stat.
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// TestTermAndStop: Term leaves the tree killed once dumped (its output
// pipe closes), Stop leaves it stopped until SIGCONT.
func TestTermAndStop(t *testing.T) {
	m := newModule(t)
	t.Run("term", func(t *testing.T) {
		c := startCounter(t)
		count(t, c.lines)
		res, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: c.cmd.Process.Pid, Dir: t.TempDir(), Options: crs.Options{Term: true}})
		if err != nil || res.State != crs.StateTerm {
			t.Fatalf("checkpoint with Term: %v, %v; want StateTerm", res.State, err)
		}
		err = c.cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("the dumped tree ended with %v, want killed by CRIU", err)
		}
	})
	t.Run("stop", func(t *testing.T) {
		c := startCounter(t)
		count(t, c.lines)
		pid := c.cmd.Process.Pid
		res, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: pid, Dir: t.TempDir(), Options: crs.Options{Stop: true}})
		if err != nil || res.State != crs.StateContinue {
			t.Fatalf("checkpoint with Stop: %v, %v; want StateContinue", res.State, err)
		}
		if st := procState(pid); st != 'T' {
			t.Errorf("pid %d after a dump with Stop is in state %q, want T (stopped)", pid, st)
		}
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		// What it wrote before the dump may still be in the pipe: read
		// until two numbers in a row, which only a running counter writes.
		prev := count(t, c.lines)
		for n := count(t, c.lines); n != prev+1; n = count(t, c.lines) {
			prev = n
		}
	})
}

// TestRefusesSockets: a tree holding a TCP connection or a unix socket to
// a process outside it is refused, naming the socket, and the snapshot
// folder stays empty.
func TestRefusesSockets(t *testing.T) {
	m := newModule(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tcp, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	unixPair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(unixPair[0])
	defer syscall.Close(unixPair[1])
	tcpFile, err := tcp.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	defer tcpFile.Close()
	for _, tc := range []struct {
		name string
		file *os.File
		kind string
	}{
		{"tcp", tcpFile, "a tcp socket"},
		{"unix", os.NewFile(uintptr(unixPair[1]), "unix"), "a unix socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sleep", "1000")
			cmd.ExtraFiles = []*os.File{tc.file}
			crstest.StartIsolated(t, cmd)
			dir := t.TempDir()
			_, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: cmd.Process.Pid, Dir: dir})
			if !errors.Is(err, crs.ErrNotCheckpointable) || !strings.Contains(err.Error(), "descriptor 3, socket:[") || !strings.Contains(err.Error(), tc.kind) {
				t.Errorf("checkpoint of a tree holding %s: %v; want crs.ErrNotCheckpointable naming descriptor 3 and the socket's kind", tc.kind, err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("the refused dump left %d files in the snapshot folder", len(ents))
			}
		})
	}
}

// TestCRIURefusal: a tree CRIU itself will not dump (here: in a mount
// namespace of its own, whose mounts CRIU sees as external) is refused
// with crs.ErrNotCheckpointable and the end of CRIU's log, and leaves
// the snapshot folder empty.
func TestCRIURefusal(t *testing.T) {
	m := newModule(t)
	cmd := exec.Command("sleep", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	crstest.StartIsolated(t, cmd)
	dir := t.TempDir()
	_, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: cmd.Process.Pid, Dir: dir})
	if !errors.Is(err, crs.ErrNotCheckpointable) || !strings.Contains(err.Error(), "its log ends: ") {
		t.Errorf("checkpoint of a tree in its own mount namespace: %v; want crs.ErrNotCheckpointable with CRIU's log", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the refused dump left %d files in the snapshot folder", len(ents))
	}
}

// TestRestoreNeedsPipes: a restore that gives nothing in place of a pipe
// the dumped root held is refused before CRIU runs.
func TestRestoreNeedsPipes(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, inventory), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := pipe(t)
	meta := map[string]string{metaFD(1): "pipe:[10]", metaFD(2): "pipe:[10]", metaFD(3): "pipe:[11]"}
	m := NewModule("/nonexistent/criu", "4.2.1")
	_, err := m.Restore(t.Context(), crs.RestoreRequest{Dir: dir, Meta: meta, Stdout: out[1]})
	if err == nil || !strings.Contains(err.Error(), "pipe:[11]) as descriptor 3") {
		t.Errorf("restore without descriptor 3's pipe: %v; want a refusal naming it", err)
	}
	// Stdout and stderr on one pipe take stdout's replacement.
	got, err := inheritFiles(crs.RestoreRequest{Meta: meta, Stdout: out[1], Files: []*os.File{out[0]}})
	if err != nil || len(got) != 2 || got["pipe:[10]"] != out[1] || got["pipe:[11]"] != out[0] {
		t.Errorf("inherit-fd files %v, %v; want pipe:[10] from Stdout and pipe:[11] from Files[0]", got, err)
	}
}

// fakeCRIU writes a shell script standing for criu: --version prints
// version, check exits with checkRC; each run appends a line to runs.
func fakeCRIU(t *testing.T, dir, version string, checkRC int) (path, runs string) {
	t.Helper()
	path, runs = filepath.Join(dir, "criu"), filepath.Join(dir, "runs")
	script := fmt.Sprintf("#!/bin/sh\necho \"$1\" >>%s\ncase $1 in\n--version) printf '%%s\\n' %q ;;\ncheck) echo 'Error (criu/cr-check.c:1): something is missing'; exit %d ;;\nesac\n", runs, version, checkRC)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, runs
}

// TestAvailability: why the component is not offered, and the probe's
// cache.
func TestAvailability(t *testing.T) {
	good, goodRuns := fakeCRIU(t, t.TempDir(), "Version: 4.2.1", 0)
	old, _ := fakeCRIU(t, t.TempDir(), "Version: 3.17.1", 0)
	failing, _ := fakeCRIU(t, t.TempDir(), "Version: 4.2", 1)
	garbled, _ := fakeCRIU(t, t.TempDir(), "criu, some version", 0)
	tests := []struct {
		name     string
		euid     int
		explicit string
		want     string // in the error; "" for available
	}{
		{"not root", 1000, good, "not root (uid 1000)"},
		{"missing", 0, filepath.Join(t.TempDir(), "criu"), "no such file"},
		{"old", 0, old, "is version 3.17.1, older than 4.2"},
		{"check fails", 0, failing, "`criu check` fails (exit status 1): Error (criu/cr-check.c:1): something is missing"},
		{"no version", 0, garbled, `printed no "Version: X.Y.Z" line: criu, some version`},
		{"good", 0, good, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := available(t.Context(), tt.euid, tt.explicit)
			switch {
			case tt.want == "" && (err != nil || b.Path != good || b.Version != 40201 || b.Text != "4.2.1"):
				t.Errorf("available: %+v, %v; want CRIU 4.2.1 at %s", b, err, good)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("available: %+v, %v; want an error saying %q", b, err, tt.want)
			}
		})
	}
	// The good binary ran --version and check once; a second probe asks
	// the cache.
	if _, err := available(t.Context(), 0, good); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(goodRuns); string(b) != "--version\ncheck\n" {
		t.Errorf("the good binary ran %q, want --version and check once", b)
	}
}

// TestSearchOrder: with no crs_criu_binary, criu on PATH comes first, and
// an unusable one gives way to the next candidate; with none usable the
// error names every reason.
func TestSearchOrder(t *testing.T) {
	good, _ := fakeCRIU(t, t.TempDir(), "Version: 4.2.1", 0)
	old, _ := fakeCRIU(t, t.TempDir(), "Version: 3.17.1", 0)
	t.Setenv("PATH", filepath.Dir(good))
	if b, err := find(t.Context(), ""); err != nil || b.Path != good {
		t.Errorf("find with a good criu on PATH: %+v, %v; want %s", b, err, good)
	}
	t.Setenv("PATH", filepath.Dir(old))
	cands := candidates()
	if len(cands) == 0 || cands[0] != old {
		t.Fatalf("candidates %q: want PATH's criu %s first", cands, old)
	}
	b, err := find(t.Context(), "")
	switch {
	case len(cands) == 1 && (err == nil || !strings.Contains(err.Error(), "older than 4.2")):
		t.Errorf("find with only an old criu: %+v, %v; want its reason", b, err)
	case len(cands) > 1 && err == nil && b.Path == old:
		t.Errorf("find chose the old criu on PATH over %q", cands[1:])
	}
}
