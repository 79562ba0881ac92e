package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// root is the tests' private temporary tree (short, for socket paths):
// bin/ holds the binaries, run/ is XDG_RUNTIME_DIR, tmp/ is TMPDIR,
// config/ is XDG_CONFIG_HOME, plugins/ holds gompi-plugin-criu.
var root, bin, plugins string

// runBound bounds any one job: a failure bound, not a synchronization.
const runBound = 3 * time.Minute

func TestMain(m *testing.M) {
	os.Exit(func() int {
		var err error
		root, err = os.MkdirTemp("", "ge")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(root)
		bin = filepath.Join(root, "bin")
		plugins = filepath.Join(root, "plugins")
		for _, d := range []string{"bin", "run", "tmp", "plugins"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		if err := build(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: build:", err)
			return 1
		}
		os.Setenv("XDG_RUNTIME_DIR", filepath.Join(root, "run"))
		os.Setenv("TMPDIR", filepath.Join(root, "tmp"))
		// The remote references jobs write are recorded in the user's
		// snapshot index: the run's own, not the developer's.
		os.Setenv("XDG_CONFIG_HOME", filepath.Join(root, "config"))
		// On a loaded 2-core machine a daemon may be starved for seconds:
		// only the heartbeat test relies on the timeout.
		os.Setenv("GOMPI_MCA_errmgr_base_heartbeat_timeout", "120s")
		// So for a starved rank; the detector's tests set their own.
		os.Setenv("GOMPI_MCA_errmgr_base_rank_heartbeat_timeout", "120s")
		// Race-built processes otherwise sleep a second as they exit,
		// which every recovery and migration would wait for.
		os.Setenv("GORACE", "atexit_sleep_ms=0")
		defer stopSlurm()
		return m.Run()
	}())
}

// build compiles the binaries into bin.
func build() error {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return err
	}
	modRoot := filepath.Dir(strings.TrimSpace(string(out)))
	// gompitest: the binaries carry the test hooks the crash matrix
	// uses (snapc_full_test_pause_at); users' builds do not.
	args := []string{"build", "-tags", "gompitest", "-o", bin + "/"}
	if raceBuild {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/gompirun", "./cmd/gompid", "./cmd/gompi-ps", "./cmd/gompi-checkpoint", "./cmd/gompi-restart", "./cmd/gompi-migrate",
		"./testdata/rte/rankprog", "./testdata/rte/crprog", "./testdata/rte/mpiring", "./testdata/rte/failwatch", "./examples/heat", "./examples/ring", "./examples/noop", "./testdata/cr/ckpt")
	cmd := exec.Command("go", args...)
	cmd.Dir = modRoot
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return err
	}
	return buildCRIU(modRoot)
}

// buildCRIU builds what the crs=criu tests add: the programs with no C/R
// code they checkpoint, in bin, and the criu plugin in plugins/, a folder
// the criu jobs name with mca_base_component_path (the other tests'
// processes load no plugin, as before). Rank binaries are never built with
// -race for CRIU (the rule; race builds are not measured to dump
// well), the plugin follows the harness. CRIU itself is found as an
// installation finds it: root/.local links to the module's .local, where
// scripts/install-criu.sh puts it, when that exists.
func buildCRIU(modRoot string) error {
	plain := exec.Command("go", "build", "-o", bin+"/", "./examples/plainheat", "./examples/traffic")
	plain.Dir, plain.Stderr = modRoot, os.Stderr
	if err := plain.Run(); err != nil {
		return err
	}
	args := []string{"build", "-o", plugins + "/"}
	if raceBuild {
		args = append(args, "-race")
	}
	plug := exec.Command("go", append(args, "./cmd/gompi-plugin-criu")...)
	plug.Dir, plug.Stderr = modRoot, os.Stderr
	if err := plug.Run(); err != nil {
		return err
	}
	local := filepath.Join(modRoot, ".local")
	if _, err := os.Stat(local); err == nil {
		return os.Symlink(local, filepath.Join(root, ".local"))
	}
	return nil
}

// job is one gompirun run.
type job struct {
	t      *testing.T
	cmd    *exec.Cmd
	mark   string
	mu     sync.Mutex
	lines  []string // stdout lines so far
	more   chan struct{}
	stderr bytes.Buffer
	done   chan struct{}
	code   int
}

// start runs gompirun with args. Every process of the job carries a
// unique environment mark, so survivors can be found.
func start(t *testing.T, args ...string) *job {
	t.Helper()
	return startProg(t, "gompirun", args...)
}

// startProg runs one of the built binaries (gompirun, or gompi-restart,
// which becomes gompirun) as a job.
func startProg(t *testing.T, prog string, args ...string) *job {
	t.Helper()
	return startPath(t, os.Environ(), filepath.Join(bin, prog), args...)
}

// startPath runs path (gompirun or a command that runs it, such as
// salloc) with env as a job.
func startPath(t *testing.T, env []string, path string, args ...string) *job {
	t.Helper()
	j := &job{t: t, more: make(chan struct{}, 1), done: make(chan struct{}), mark: randomMark(t)}
	j.cmd = exec.Command(path, args...)
	j.cmd.Env = append(env, "GOMPI_E2E_MARK="+j.mark)
	j.cmd.Dir = root
	j.cmd.Stderr = &lockedWriter{mu: &j.mu, w: &j.stderr, poke: j.poke}
	out, err := j.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			j.mu.Lock()
			j.lines = append(j.lines, sc.Text())
			j.mu.Unlock()
			j.poke()
		}
		err := j.cmd.Wait()
		j.code = j.cmd.ProcessState.ExitCode()
		if ws, ok := j.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			j.code = 128 + int(ws.Signal())
		}
		_ = err
		close(j.done)
	}()
	t.Cleanup(func() {
		select {
		case <-j.done:
		default:
			j.cmd.Process.Kill()
			<-j.done
		}
	})
	return j
}

