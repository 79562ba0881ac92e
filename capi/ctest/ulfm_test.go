package ctest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ULFM's MPIX_ calls from C (mpi-ext.h), on gompi alone: Open MPI's
// packages ship without its ULFM extension. The programs are
// testdata/ulfm/, outside the differential tests' glob.

// ulfmRun runs testdata/ulfm/ulfm.c's case at n ranks; when kill, it
// kills the rank that wrote DIR/pid once it has.
func ulfmRun(t *testing.T, bin, mode string, n int, kill bool) (string, error) {
	t.Helper()
	dir := t.TempDir()
	var victim func(context.Context) error
	if kill {
		victim = func(ctx context.Context) error {
			pid, err := waitPid(ctx, filepath.Join(dir, "pid"))
			if err != nil {
				return err
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				return fmt.Errorf("kill the victim rank (pid %d): %w", pid, err)
			}
			return nil
		}
	}
	return sustainRun(t, n, victim, bin, mode, dir)
}

// sustainRun runs argv at n ranks under errmgr sustain (a lost rank
// leaves the job running), calling during (when not nil) once the job
// started, and returns the job's output and exit error.
func sustainRun(t *testing.T, n int, during func(context.Context) error, argv ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runBound)
	defer cancel()
	all := append([]string{filepath.Join(gompiBin, "gompirun"), "--oversubscribe", "--mca", "errmgr", "sustain,default",
		"-np", fmt.Sprint(n)}, argv...)
	cmd := exec.CommandContext(ctx, all[0], all[1:]...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if during != nil {
		if err := during(ctx); err != nil {
			cmd.Cancel()
			cmd.Wait()
			t.Fatalf("%v\n%s", err, out.String())
		}
	}
	err := cmd.Wait()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (bounded at %v)", ctx.Err(), runBound)
	}
	return out.String(), err
}

// waitPid waits for a rank to write its pid into path (written whole:
// renamed into place).
func waitPid(ctx context.Context, path string) (int, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil {
			return strconv.Atoi(strings.TrimSpace(string(b)))
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no rank wrote %s: %w", path, ctx.Err())
		case <-tick.C:
		}
	}
}

// checkLines fails t for every want line missing from out and for every
// line of the program's own failed checks.
func checkLines(t *testing.T, out string, want []string) {
	t.Helper()
	lines := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		lines[l] = true
		if strings.Contains(l, ": FAIL") {
			t.Errorf("%s", l)
		}
	}
	for _, w := range want {
		if !lines[w] {
			t.Errorf("no line %q in the output:\n%s", w, out)
		}
	}
}

// TestULFM runs the Go ULFM scenarios through the MPIX_ calls: revoke
// while ranks are blocked in a receive (each fails with
// MPIX_ERR_REVOKED; shrink of the revoked communicator works), and agree
// with a rank the test kills (SIGKILL): agree fails with
// MPIX_ERR_PROC_FAILED with the flag agreed, an AnySource Irecv's
// MPI_Wait and MPI_Test report MPIX_ERR_PROC_FAILED_PENDING and leave it
// active, a blocking AnySource receive fails with MPIX_ERR_PROC_FAILED,
// and after MPIX_Comm_ack_failed the same Irecv completes, agree and
// iagree succeed, and ishrink gives the three survivors, who reduce on
// it. All through MPI_ERRORS_RETURN on the communicator.
func TestULFM(t *testing.T) {
	setup(t)
	bin := gompi.compile(t, filepath.Join(repoRoot, "capi", "ctest", "testdata", "ulfm", "ulfm.c"), t.TempDir())
	t.Run("revoke", func(t *testing.T) {
		out, err := ulfmRun(t, bin, "revoke", 3, false)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var want []string
		for r := range 3 {
			want = append(want, fmt.Sprintf("rank %d: MPIX_FT 1", r), fmt.Sprintf("rank %d: is_revoked 1", r),
				fmt.Sprintf("rank %d: barrier on revoked: MPIX_ERR_REVOKED", r),
				fmt.Sprintf("rank %d: shrink revoked: MPI_SUCCESS", r), fmt.Sprintf("rank %d: shrunk size 3 sum 3", r),
				fmt.Sprintf("rank %d: shrunk is_revoked 0", r), fmt.Sprintf("rank %d: done", r))
			if r > 0 {
				want = append(want, fmt.Sprintf("rank %d: blocked receive: MPIX_ERR_REVOKED", r),
					fmt.Sprintf("rank %d: receive after: MPIX_ERR_REVOKED", r))
			}
		}
		checkLines(t, out, append(want, "rank 0: revoke: MPI_SUCCESS"))
	})
	t.Run("kill", func(t *testing.T) {
		out, err := ulfmRun(t, bin, "kill", 4, true)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		want := []string{
			"rank 0: anysource wait: MPIX_ERR_PROC_FAILED_PENDING",
			"rank 0: anysource test: MPIX_ERR_PROC_FAILED_PENDING",
			"rank 0: test flag 0 active 1",
			"rank 0: blocking anysource receive: MPIX_ERR_PROC_FAILED",
			"rank 0: acked before 0", "rank 0: ack_failed: MPI_SUCCESS", "rank 0: acked 1", "rank 0: acked group 1",
			"rank 0: anysource wait after ack: MPI_SUCCESS", "rank 0: received 7 from 1",
		}
		for r := range 3 {
			want = append(want,
				fmt.Sprintf("rank %d: agree with a failure: MPIX_ERR_PROC_FAILED", r),
				fmt.Sprintf("rank %d: agreed flag 0x3", r), fmt.Sprintf("rank %d: failed 1: rank 3", r),
				fmt.Sprintf("rank %d: agree after ack: MPI_SUCCESS", r),
				fmt.Sprintf("rank %d: iagreed flag 0x6", r), fmt.Sprintf("rank %d: ishrink wait: MPI_SUCCESS", r),
				fmt.Sprintf("rank %d: shrunk size 3 sum 3", r), fmt.Sprintf("rank %d: done", r))
			if r > 0 {
				want = append(want, fmt.Sprintf("rank %d: failure_ack: MPI_SUCCESS", r))
			}
		}
		checkLines(t, out, want)
		if strings.Contains(out, "rank 3: done") {
			t.Errorf("the killed rank finished:\n%s", out)
		}
	})
}

