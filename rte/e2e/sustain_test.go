package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// The sustain error manager keeps a job running after a rank or its node
// fails; examples/mgrwork, a manager/worker program, finishes its work
// with the survivors and prints the checksum of a failure-free run.

// sustainBin holds mgrwork and resilient, built on first use (the harness builds the
// runtime's binaries; sustain is in the built-in list).
var (
	sustainOnce sync.Once
	sustainBin  string
	sustainErr  error
)

func buildSustain(t *testing.T) {
	t.Helper()
	sustainOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			sustainErr = err
			return
		}
		modRoot := filepath.Dir(strings.TrimSpace(string(out)))
		sustainBin = filepath.Join(root, "sustain-bin")
		if sustainErr = os.MkdirAll(sustainBin, 0o700); sustainErr != nil {
			return
		}
		args := []string{"build", "-tags", "gompitest", "-o", sustainBin + "/"} // as the other binaries (harness_test.go)
		if raceBuild {
			args = append(args, "-race")
		}
		args = append(args, "./examples/mgrwork", "./examples/resilient")
		cmd := exec.Command("go", args...)
		cmd.Dir = modRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			sustainErr = fmt.Errorf("go %v: %v\n%s", args, err, out)
		}
	})
	if sustainErr != nil {
		t.Fatalf("build examples/mgrwork and resilient: %v", sustainErr)
	}
}

// startSustain runs gompirun with mgrwork built.
func startSustain(t *testing.T, args ...string) *job {
	t.Helper()
	buildSustain(t)
	return start(t, args...)
}

// mgrwork is the example's path; buildSustain must have run.
func mgrwork() string { return filepath.Join(sustainBin, "mgrwork") }

var checksumLine = regexp.MustCompile(`^mgrwork: done: (\d+) items, checksum ([0-9a-f]{16})$`)

// checksumOf returns the checksum line's value, failing t without one.
func checksumOf(t *testing.T, out []string, errs string) string {
	t.Helper()
	for _, l := range out {
		if m := checksumLine.FindStringSubmatch(l); m != nil {
			return m[2]
		}
	}
	t.Fatalf("no checksum line in the output:\n%s\nstderr:\n%s", strings.Join(out, "\n"), errs)
	return ""
}

var (
	refOnce sync.Once
	refSum  string
)

// reference is the checksum of a failure-free run of the work.
func reference(t *testing.T, work []string) string {
	t.Helper()
	buildSustain(t)
	refOnce.Do(func() {
		j := startSustain(t, append([]string{"-np", "3", "--hostfile", hostfile(t, twoNodes), mgrwork()}, work...)...)
		code, out, errs := j.wait()
		if code != 0 {
			t.Fatalf("failure-free run: exit status %d; stderr:\n%s", code, errs)
		}
		refSum = checksumOf(t, out, errs)
	})
	if refSum == "" {
		t.Fatal("no reference checksum (the failure-free run failed)")
	}
	return refSum
}

// pausedPid waits for a worker's pause line and returns its pid.
func (j *job) pausedPid(rank int) int {
	j.t.Helper()
	re := regexp.MustCompile(fmt.Sprintf(`^mgrwork: worker %d pid (\d+) paused at item \d+$`, rank))
	var pid int
	j.waitFor(fmt.Sprintf("worker %d to pause", rank), func(lines []string, _ string) bool {
		for _, l := range lines {
			if m := re.FindStringSubmatch(l); m != nil {
				fmt.Sscan(m[1], &pid)
				return true
			}
		}
		return false
	})
	if pid == 0 {
		j.t.Fatalf("worker %d never paused", rank)
	}
	return pid
}

// daemonPid returns the pid of the gompid of node.
func (j *job) daemonPid(node string) int {
	j.t.Helper()
	st := ps(j.t, "--json", fmt.Sprint(j.cmd.Process.Pid))
	for _, d := range st[0].Daemons {
		if d.Node == node {
			return d.PID
		}
	}
	j.t.Fatalf("gompi-ps shows no daemon for %s: %+v", node, st)
	return 0
}

var sustainWork = []string{"-items", "120", "-cost", "20000"}