type lockedWriter struct {
	mu   *sync.Mutex
	w    io.Writer
	poke func() // after each write, when set
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	n, err := l.w.Write(p)
	l.mu.Unlock()
	if l.poke != nil {
		l.poke()
	}
	return n, err
}

// poke wakes whoever waits for more output.
func (j *job) poke() {
	select {
	case j.more <- struct{}{}:
	default:
	}
}

// waitFor waits until cond holds over the output so far (stdout lines and
// stderr), woken by each new piece of output.
func (j *job) waitFor(what string, cond func(lines []string, stderr string) bool) {
	j.t.Helper()
	deadline := time.After(runBound)
	for {
		j.mu.Lock()
		ok := cond(j.lines, j.stderr.String())
		j.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-j.more:
		case <-j.done:
			j.mu.Lock()
			ok := cond(j.lines, j.stderr.String())
			j.mu.Unlock()
			if !ok {
				j.t.Fatalf("job ended (status %d) before %s; stderr:\n%s", j.code, what, j.errText())
			}
			return
		case <-deadline:
			j.t.Fatalf("no %s after %v; stderr:\n%s", what, runBound, j.errText())
		}
	}
}

// output returns the stdout lines so far.
func (j *job) output() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.lines...)
}

func randomMark(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// wait returns gompirun's exit status, stdout lines and stderr.
func (j *job) wait() (int, []string, string) {
	j.t.Helper()
	select {
	case <-j.done:
	case <-time.After(runBound):
		j.cmd.Process.Kill()
		<-j.done
		j.t.Fatalf("gompirun still running after %v; stderr:\n%s", runBound, j.errText())
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if strings.Contains(j.stderr.String(), "WARNING: DATA RACE") {
		j.t.Errorf("the race detector found a race in the job's processes:\n%s", j.stderr.String())
	}
	return j.code, append([]string(nil), j.lines...), j.stderr.String()
}

func (j *job) errText() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stderr.String()
}

// waitReady waits until n ranks printed "ready rank=R pid=P" and returns
// their pids by rank.
func (j *job) waitReady(n int) map[int]int {
	j.t.Helper()
	deadline := time.After(runBound)
	for {
		pids := map[int]int{}
		j.mu.Lock()
		for _, l := range j.lines {
			var r, p int
			if _, err := fmt.Sscanf(l, "ready rank=%d pid=%d", &r, &p); err == nil {
				pids[r] = p
			}
		}
		j.mu.Unlock()
		if len(pids) == n {
			return pids
		}
		select {
		case <-j.more:
		case <-j.done:
			j.t.Fatalf("gompirun ended (status %d) before %d ranks were ready; stderr:\n%s", j.code, n, j.errText())
		case <-deadline:
			j.t.Fatalf("%d ranks not ready after %v; stderr:\n%s", n, runBound, j.errText())
		}
	}
}

// signal sends sig to gompirun.
func (j *job) signal(sig syscall.Signal) {
	j.t.Helper()
	if err := j.cmd.Process.Signal(sig); err != nil {
		j.t.Fatal(err)
	}
}

// marked returns the live (non-zombie) processes whose environment holds mark.
func marked(mark string) []int {
	want := []byte("GOMPI_E2E_MARK=" + mark + "\x00")
	return scanProcs(func(pid int) bool {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		return err == nil && bytes.Contains(env, want)
	})
}

// withArg returns the live processes whose command line holds word.
func withArg(word string) []int {
	return scanProcs(func(pid int) bool {
		cl, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return err == nil && bytes.Contains(append([]byte{0}, cl...), []byte("\x00"+word+"\x00"))
	})
}

func scanProcs(match func(pid int) bool) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !match(pid) {
			continue
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue // dead, waiting for a reaper that is not ours
			}
		}
		out = append(out, pid)
	}
	return out
}

// noSurvivors checks that every process found by find dies within a bound.
// It waits for each on a pidfd (an event), then looks again.
func noSurvivors(t *testing.T, what string, find func() []int) {
	t.Helper()
	for _, pid := range find() {
		if err := waitGone(pid, time.Minute); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	if left := find(); len(left) > 0 {
		for _, pid := range left {
			cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			t.Errorf("%s: process %d survives: %s", what, pid, bytes.ReplaceAll(cl, []byte{0}, []byte{' '}))
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// waitGone blocks until pid has exited (a zombie counts), at most bound.
func waitGone(pid int, bound time.Duration) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(bound)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("process %d still alive after %v", pid, bound)
		}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll pidfd of %d: %w", pid, err)
		}
		if n > 0 {
			return nil
		}
	}
}

// hostfile writes a hostfile and returns its path.
func hostfile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func rankprog() string { return filepath.Join(bin, "rankprog") }

// sessionDirs lists what is left under the default session folder.
func sessionDirs(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(root, "tmp", fmt.Sprintf("gompi-%d", os.Getuid())))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
