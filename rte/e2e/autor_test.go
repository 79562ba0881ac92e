package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// rankOrDaemonPID finds, through gompi-ps, the pid of rank (rank >= 0) or
// of node's daemon (rank < 0) of the running job j, once it is connected.
func rankOrDaemonPID(t *testing.T, j *job, rank int, node string) int {
	t.Helper()
	out, err := exec.Command(filepath.Join(bin, "gompi-ps"), "--json", "--ranks", pidArg(j)).Output()
	var jobs []psJob
	if err != nil || json.Unmarshal(out, &jobs) != nil {
		return 0 // not listed yet
	}
	for _, js := range jobs {
		if rank >= 0 {
			for _, r := range js.Ranks {
				if r.Rank == rank && r.PID > 0 && r.State == "connected" {
					return r.PID
				}
			}
			continue
		}
		for _, d := range js.Daemons {
			if d.Node == node && d.PID > 0 {
				return d.PID
			}
		}
	}
	return 0
}

// TestAutor: heat under errmgr autor loses a rank, then a whole node, and
// ends with the checksum of an uninterrupted run; gompirun reports each
// recovery and every process is gone at the end.
func TestAutor(t *testing.T) {
	heat := filepath.Join(bin, "heat")
	// heat prints every 10 steps: each line wakes the test's waits.
	args := []string{heat, "-size", "48", "-steps", "400", "-sleep", "5ms", "-every", "10"}
	clean := start(t, append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes)}, args...)...)
	if code, _, errs := clean.wait(); code != 0 {
		t.Fatalf("uninterrupted heat: status %d\n%s", code, errs)
	}
	want, _ := heatChecksum(clean.output(), "")
	if want == "" {
		t.Fatalf("no checksum from heat:\n%s", strings.Join(clean.output(), "\n"))
	}

	dir := t.TempDir()
	j := start(t, append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes), "-am", "ft-enable-cr",
		"--mca", "errmgr", "autor,default", "--mca", "snapc_base_global_snapshot_dir", dir,
		"--mca", "sstore", "stage", "--mca", "sstore_stage_local_snapshot_dir", t.TempDir()}, args...)...)
	victims := []struct {
		rank int    // >= 0: kill this rank
		node string // else kill this node's daemon
	}{{2, ""}, {-1, "n2"}}
	for i, v := range victims {
		var pid int
		j.waitFor(fmt.Sprintf("the victim of kill %d", i+1), func([]string, string) bool {
			pid = rankOrDaemonPID(t, j, v.rank, v.node)
			return pid != 0
		})
		if code, out, errs := tool(t, "gompi-checkpoint", pidArg(j)); code != 0 {
			t.Fatalf("checkpoint before kill %d: status %d\n%s%s", i+1, code, out, errs)
		}
		syscall.Kill(pid, syscall.SIGKILL)
		n := i + 1
		j.waitFor(fmt.Sprintf("recovery %d done", n), func(_ []string, stderr string) bool {
			return strings.Contains(stderr, fmt.Sprintf("gompirun: recovery %d: every rank runs again", n))
		})
	}
	code, lines, errs := j.wait()
	if code != 0 {
		t.Fatalf("heat under autor: status %d\n%s", code, errs)
	}
	if got, _ := heatChecksum(lines, ""); got != want {
		t.Errorf("checksum %q after two recoveries, want %q (uninterrupted)\nstderr:\n%s", got, want, errs)
	}
	for _, w := range []string{
		"rank 2 on node n2 was killed by signal 9 (killed); autor: recovery 1 of 5: every rank restarts from sequence 0",
		"gompirun: recovery 1: restarting 4 ranks from sequence 0",
		"(rank 2 n2 -> n1)",
		"node n2 was lost",
		"autor: recovery 2 of 5: every rank restarts from sequence 1",
	} {
		if !strings.Contains(errs, w) {
			t.Errorf("gompirun's report lacks %q:\n%s", w, errs)
		}
	}
	noSurvivors(t, "after the recoveries", func() []int { return marked(j.mark) })
}