func TestSustain(t *testing.T) {
	want := reference(t, sustainWork)
	// 4 ranks on 2 nodes: manager 0 and worker 1 on n1, workers 2 and 3 on n2.
	tests := []struct {
		name  string
		mca   []string // gompirun's extra parameters
		args  []string // mgrwork's failure flags
		kill  func(j *job)
		lines []*regexp.Regexp // on gompirun's stderr
		out   []string         // on stdout
	}{
		{
			// Worker 2 dies before it ever talked to the manager: only the
			// runtime's notice tells the others.
			name: "a worker crashes at its first item",
			args: []string{"-crash-rank", "2", "-crash-at", "1"},
			lines: []*regexp.Regexp{regexp.MustCompile(
				`(?m)^gompirun: rank 2 on node n2 was killed by signal 9 \(killed\); sustain: the job runs on without rank 2 \(3 of 4 ranks left\)$`)},
			out: []string{"mgrwork: worker 2 failed (", "mgrwork: shrank the communicator to 3 ranks (workers [1 3])"},
		},
		{
			name: "a worker crashes, results collected one by one",
			args: []string{"-crash-rank", "3", "-crash-at", "1", "-shrink=false"},
			lines: []*regexp.Regexp{regexp.MustCompile(
				`(?m)^gompirun: rank 3 on node n2 was killed by signal 9 \(killed\); sustain: the job runs on without rank 3 \(3 of 4 ranks left\)$`)},
			out: []string{"mgrwork: worker 3 failed ("},
		},
		{
			name: "a worker killed from outside",
			args: []string{"-pause-rank", "1", "-pause-at", "1"},
			kill: func(j *job) {
				if err := syscall.Kill(j.pausedPid(1), syscall.SIGKILL); err != nil {
					j.t.Fatal(err)
				}
			},
			lines: []*regexp.Regexp{regexp.MustCompile(
				`(?m)^gompirun: rank 1 on node n1 was killed by signal 9 \(killed\); sustain: the job runs on without rank 1 \(3 of 4 ranks left\)$`)},
			out: []string{"mgrwork: worker 1 failed (", "mgrwork: shrank the communicator to 3 ranks (workers [2 3])"},
		},
		{
			// The detector (errmgr_base_rank_heartbeat_*) finds it silent,
			// its gompid kills it, and it is a failure like a crash.
			name: "a worker stopped from outside",
			mca:  detectorParams,
			args: []string{"-pause-rank", "1", "-pause-at", "1"},
			kill: func(j *job) {
				if err := syscall.Kill(j.pausedPid(1), syscall.SIGSTOP); err != nil {
					j.t.Fatal(err)
				}
			},
			lines: []*regexp.Regexp{regexp.MustCompile(
				`(?m)^gompirun: rank 1 on node n1 was killed by signal 9 \(killed\): unresponsive for .*; sustain: the job runs on without rank 1 \(3 of 4 ranks left\)$`)},
			out: []string{"mgrwork: worker 1 failed (", "mgrwork: shrank the communicator to 3 ranks (workers [2 3])"},
		},
		{
			name: "a node lost",
			args: []string{"-pause-rank", "2", "-pause-at", "1"},
			kill: func(j *job) {
				j.pausedPid(2)
				if err := syscall.Kill(j.daemonPid("n2"), syscall.SIGKILL); err != nil {
					j.t.Fatal(err)
				}
			},
			lines: []*regexp.Regexp{regexp.MustCompile(
				`(?m)^gompirun: node n2 was lost: .*; sustain: the job runs on without ranks 2, 3 \(2 of 4 ranks left\)$`)},
			out: []string{"mgrwork: worker 2 failed (", "mgrwork: worker 3 failed ("},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--mca", "errmgr", "sustain,default"}, tt.mca...)
			args = append(args, "-np", "4", "--hostfile", hostfile(t, twoNodes), mgrwork())
			j := startSustain(t, append(append(args, sustainWork...), tt.args...)...)
			if tt.kill != nil {
				tt.kill(j)
			}
			code, out, errs := j.wait()
			if code != 0 {
				t.Fatalf("exit status %d, want 0; stdout:\n%s\nstderr:\n%s", code, strings.Join(out, "\n"), errs)
			}
			if got := checksumOf(t, out, errs); got != want {
				t.Errorf("checksum %s, want %s (the failure-free run's); stdout:\n%s", got, want, strings.Join(out, "\n"))
			}
			for _, re := range tt.lines {
				if !re.MatchString(errs) {
					t.Errorf("stderr has no line matching %s:\n%s", re, errs)
				}
			}
			for _, w := range tt.out {
				if !slices.ContainsFunc(out, func(l string) bool { return strings.Contains(l, w) }) {
					t.Errorf("stdout has no %q:\n%s", w, strings.Join(out, "\n"))
				}
			}
			if strings.Contains(errs, "job aborted") {
				t.Errorf("the job was aborted:\n%s", errs)
			}
			noSurvivors(t, "after "+tt.name, func() []int { return marked(j.mark) })
		})
	}
}

// Without sustain a failure aborts the job as before; past
// errmgr_sustain_max_failures too, with what sustain said.
func TestSustainNotAsked(t *testing.T) {
	buildSustain(t)
	tests := []struct {
		name string
		args []string
		kill func(j *job)
		code int
		msg  *regexp.Regexp
	}{
		{
			name: "default alone",
			args: []string{"-crash-rank", "2", "-crash-at", "1"},
			code: 128 + 9,
			msg:  regexp.MustCompile(`(?m)^gompirun: job aborted: rank 2 on node n2 was killed by signal 9 \(killed\)$`),
		},
		{
			name: "past the bound",
			args: []string{"--mca", "errmgr", "sustain,default", "--mca", "errmgr_sustain_max_failures", "1", "-pause-rank", "3", "-pause-at", "1"},
			kill: func(j *job) {
				j.pausedPid(3)
				if err := syscall.Kill(j.daemonPid("n2"), syscall.SIGKILL); err != nil {
					j.t.Fatal(err)
				}
			},
			code: 1,
			msg: regexp.MustCompile(`(?m)^gompirun: job aborted: node n2 was lost: .*\n` +
				`gompirun: tried before aborting: sustain: 2 ranks lost, more than errmgr_sustain_max_failures = 1; not running on$`),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// gompirun's options first, then the program and its flags.
			var opts, prog []string
			for i := 0; i < len(tt.args); i++ {
				if tt.args[i] == "--mca" {
					opts = append(opts, tt.args[i:i+3]...)
					i += 2
					continue
				}
				prog = append(prog, tt.args[i])
			}
			args := append(opts, "-np", "4", "--hostfile", hostfile(t, twoNodes), mgrwork())
			j := startSustain(t, append(append(args, sustainWork...), prog...)...)
			if tt.kill != nil {
				tt.kill(j)
			}
			code, out, errs := j.wait()
			if code != tt.code || !tt.msg.MatchString(errs) {
				t.Errorf("exit status %d, stderr:\n%s\nwant %d and a line matching %s", code, errs, tt.code, tt.msg)
			}
			if slices.ContainsFunc(out, checksumLine.MatchString) {
				t.Errorf("the aborted job finished its work:\n%s", strings.Join(out, "\n"))
			}
			noSurvivors(t, "after "+tt.name, func() []int { return marked(j.mark) })
		})
	}
}
