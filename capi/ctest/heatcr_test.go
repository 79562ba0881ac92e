package ctest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cjob is a C program's job under one of the prefix's commands, its
// standard output read line by line as it comes.
type cjob struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	more  chan struct{} // poked at every line
	done  chan struct{} // closed when the output ends
	err   error         // the command's, once done
	errb  strings.Builder
}

// startC starts prog (gompirun, gompi-restart) of the C build's prefix,
// or prog itself when it is a path.
func startC(t *testing.T, ctx context.Context, prog string, args ...string) *cjob {
	t.Helper()
	if !filepath.IsAbs(prog) {
		prog = filepath.Join(filepath.Dir(gompi.cc), prog)
	}
	j := &cjob{more: make(chan struct{}, 1), done: make(chan struct{})}
	j.cmd = exec.CommandContext(ctx, prog, args...)
	j.cmd.Cancel = func() error { return j.cmd.Process.Signal(syscall.SIGTERM) }
	j.cmd.WaitDelay = 10 * time.Second
	j.cmd.Stderr = &j.errb
	out, err := j.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { // owner: the job; ends with its output
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			j.mu.Lock()
			j.lines = append(j.lines, sc.Text())
			j.mu.Unlock()
			select {
			case j.more <- struct{}{}:
			default:
			}
		}
		j.err = j.cmd.Wait()
		close(j.done)
	}()
	return j
}

func (j *cjob) output() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.lines...)
}

// waitLine waits for a line matching re and returns its submatches.
func (j *cjob) waitLine(t *testing.T, ctx context.Context, re *regexp.Regexp) []string {
	t.Helper()
	for {
		for _, l := range j.output() {
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		}
		select {
		case <-j.more:
		case <-j.done:
			for _, l := range j.output() {
				if m := re.FindStringSubmatch(l); m != nil {
					return m
				}
			}
			t.Fatalf("the job ended (%v) without a line matching %q:\n%s\n%s", j.err, re, strings.Join(j.output(), "\n"), j.errb.String())
		case <-ctx.Done():
			t.Fatalf("no line matching %q: %v:\n%s", re, ctx.Err(), strings.Join(j.output(), "\n"))
		}
	}
}

// wait waits for the job's end and returns its error.
func (j *cjob) wait() error {
	<-j.done
	return j.err
}

var checksumLine = regexp.MustCompile(`^checksum: [0-9a-f]{16}$`)

// checksumOf returns the job's checksum line, failing t when it ended
// badly or printed none.
func (j *cjob) checksumOf(t *testing.T, what string) string {
	t.Helper()
	if err := j.wait(); err != nil {
		t.Fatalf("%s: %v\n%s\n%s", what, err, strings.Join(j.output(), "\n"), j.errb.String())
	}
	for _, l := range j.output() {
		if checksumLine.MatchString(l) {
			return l
		}
	}
	t.Fatalf("%s printed no checksum:\n%s\n%s", what, strings.Join(j.output(), "\n"), j.errb.String())
	return ""
}

