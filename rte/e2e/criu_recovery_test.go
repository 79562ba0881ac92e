package e2e

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// The crs=criu recovery tests: a job of examples/plainheat (no line of C/R
// code) under errmgr autor loses a rank after a committed checkpoint and
// is recovered in the same gompirun by restoring every rank's CRIU images
// (the daemons restart through the job's CRS); it ends with the checksum
// of an uninterrupted run.

// startCRIUAutor starts plainheat on 4 ranks over two nodes with crs=criu,
// C/R on and errmgr autor, and waits for its first progress line.
func startCRIUAutor(t *testing.T) *autorJob {
	t.Helper()
	a := &autorJob{dir: t.TempDir()}
	a.job = criuJobWith(t, a.dir, append(criuParams(), "--mca", "errmgr", "autor,default"))
	return a
}

// TestCRIUAutor: plainheat is checkpointed, loses rank 2 (SIGKILL), and
// autor restores every rank from the CRIU images of sequence 0 in the same
// run, rank 2 on the other node. The restored ranks are checkpointed in
// turn; then a restored rank gets SIGTERM: the signal reaches it through
// its restored init, its end is reported as a fresh rank's (plainheat
// ends with status 1 when its context is cancelled), and autor restores
// every rank from sequence 1. The job finishes with the uninterrupted
// checksum, restarted neither time from its start (its first progress
// line is printed once), and leaves no process behind.
func TestCRIUAutor(t *testing.T) {
	j := startCRIUAutor(t)
	ref := refOf(t, j.job, j.dir)
	first := j.output()[0]
	pid := j.waitPID(2, "")
	j.checkpoint(0)
	kill(t, "rank 2", pid)
	j.waitErr("gompirun: recovery 1: every rank runs again")
	j.waitConnected()
	j.checkpoint(1)
	pid = j.waitPID(1, "")
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to restored rank 1 (pid %d): %v", pid, err)
	}
	j.waitErr("gompirun: recovery 2: every rank runs again")
	errs := j.finish(plainSum(t),
		"rank 2 on node n2 was killed by signal 9 (killed); autor: recovery 1 of 5: every rank restarts from sequence 0",
		fmt.Sprintf("gompirun: recovery 1: restarting 4 ranks from sequence 0 of %s", ref.Name),
		"(rank 2 n2 -> n1)",
		"autor: recovery 2 of 5: every rank restarts from sequence 1")
	if n := slices.Index(j.output(), first); n < 0 || slices.Contains(j.output()[n+1:], first) {
		t.Errorf("plainheat's first progress line %q printed %d times: a recovery started it anew", first, strings.Count(strings.Join(j.output(), "\n"), first))
	}
	// Rank 1's library stopped on the forwarded SIGTERM; the first end
	// gompirun handled (rank 1's, or a neighbour's that lost it: both were
	// restored) is reported with its status.
	if !strings.Contains(errs, "mpi: process stopped: terminated signal received") ||
		!strings.Contains(errs, "exited with status 1; autor: recovery 2 of 5") {
		t.Errorf("SIGTERM to restored rank 1: its stop or the report of a restored rank's status missing:\n%s", errs)
	}
	for _, l := range strings.Split(errs, "\n") {
		if strings.Contains(l, "runs again") {
			t.Log(l)
		}
	}
}
