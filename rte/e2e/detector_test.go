package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The unresponsive-rank detector (errmgr_base_rank_heartbeat_*): a rank
// stopped from outside is killed by its gompid and reported failed, and
// under sustain the job runs on, its survivors told through
// mpi.NotifyFailures while they compute; ranks the runtime itself stopped
// (gompi-checkpoint --stop) are left alone.

// detectorTimeout is the tests' detector: beats every 200ms, killed after
// 3s of silence (the harness's environment sets 120s for every other job).
const detectorTimeout = 3 * time.Second

var detectorParams = []string{"--mca", "errmgr_base_rank_heartbeat_period", "200ms",
	"--mca", "errmgr_base_rank_heartbeat_timeout", detectorTimeout.String()}

func failwatch() string { return filepath.Join(bin, "failwatch") }

var eventLine = regexp.MustCompile(`^failwatch: rank 0 heard while computing: rank 1 failed: .+$`)

var waitingLine = regexp.MustCompile(`^failwatch: rank 1 pid (\d+) waiting$`)

// failwatchPid waits for failwatch's rank 1 to say its pid.
func (j *job) failwatchPid() int {
	j.t.Helper()
	var pid int
	j.waitFor("failwatch's rank 1 pid", func(lines []string, _ string) bool {
		for _, l := range lines {
			if m := waitingLine.FindStringSubmatch(l); m != nil {
				fmt.Sscan(m[1], &pid)
				return true
			}
		}
		return false
	})
	if pid == 0 {
		j.t.Fatal("failwatch's rank 1 never said its pid")
	}
	return pid
}

// TestDetectorFailureEvents: rank 1 of failwatch is stopped (the detector
// finds it silent) or killed (gompid sees it exit) from outside; the job,
// under sustain, runs on, and rank 0, computing without MPI calls, hears
// of it through its failure channel with the cause. The time from the
// signal to rank 0's line is logged: the detection figure.
func TestDetectorFailureEvents(t *testing.T) {
	tests := []struct {
		name string
		sig  syscall.Signal
		err  *regexp.Regexp // on gompirun's stderr
	}{
		{
			name: "stopped from outside",
			sig:  syscall.SIGSTOP,
			err:  regexp.MustCompile(`(?m)^gompirun: rank 1 on node n1 was killed by signal 9 \(killed\): unresponsive for \d+(\.\d)?s \(no heartbeat to gompid; errmgr_base_rank_heartbeat_timeout 3s\): killed by gompid; sustain: the job runs on without rank 1 \(2 of 3 ranks left\)$`),
		},
		{
			name: "killed from outside",
			sig:  syscall.SIGKILL,
			err:  regexp.MustCompile(`(?m)^gompirun: rank 1 on node n1 was killed by signal 9 \(killed\); sustain: the job runs on without rank 1 \(2 of 3 ranks left\)$`),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--mca", "errmgr", "sustain,default", "-np", "3", "--hostfile", hostfile(t, twoNodes)}, detectorParams...)
			j := start(t, append(args, failwatch())...)
			pid := j.failwatchPid()
			begin := time.Now()
			if err := syscall.Kill(pid, tt.sig); err != nil {
				t.Fatal(err)
			}
			j.waitFor("rank 0's failure event", func(lines []string, _ string) bool {
				return slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "failwatch: rank 0 heard") })
			})
			heard := time.Since(begin)
			j.waitFor("gompirun's report", func(_ []string, errs string) bool { return tt.err.MatchString(errs) })
			t.Logf("detection of a rank %v (timeout %v): the survivor's event after %v, gompirun's report after %v",
				tt.sig, detectorTimeout, heard.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))
			code, out, errs := j.wait()
			if code != 0 {
				t.Fatalf("exit status %d, want 0; stdout:\n%s\nstderr:\n%s", code, strings.Join(out, "\n"), errs)
			}
			// Rank 0 hears of rank 1 once, with the first cause it learned:
			// the broken connection or the runtime's notice.
			if n := len(slices.DeleteFunc(slices.Clone(out), func(l string) bool { return !eventLine.MatchString(l) })); n != 1 {
				t.Errorf("rank 0 heard of rank 1's failure %d times, want once:\n%s", n, strings.Join(out, "\n"))
			}
			if !tt.err.MatchString(errs) {
				t.Errorf("stderr has no line matching %s:\n%s", tt.err, errs)
			}
			if strings.Contains(errs, "job aborted") {
				t.Errorf("the job was aborted:\n%s", errs)
			}
			noSurvivors(t, "after "+tt.name, func() []int { return marked(j.mark) })
		})
	}
}

// TestDetectorCRIUStop: with the detector on, gompi-checkpoint --stop
// leaves every rank stopped well past the detector's timeout, and nothing
// is killed: a rank the runtime stopped is detached from gompid, which
// does not watch it. SIGCONT resumes the job, which finishes with the
// uninterrupted checksum.
func TestDetectorCRIUStop(t *testing.T) {
	dir := t.TempDir()
	j := criuJobWith(t, dir, append(criuParams(), detectorParams...))
	ref := refOf(t, j, dir)
	checkpointCRIU(t, j, ref.Name, "0", "--stop")
	if n := stoppedRanks(j); n != 4 {
		t.Fatalf("after --stop: %d ranks stopped, want 4", n)
	}
	// Nothing to wait for: what is checked is that nothing happens while
	// the ranks stay stopped for twice the timeout (a kill would come
	// after one timeout and a twentieth).
	time.Sleep(2 * detectorTimeout)
	if n := stoppedRanks(j); n != 4 {
		t.Fatalf("%v after --stop: %d ranks still stopped, want 4 (the detector killed some?)\n%s", 2*detectorTimeout, n, j.errText())
	}
	if err := j.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	code, out, errs := j.wait()
	if got, _ := heatChecksum(out, ""); code != 0 || got != plainSum(t) {
		t.Fatalf("plainheat continued after --stop: status %d, checksum %q\n%s", code, got, errs)
	}
	if strings.Contains(errs, "unresponsive") {
		t.Errorf("the detector acted on ranks the runtime stopped:\n%s", errs)
	}
	noSurvivors(t, "after the continued job", func() []int { return marked(j.mark) })
}

// stoppedRanks counts the job's plainheat processes in the stopped state.
func stoppedRanks(j *job) int {
	n := 0
	for _, pid := range marked(j.mark) {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.TrimSpace(string(comm)) != "plainheat" {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// The state follows the command's closing parenthesis.
		if i := bytes.LastIndexByte(stat, ')'); err == nil && i >= 0 && i+2 < len(stat) && stat[i+2] == 'T' {
			n++
		}
	}
	return n
}
