package crscriu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/crs/crstest"
	"gompi/frameworks/sstore/snapshot"
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

// framework is a CRS framework holding criu alone, and values with C/R
// on.
func framework(t *testing.T) (*mca.Framework[crs.Module], *mca.Values) {
	t.Helper()
	params := mca.NewParams()
	set := frameworks.New(params)
	set.CRS.Register(New())
	vals, err := params.ResolveSettings([]mca.Setting{{Name: mca.ParamCREnabled, Value: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	return set.CRS, vals
}

// newModule selects criu as gompid would, with C/R on.
func newModule(t *testing.T) crs.Module {
	t.Helper()
	needRoot(t)
	fw, vals := framework(t)
	c, err := fw.SelectOne(t.Context(), vals, mca.RoleDaemon, nil)
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

// TestCheckpointMeta: Meta records the root's standard output and
// descriptor 3 as two pipes, CRIU's log stays out of the snapshot, and the
// images are owner-only even in a group-readable folder.
func TestCheckpointMeta(t *testing.T) {
	m := newModule(t)
	c := crstest.StartCounter(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, snapshot.GroupDirMode); err != nil {
		t.Fatal(err)
	}
	res, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: c.Cmd.Process.Pid, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	out, life := res.Meta[metaFD(1)], res.Meta[metaFD(3)]
	if !strings.HasPrefix(out, "pipe:[") || !strings.HasPrefix(life, "pipe:[") || out == life || res.Meta[metaFD(0)] != "" {
		t.Errorf("meta %v: want descriptors 1 and 3 recorded as two pipes, 0 (/dev/null) not", res.Meta)
	}
	if n, _ := strconv.Atoi(res.Meta[metaTree]); res.Meta[metaPID] != strconv.Itoa(c.Cmd.Process.Pid) || n < 1 || res.Meta[metaVersion] == "" {
		t.Errorf("meta %v: want the root's pid, the number of processes and the version", res.Meta)
	}
	for _, f := range res.Files {
		if strings.HasSuffix(f, ".log") {
			t.Errorf("CRIU's log %s is in the snapshot", f)
		}
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != snapshot.OwnerFileMode {
			t.Errorf("image %s has mode %v, want %v", f, fi.Mode().Perm(), snapshot.OwnerFileMode)
		}
	}
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
		c := crstest.StartCounter(t)
		crstest.Count(t, c.Lines)
		res, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: c.Cmd.Process.Pid, Dir: t.TempDir(), Options: crs.Options{Term: true}})
		if err != nil || res.State != crs.StateTerm {
			t.Fatalf("checkpoint with Term: %v, %v; want StateTerm", res.State, err)
		}
		err = c.Cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("the dumped tree ended with %v, want killed by CRIU", err)
		}
	})
	t.Run("stop", func(t *testing.T) {
		c := crstest.StartCounter(t)
		crstest.Count(t, c.Lines)
		pid := c.Cmd.Process.Pid
		res, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: pid, Dir: t.TempDir(), Options: crs.Options{Stop: true}})
		if err != nil || res.State != crs.StateContinue {
			t.Fatalf("checkpoint with Stop: %v, %v; want StateContinue", res.State, err)
		}
		if st := procState(pid); st != 'T' {
			t.Errorf("pid %d after a dump with Stop is in state %q, want T (stopped)", pid, st)
		}
		// To the whole group, as gompid resumes a rank: CRIU stopped every
		// process of the tree, and the shell may be waiting on a sleep.
		if err := syscall.Kill(-pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		// What it wrote before the dump may still be in the pipe: read
		// until two numbers in a row, which only a running counter writes.
		prev := crstest.Count(t, c.Lines)
		for n := crstest.Count(t, c.Lines); n != prev+1; n = crstest.Count(t, c.Lines) {
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
// the dumped root held at a descriptor the request covers is refused
// before CRIU runs.
func TestRestoreNeedsPipes(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, inventory), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := crstest.Pipe(t)
	meta := map[string]string{metaFD(1): "pipe:[10]", metaFD(2): "pipe:[10]", metaFD(3): "pipe:[11]"}
	m := NewModule("/nonexistent/criu", "4.2.1")
	_, err := m.Restore(t.Context(), crs.RestoreRequest{Dir: dir, Meta: meta, Files: []*os.File{out[1]}})
	if err == nil || !strings.Contains(err.Error(), "pipe:[10]) as descriptor 1") {
		t.Errorf("restore without standard output's pipe: %v; want a refusal naming it", err)
	}
	// Stdout and stderr on one pipe take stdout's replacement; a pipe
	// beyond the descriptors given is CRIU's to restore.
	meta[metaFD(251)] = "pipe:[12]"
	got, stray, err := inheritFiles(crs.RestoreRequest{Meta: meta, Stdout: out[1], Files: []*os.File{out[0]}})
	if err != nil || len(got) != 2 || got["pipe:[10]"] != out[1] || got["pipe:[11]"] != out[0] || len(stray) != 1 || stray[0] != 251 {
		t.Errorf("inherit-fd files %v, stray %v, %v; want pipe:[10] from Stdout and pipe:[11] from Files[0], 251 stray", got, stray, err)
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

// TestNoteNamesCRIU: an offered criu tells gompi-info which CRIU it uses.
func TestNoteNamesCRIU(t *testing.T) {
	needRoot(t)
	fw, vals := framework(t)
	probes, err := fw.Probe(t.Context(), vals, mca.RoleDaemon)
	if err != nil {
		t.Fatal(err)
	}
	if len(probes) != 1 || !probes[0].Selected || !strings.HasPrefix(probes[0].Note, "CRIU 4.") || !strings.Contains(probes[0].Note, " at /") {
		t.Errorf("probes %+v; want criu selected, noting \"CRIU 4.x at /path\"", probes)
	}
}

// TestQuerySkips: where the component is not offered whatever the host.
func TestQuerySkips(t *testing.T) {
	on := mca.Setting{Name: mca.ParamCREnabled, Value: "1"}
	for _, tt := range []struct {
		name     string
		role     mca.Role
		settings []mca.Setting
		why      string
	}{
		{"c/r off", mca.RoleDaemon, nil, "checkpoint/restart is off"},
		{"rank, not named", mca.RoleApp, []mca.Setting{on}, "not named (--mca crs criu)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			params := mca.NewParams()
			frameworks.New(params).CRS.Register(New())
			vals, err := params.ResolveSettings(tt.settings)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = New().Query(t.Context(), mca.Query{Values: vals, Role: tt.role, Logger: slog.New(slog.DiscardHandler)})
			if !errors.Is(err, mca.ErrSkip) || !strings.Contains(err.Error(), tt.why) {
				t.Errorf("query: %v; want a skip saying %q", err, tt.why)
			}
		})
	}
}

// TestReserveFDs: with holes among the low descriptor numbers, what is
// opened after reserveFDs(n) is numbered n or more (go-criu's swrk
// socket must not land where the inherited files go), and release frees
// the holes again.
func TestReserveFDs(t *testing.T) {
	var files []*os.File
	for range 8 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	hole := int(files[2].Fd())
	files[2].Close()
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	n := int(files[len(files)-1].Fd()) + 1
	release, err := reserveFDs(n)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	if got := int(f.Fd()); got < n {
		t.Errorf("opened descriptor %d after reserving below %d", got, n)
	}
	f.Close()
	release()
	if f, err = os.Open(os.DevNull); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := int(f.Fd()); got > hole {
		t.Errorf("after release the lowest free descriptor is %d, want %d or lower again", got, hole)
	}
}

// TestHostLock: one holder at a time on the host; a wait given up by its
// context says so and leaves the lock to the next.
func TestHostLock(t *testing.T) {
	unlock, err := hostLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := hostLock(ctx); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "another CRIU run") {
		t.Fatalf("second holder while the first holds it: %v", err)
	}
	unlock()
	again, err := hostLock(t.Context())
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	again()
}
