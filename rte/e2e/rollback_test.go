package e2e

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The rollback tests run examples/heat on 8 ranks over two simulated nodes
// under errmgr rollback and kill a rank, a node, or two ranks at once:
// the survivors must go back in place (same PIDs), only the lost ranks
// start anew, and the job must end with the checksum of a run that never
// failed.

const eightOnTwo = "# two simulated nodes of 4\nn1 slots=4\nn2 slots=4\n"

// startRollback starts heat on 8 ranks under errmgr rollback,autor,default
// with C/R on and sstore stage (node caches under local).
func startRollback(t *testing.T) *autorJob {
	t.Helper()
	a := &autorJob{dir: t.TempDir(), local: t.TempDir()}
	args := []string{"-np", "8", "--hostfile", hostfile(t, eightOnTwo), "-am", "ft-enable-cr",
		"--mca", "errmgr", "rollback,autor,default", "--mca", "snapc_base_global_snapshot_dir", a.dir,
		"--mca", "sstore", "stage", "--mca", "sstore_stage_local_snapshot_dir", a.local,
		filepath.Join(bin, "heat")}
	a.job = start(t, append(args, autorHeat...)...)
	return a
}

// rankPIDs waits (woken by the job's output) until gompi-ps shows all 8
// ranks connected, and returns their PIDs by rank.
func (j *job) rankPIDs() map[int]int {
	j.t.Helper()
	var pids map[int]int
	j.waitFor("every rank connected", func([]string, string) bool {
		js := psNow(j)
		if js == nil || len(js.Ranks) != 8 {
			return false
		}
		pids = map[int]int{}
		for _, r := range js.Ranks {
			if r.State != "connected" || r.PID <= 0 {
				return false
			}
			pids[r.Rank] = r.PID
		}
		return true
	})
	return pids
}

// samePIDs checks that the survivors kept their processes and the lost
// ranks got new ones.
func samePIDs(t *testing.T, before, after map[int]int, lost []int) {
	t.Helper()
	for _, r := range slices.Sorted(maps.Keys(before)) {
		switch {
		case slices.Contains(lost, r) && after[r] == before[r]:
			t.Errorf("lost rank %d has its old PID %d", r, before[r])
		case !slices.Contains(lost, r) && after[r] != before[r]:
			t.Errorf("surviving rank %d changed process: PID %d, then %d", r, before[r], after[r])
		}
	}
}

// TestRollbackRank: rank 5 is killed; it alone starts anew (on its node),
// the 7 others go back to sequence 0 in place.
func TestRollbackRank(t *testing.T) {
	want := heatWant(t)
	a := startRollback(t)
	before := a.rankPIDs()
	a.checkpoint(0)
	kill(t, "rank 5", before[5])
	a.waitErr("gompirun: rollback 1: every rank computes again from sequence 0")
	samePIDs(t, before, a.rankPIDs(), []int{5})
	errs := a.finish(want,
		"rank 5 on node n2 was killed by signal 9 (killed); rollback: rollback 1 of 5: survivors return to sequence 0 in place, rank 5 starts again on n2",
		"(rank 5 started anew)")
	if strings.Contains(errs, "autor:") {
		t.Errorf("autor acted:\n%s", errs)
	}
}

// TestRollbackNode: node n2's daemon is killed with its 4 ranks; they
// start anew on n1, the 4 ranks of n1 go back in place.
func TestRollbackNode(t *testing.T) {
	want := heatWant(t)
	a := startRollback(t)
	before := a.rankPIDs()
	a.checkpoint(0)
	kill(t, "the daemon of n2", a.waitPID(-1, "n2"))
	a.waitErr("gompirun: rollback 1: every rank computes again from sequence 0")
	after := a.rankPIDs()
	samePIDs(t, before, after, []int{4, 5, 6, 7})
	a.finish(want,
		"node n2 was lost",
		"rollback: rollback 1 of 5: survivors return to sequence 0 in place, ranks 4, 5, 6, 7 start again on n1, n1, n1, n1",
		"(ranks [4 5 6 7] started anew)")
}

// TestRollbackSecondFailure: ranks 5 and 2 are killed together. The
// second failure lands while the first rollback is under way (it cannot
// end: rank 2 never joins it), so rollback falls back and autor restarts
// the whole job, which ends with the same checksum.
func TestRollbackSecondFailure(t *testing.T) {
	want := heatWant(t)
	a := startRollback(t)
	before := a.rankPIDs()
	a.checkpoint(0)
	kill(t, "rank 5", before[5])
	kill(t, "rank 2", before[2])
	a.waitErr("gompirun: recovery 1: every rank runs again")
	a.finish(want,
		"rollback: rollback 1 of 5: survivors return to sequence 0 in place",
		"(killed); rollback: falls back: a failure during a rollback under way; autor: recovery 1 of 5: every rank restarts from sequence 0")
}

// TestCRIURollbackFallsBack: under crs=criu a rank's state is its whole
// process, which a survivor cannot take back in place: rollback passes
// the fault on, saying why, and autor restores every rank from the CRIU
// images (plainheat, which has no C/R code, finishes with its checksum).
func TestCRIURollbackFallsBack(t *testing.T) {
	a := &autorJob{dir: t.TempDir()}
	a.job = criuJobWith(t, a.dir, append(criuParams(), "--mca", "errmgr", "rollback,autor,default"))
	pid := a.waitPID(2, "")
	a.checkpoint(0)
	kill(t, "rank 2", pid)
	a.waitErr("gompirun: recovery 1: every rank runs again")
	a.finish(plainSum(t),
		"rank 2 on node n2 was killed by signal 9 (killed); rollback: falls back: crs criu saves whole processes: survivors are not restored in place (only crs self); autor: recovery 1 of 5: every rank restarts from sequence 0")
}