// TestHeatCR checkpoints examples/c/heat_cr.c (gompi_cr.h: protected grid
// and state, whose communicators from MPI_Comm_dup and MPI_Comm_split and
// row datatype the restarted ranks use as restored) from outside with
// gompi-checkpoint, ends the job, and restarts it on the same layout (two
// simulated nodes, the default BTLs) and on another (one node, tcp only):
// both finish with the uninterrupted run's checksum. A second job takes
// its own named checkpoint (-ckpt-at) and is restarted from it.
func TestHeatCR(t *testing.T) {
	setup(t)
	dir := t.TempDir()
	bin := gompi.compile(t, filepath.Join(repoRoot, "examples", "c", "heat_cr.c"), dir)
	hosts := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	two, one := hosts("two", "n1 slots=2\nn2 slots=2\n"), hosts("one", "n1 slots=4\n")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{bin, "-size", "48", "-steps", "120", "-every", "20"}
	want := startC(t, ctx, "gompirun", append([]string{"--oversubscribe", "-np", "4"}, args...)...).checksumOf(t, "the uninterrupted run")

	t.Run("gompi-checkpoint", func(t *testing.T) {
		snaps := t.TempDir()
		j := startC(t, ctx, "gompirun", append([]string{"-am", "ft-enable-cr", "--mca", "snapc_base_global_snapshot_dir", snaps,
			"--hostfile", two, "-np", "4"}, append(args, "-wait-ckpt", "50")...)...)
		j.waitLine(t, ctx, regexp.MustCompile(`^heat_cr: waiting for a checkpoint at step 50$`))
		ck := exec.CommandContext(ctx, filepath.Join(filepath.Dir(gompi.cc), "gompi-checkpoint"), fmt.Sprint(j.cmd.Process.Pid))
		out, err := ck.CombinedOutput()
		m := regexp.MustCompile(`Snapshot Ref\.: +\d+ (\S+)`).FindStringSubmatch(string(out))
		if err != nil || m == nil {
			j.wait()
			t.Fatalf("gompi-checkpoint: %v\n%s\nthe job (%v):\n%s\n%s", err, out, j.err, strings.Join(j.output(), "\n"), j.errb.String())
		}
		j.cmd.Process.Signal(syscall.SIGTERM) // the job, held by -wait-ckpt, ends unfinished
		if err := j.wait(); err == nil || slicesMatch(j.output(), checksumLine) {
			t.Fatalf("the job finished before it was ended (%v):\n%s", err, strings.Join(j.output(), "\n"))
		}
		ref := filepath.Join(snaps, m[1])
		for _, tt := range []struct {
			name string
			args []string
		}{
			{"same layout", nil},
			{"one node, tcp", []string{"--hostfile", one, "--mca", "btl", "tcp"}},
		} {
			r := startC(t, ctx, "gompi-restart", append(tt.args, ref)...)
			if got := r.checksumOf(t, "the restart on "+tt.name); got != want {
				t.Errorf("restart on %s: %q, the uninterrupted run %q", tt.name, got, want)
			}
			restarted := regexp.MustCompile(`^heat_cr: restarted from ` + regexp.QuoteMeta(ref) + ` seq 0 \(gompi-checkpoint\) at step (5[01])$`)
			if !slicesMatch(r.output(), restarted) {
				t.Errorf("restart on %s: no line matching %q:\n%s", tt.name, restarted, strings.Join(r.output(), "\n"))
			}
		}
	})

	t.Run("named checkpoint", func(t *testing.T) {
		snaps := t.TempDir()
		j := startC(t, ctx, "gompirun", append([]string{"-am", "ft-enable-cr", "--mca", "snapc_base_global_snapshot_dir", snaps,
			"--hostfile", two, "-np", "4"}, append(args, "-ckpt-at", "30")...)...)
		if got := j.checksumOf(t, "the job checkpointing itself"); got != want {
			t.Errorf("the job checkpointing itself: %q, the uninterrupted run %q", got, want)
		}
		m := j.waitLine(t, ctx, regexp.MustCompile(`^heat_cr: checkpoint step-30: (\S+) seq 0$`))
		r := startC(t, ctx, "gompi-restart", "--hostfile", one, m[1])
		if got := r.checksumOf(t, "the restart"); got != want {
			t.Errorf("restart: %q, the uninterrupted run %q", got, want)
		}
		if re := regexp.MustCompile(`^heat_cr: restarted from ` + regexp.QuoteMeta(m[1]) + ` seq 0 \(step-30\) at step 30$`); !slicesMatch(r.output(), re) {
			t.Errorf("no line matching %q:\n%s", re, strings.Join(r.output(), "\n"))
		}
	})
}

