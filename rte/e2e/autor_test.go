package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// quickTool is a command running one of the race-built tools without the
// race runtime's second of sleep at exit (it waits there for other
// goroutines' reports; a tool's races are reported as they happen): the
// autor tests ask gompi-ps often while a job runs, and would otherwise
// lose a second each time.
func quickTool(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	return cmd
}

// psNow is gompi-ps's view of the running job j, nil when it lists none.
func psNow(j *job) *psJob {
	out, err := quickTool("gompi-ps", "--json", "--ranks", pidArg(j)).Output()
	var jobs []psJob
	if err != nil || json.Unmarshal(out, &jobs) != nil || len(jobs) != 1 {
		return nil
	}
	return &jobs[0]
}

// rankOrDaemonPID finds, through gompi-ps, the pid of rank (rank >= 0) or
// of node's daemon (rank < 0) of the running job j, once it is connected.
func rankOrDaemonPID(t *testing.T, j *job, rank int, node string) int {
	t.Helper()
	js := psNow(j)
	if js == nil {
		return 0 // not listed yet
	}
	if rank >= 0 {
		for _, r := range js.Ranks {
			if r.Rank == rank && r.PID > 0 && r.State == "connected" {
				return r.PID
			}
		}
		return 0
	}
	for _, d := range js.Daemons {
		if d.Node == node && d.PID > 0 {
			return d.PID
		}
	}
	return 0
}

// TestAutor: heat under errmgr autor loses a rank, then a whole node, and
// ends with the checksum of an uninterrupted run; gompirun reports each
// recovery and every process is gone at the end.
func TestAutor(t *testing.T) {
	want := heatWant(t)
	j := startAutor(t, twoNodes)
	victims := []struct {
		rank int    // >= 0: kill this rank
		node string // else kill this node's daemon
	}{{2, ""}, {-1, "n2"}}
	for i, v := range victims {
		pid := j.waitPID(v.rank, v.node)
		j.checkpoint(i)
		kill(t, fmt.Sprintf("the victim of kill %d", i+1), pid)
		j.waitErr(fmt.Sprintf("gompirun: recovery %d: every rank runs again", i+1))
	}
	j.finish(want,
		"rank 2 on node n2 was killed by signal 9 (killed); autor: recovery 1 of 5: every rank restarts from sequence 0",
		"gompirun: recovery 1: restarting 4 ranks from sequence 0",
		"(rank 2 n2 -> n1)",
		"node n2 was lost",
		"autor: recovery 2 of 5: every rank restarts from sequence 1",
	)
}