// TestULFMCompiles builds a ULFM program written for Open MPI
// (mpi-ext.h, the fault-tolerant path under #if
// defined(OMPI_HAVE_MPI_EXT_FTMPI) && defined(MPIX_FT)) unchanged with
// both MPIs: gompicc takes the ULFM path (the binary imports the MPIX_
// calls and runs them), Open MPI's mpicc here, without ULFM, the other;
// gompicxx builds it as C++.
func TestULFMCompiles(t *testing.T) {
	setup(t)
	src := filepath.Join(repoRoot, "capi", "ctest", "testdata", "ulfm", "ompi_style.c")
	dir := t.TempDir()
	ref, bin := ompi.compile(t, src, dir), gompi.compile(t, src, dir)
	nm, err := exec.Command("nm", "-u", "-D", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("nm: %v\n%s", err, nm)
	}
	for _, f := range []string{"MPIX_Comm_agree", "MPIX_Comm_revoke", "MPIX_Comm_shrink", "MPIX_Comm_get_failed", "MPIX_Comm_ack_failed"} {
		if !strings.Contains(string(nm), f) {
			t.Errorf("the gompicc build does not call %s: the ULFM path was not compiled\n%s", f, nm)
		}
	}
	out, err := gompi.run(2, bin)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	checkLines(t, out, []string{"rank 0: ulfm yes: agree 0 flag 1, 0 failed, 2 left", "rank 1: ulfm yes: agree 0 flag 1, 0 failed, 2 left"})
	if out, err := ompi.run(2, ref); err != nil || !strings.Contains(out, "rank 0: ulfm") {
		t.Errorf("under Open MPI (%v):\n%s", err, out)
	}
	// The header is C++'s too (extern "C"): the same source as C++.
	cxx := exec.Command(gompi.cxx, "-x", "c++", "-Wall", "-Werror", "-o", filepath.Join(dir, "ompi_style.cxx"), src)
	if out, err := cxx.CombinedOutput(); err != nil {
		t.Errorf("gompicxx -x c++: %v\n%s", err, out)
	}
}

// TestResilientC runs examples/c/resilient.c, the C twin of
// examples/resilient, as rte/e2e's TestResilientSolver runs the Go one: a
// rank killing itself mid-solve, right after a save, or at the start, the
// survivors revoke, agree, shrink and finish with the failure-free run's
// checksum, having printed their recovery.
func TestResilientC(t *testing.T) {
	setup(t)
	bin := gompi.compile(t, filepath.Join(repoRoot, "examples", "c", "resilient.c"), t.TempDir())
	done := regexp.MustCompile(`(?m)^resilient: done: 3000 points, 300 iterations, checksum [0-9a-f]{16}$`)
	args := []string{bin, "-points", "3000", "-iters", "300", "-every", "10"}
	out, err := sustainRun(t, 2, nil, args...)
	want := done.FindString(out)
	if err != nil || want == "" {
		t.Fatalf("the failure-free run (%v):\n%s", err, out)
	}
	for _, tt := range []struct{ name, rank, at string }{
		{"a rank dies mid-solve", "2", "105"},
		{"the first rank dies right after a save", "0", "50"},
		{"the last rank dies at the start", "3", "0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := sustainRun(t, 4, nil, append(args, "-crash-rank", tt.rank, "-crash-at", tt.at)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if got := done.FindString(out); got != want {
				t.Errorf("done line %q, want the failure-free run's %q:\n%s", got, want, out)
			}
			recovered := regexp.MustCompile(`(?m)^resilient: failure at iteration \d+ \(.*\): 3 ranks left \(lost world ranks \[` + tt.rank + `\]\); going on from iteration \d+$`)
			if !recovered.MatchString(out) {
				t.Errorf("no recovery line for rank %s in:\n%s", tt.rank, out)
			}
		})
	}
}