// TestHeatCRTerm: a checkpoint the program asks for with GOMPI_CR_TERM
// ends the job there (status 0, no checksum yet); its restart on one node
// finishes with the uninterrupted run's checksum.
func TestHeatCRTerm(t *testing.T) {
	setup(t)
	dir := t.TempDir()
	bin := gompi.compile(t, filepath.Join(repoRoot, "examples", "c", "heat_cr.c"), dir)
	one := filepath.Join(dir, "one")
	if err := os.WriteFile(one, []byte("n1 slots=4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{bin, "-size", "40", "-steps", "90", "-every", "30"}
	want := startC(t, ctx, "gompirun", append([]string{"--oversubscribe", "-np", "3"}, args...)...).checksumOf(t, "the uninterrupted run")
	snaps := t.TempDir()
	j := startC(t, ctx, "gompirun", append([]string{"-am", "ft-enable-cr", "--mca", "snapc_base_global_snapshot_dir", snaps,
		"--host", "n1:1,n2:2", "-np", "3"}, append(args, "-ckpt-at", "45", "-ckpt-term", "1")...)...)
	if err := j.wait(); err != nil || slicesMatch(j.output(), checksumLine) {
		t.Fatalf("the job ending at its checkpoint (%v):\n%s\n%s", err, strings.Join(j.output(), "\n"), j.errb.String())
	}
	refs, err := filepath.Glob(filepath.Join(snaps, "*.ckpt"))
	if err != nil || len(refs) != 1 {
		t.Fatalf("snapshots in %s: %v %v", snaps, refs, err)
	}
	r := startC(t, ctx, "gompi-restart", "--hostfile", one, refs[0])
	if got := r.checksumOf(t, "the restart"); got != want {
		t.Errorf("restart: %q, the uninterrupted run %q", got, want)
	}
	if re := regexp.MustCompile(`^heat_cr: restarted from ` + regexp.QuoteMeta(refs[0]) + ` seq 0 \(step-45\) at step 45$`); !slicesMatch(r.output(), re) {
		t.Errorf("no line matching %q:\n%s", re, strings.Join(r.output(), "\n"))
	}
}

// criuTools builds, once, what a crs=criu job needs beside gompiBin's
// gompirun and gompid: gompi-checkpoint, gompi-restart, and the criu
// plugin where gompirun looks for plugins (gompiBin/../lib/gompi).
var criuTools struct {
	once sync.Once
	err  error
}

// TestHeatCRUnderCRIU runs heat_cr.c, a gompi_cr.h program, with crs=criu
// named: the processes are saved whole, here while rank 0 holds at step
// 50 (-hold-at, -hold-file) and the others wait for it in the halo
// exchange, and its gompi_cr.h calls do what package cr documents for
// crs=criu (safe points return at once; nothing of the program's is read
// back: the restored processes hold it). Ended, and restarted on one node
// once the hold file is gone, it finishes with the uninterrupted run's
// checksum. Needs root and a CRIU (PATH or the source tree's
// .local/criu, scripts/install-criu.sh).
func TestHeatCRUnderCRIU(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("CRIU and the rank init's PID namespace need root")
	}
	if _, err := exec.LookPath("criu"); err != nil {
		if _, err := os.Stat(filepath.Join(repoRootGuess(), ".local", "criu", "root", "usr", "sbin", "criu")); err != nil {
			t.Skip("no CRIU on PATH or in .local/criu (bash scripts/install-criu.sh)")
		}
	}
	setup(t)
	criuTools.once.Do(func() {
		for _, b := range [][]string{
			{"build", "-o", gompiBin + "/", "./cmd/gompi-checkpoint", "./cmd/gompi-restart"},
			{"build", "-o", filepath.Join(filepath.Dir(gompiBin), "lib", "gompi") + "/", "./cmd/gompi-plugin-criu"},
		} {
			cmd := exec.Command("go", b...)
			cmd.Dir = repoRoot
			if out, err := cmd.CombinedOutput(); err != nil {
				criuTools.err = fmt.Errorf("go %v: %w\n%s", b, err, out)
				return
			}
		}
	})
	if criuTools.err != nil {
		t.Fatal(criuTools.err)
	}
	dir := t.TempDir()
	bin := gompi.compile(t, filepath.Join(repoRoot, "examples", "c", "heat_cr.c"), dir)
	hold, one := filepath.Join(dir, "hold"), filepath.Join(dir, "one")
	for _, f := range []struct{ path, text string }{{hold, ""}, {one, "n1 slots=4\n"}} {
		if err := os.WriteFile(f.path, []byte(f.text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{bin, "-size", "48", "-steps", "120", "-every", "20"}
	want := startC(t, ctx, "gompirun", append([]string{"--oversubscribe", "-np", "4"}, args...)...).checksumOf(t, "the uninterrupted run")
	snaps := t.TempDir()
	j := startC(t, ctx, filepath.Join(gompiBin, "gompirun"), append([]string{"-am", "ft-enable-cr", "--mca", "crs", "criu",
		"--mca", "snapc_base_global_snapshot_dir", snaps, "--host", "n1:2,n2:2", "-np", "4"},
		append(args, "-hold-at", "50", "-hold-file", hold)...)...)
	j.waitLine(t, ctx, regexp.MustCompile(`^heat_cr: holding at step 50$`))
	out, err := exec.CommandContext(ctx, filepath.Join(gompiBin, "gompi-checkpoint"), fmt.Sprint(j.cmd.Process.Pid)).CombinedOutput()
	m := regexp.MustCompile(`Snapshot Ref\.: +\d+ (\S+)`).FindStringSubmatch(string(out))
	if err != nil || m == nil {
		j.cmd.Process.Signal(syscall.SIGTERM)
		j.wait()
		t.Fatalf("gompi-checkpoint: %v\n%s\nthe job (%v):\n%s\n%s", err, out, j.err, strings.Join(j.output(), "\n"), j.errb.String())
	}
	j.cmd.Process.Signal(syscall.SIGTERM) // held: it ends unfinished
	if err := j.wait(); err == nil || slicesMatch(j.output(), checksumLine) {
		t.Fatalf("the job finished before it was ended (%v):\n%s", err, strings.Join(j.output(), "\n"))
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	r := startC(t, ctx, filepath.Join(gompiBin, "gompi-restart"), "--hostfile", one, filepath.Join(snaps, m[1]))
	if got := r.checksumOf(t, "the restart"); got != want {
		t.Errorf("restart: %q, the uninterrupted run %q", got, want)
	}
	if slicesMatch(r.output(), regexp.MustCompile(`^heat_cr: restarted`)) {
		t.Errorf("a process CRIU restored ran its start again:\n%s", strings.Join(r.output(), "\n"))
	}
}

// repoRootGuess is the repository's root before setup has run.
func repoRootGuess() string {
	root, _ := filepath.Abs("../..")
	return root
}

func slicesMatch(lines []string, re *regexp.Regexp) bool {
	for _, l := range lines {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}
