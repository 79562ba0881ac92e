package e2e

import (
	"strings"
	"syscall"
	"testing"
)

// TestPeriodicCheckpoints: with snapc_base_periodic gompirun checkpoints
// the job by itself, one sequence after another, each committed.
func TestPeriodicCheckpoints(t *testing.T) {
	dir := t.TempDir()
	j := crJob(t, dir, "--mca", "snapc_base_periodic", "0.2")
	ref := refOf(t, j, dir)
	// A periodic checkpoint starts an interval after the previous one is
	// committed: once a rank saves sequence 2, sequences 0 and 1 are.
	j.waitFor("a third periodic checkpoint", func(lines []string, _ string) bool {
		for _, l := range lines {
			if strings.HasPrefix(l, "saved ") && strings.Contains(l, " seq=2 ") {
				return true
			}
		}
		return false
	})
	j.signal(syscall.SIGINT)
	j.wait()
	yes, _ := committed(t, ref)
	if len(yes) < 2 || yes[0] != 0 || yes[1] != 1 {
		t.Errorf("committed %v: want sequences 0 and 1 at least", yes)
	}
}
