package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
)

const twoNodes = "# two simulated nodes\nn1 slots=2\nn2 slots=2\n"

func TestRunOverSimulatedNodes(t *testing.T) {
	hosts := hostfile(t, twoNodes)
	tests := []struct {
		name  string
		args  []string
		nodes map[int]string // rank -> node
	}{
		{"map by slot", []string{"-np", "4", "--hostfile", hosts}, map[int]string{0: "n1", 1: "n1", 2: "n2", 3: "n2"}},
		{"map by node", []string{"-np", "4", "-hostfile", hosts, "--map-by", "node"}, map[int]string{0: "n1", 1: "n2", 2: "n1", 3: "n2"}},
		{"host list", []string{"-np", "3", "--host", "a:2,b"}, map[int]string{0: "a", 1: "a", 2: "b"}},
		{"np from slots", []string{"--host", "a,b"}, map[int]string{0: "a", 1: "b"}},
		{"localhost", []string{"-n", "2"}, map[int]string{0: "localhost", 1: "localhost"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sessions := t.TempDir()
			args := append(append([]string{"--mca", "plm_base_session_dir", sessions}, tt.args...), rankprog(), "-barriers", "3")
			code, out, errs := start(t, args...).wait()
			if code != 0 {
				t.Fatalf("exit status %d; stderr:\n%s", code, errs)
			}
			var all []string
			for r, n := range tt.nodes {
				all = append(all, n)
				want := fmt.Sprintf("rank %d of %d on %s: modex saw ", r, len(tt.nodes), n)
				if !slices.ContainsFunc(out, func(l string) bool { return strings.HasPrefix(l, want) }) {
					t.Errorf("no line %q in output:\n%s", want, strings.Join(out, "\n"))
				}
			}
			slices.Sort(all)
			for _, l := range out {
				if !strings.HasSuffix(l, "modex saw "+strings.Join(all, ",")) {
					t.Errorf("line %q: want every rank's modex entry (%s)", l, strings.Join(all, ","))
				}
			}
			if len(out) != len(tt.nodes) {
				t.Errorf("%d lines, want %d:\n%s", len(out), len(tt.nodes), strings.Join(out, "\n"))
			}
			if left, _ := os.ReadDir(sessions); len(left) != 0 {
				t.Errorf("node directories left behind: %v", left)
			}
		})
	}
}

// Package mpi over the runtime: the modex carries the transports'
// addresses, and the result does not depend on how many ranks or nodes
// computed it.
// TestMPI runs programs of package mpi over the runtime: each must print the
// same checksum on any number of ranks, nodes and transports as with -np 1.
func TestMPI(t *testing.T) {
	hosts := hostfile(t, twoNodes)
	programs := []struct {
		name string
		args []string
		sum  func(out []string, np string) (string, bool)
	}{
		{"mpiring", []string{"-n", "5000"}, func(out []string, np string) (string, bool) {
			if len(out) != 1 || !strings.HasSuffix(out[0], " ring "+np+"/"+np) {
				return "", false
			}
			return strings.Fields(out[0])[1], true
		}},
		{"heat", []string{"-size", "48", "-steps", "30"}, heatChecksum},
	}
	for _, prog := range programs {
		t.Run(prog.name, func(t *testing.T) {
			var want string
			for _, args := range [][]string{
				{"-np", "1"},
				{"-np", "4", "--hostfile", hosts},
				{"-np", "4", "--hostfile", hosts, "--map-by", "node"},
				{"-np", "3", "--host", "n1,n2,n3", "--mca", "btl", "tcp"},
				// TLS between the ranks (issue 31 item 1): same results.
				{"-np", "3", "--host", "n1,n2,n3", "--mca", "btl", "tcp", "--mca", "btl_tcp_tls", "1"},
			} {
				code, out, errs := start(t, append(append(args, filepath.Join(bin, prog.name)), prog.args...)...).wait()
				sum, ok := prog.sum(out, args[1])
				if code != 0 || !ok {
					t.Fatalf("%v: exit status %d, output %q; stderr:\n%s", args, code, out, errs)
				}
				if want == "" {
					want = sum
				} else if sum != want {
					t.Errorf("%v: checksum %s, want %s (as with -np 1)", args, sum, want)
				}
			}
		})
	}
}

// heatChecksum finds examples/heat's closing line.
func heatChecksum(out []string, _ string) (string, bool) {
	for _, l := range out {
		if sum, ok := strings.CutPrefix(l, "checksum: "); ok {
			return sum, true
		}
	}
	return "", false
}

func TestTagOutput(t *testing.T) {
	j := start(t, "-np", "2", "--host", "n1,n2", "--tag-output", rankprog(), "-stderr", "-partial")
	code, out, errs := j.wait()
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errs)
	}
	tag := regexp.MustCompile(`^\[([0-9a-f]{8}),(\d)\]<(stdout|stderr)>:(.*)$`)
	seen := map[string]bool{}
	for _, l := range append(out, strings.Split(strings.TrimSpace(errs), "\n")...) {
		m := tag.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("untagged line %q", l)
			continue
		}
		seen[m[2]+m[3]+":"+m[4]] = true
	}
	for _, want := range []string{
		"0stdout:rank 0 of 2 on n1: modex saw n1,n2", "1stdout:rank 1 of 2 on n2: modex saw n1,n2",
		"0stderr:rank 0 says hello on stderr", "1stderr:rank 1 says hello on stderr",
		"0stdout:rank 0 no newline", "1stdout:rank 1 no newline",
	} {
		if !seen[want] {
			t.Errorf("missing tagged line %q; got %v", want, seen)
		}
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("E2E_FROM_HERE", "here")
	code, out, errs := start(t, "-np", "2", "--host", "n1,n2", "-x", "E2E_SET=v=1", "-x", "E2E_FROM_HERE",
		"--mca", "plm_base_kill_grace", "3s", "-mca", "errmgr_base_verbose", "0", "-am", "ft-enable-cr",
		rankprog(), "-env", "E2E_SET,E2E_FROM_HERE,GOMPI_MCA_plm_base_kill_grace,GOMPI_MCA_ft_cr_enabled,GOMPI_JOB_SECRET,GOMPI_JOB,GOMPI_NODE_DIR").wait()
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errs)
	}
	text := strings.Join(out, "\n")
	for _, want := range []string{
		"rank 0 env E2E_SET=v=1", "rank 1 env E2E_FROM_HERE=here",
		"rank 1 env GOMPI_MCA_plm_base_kill_grace=3s",
		"rank 0 env GOMPI_MCA_ft_cr_enabled=1", // from the AMCA set
		"rank 0 env GOMPI_JOB_SECRET=\n",       // the rank client removed it
	} {
		if !strings.Contains(text+"\n", want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if !regexp.MustCompile(`rank 1 env GOMPI_JOB=[0-9a-f]{8}\n`).MatchString(text + "\n") {
		t.Errorf("no job id in the ranks' environment:\n%s", text)
	}
	if !regexp.MustCompile(`rank 1 env GOMPI_NODE_DIR=/\S+/[0-9a-f]{8}/n2\n`).MatchString(text + "\n") {
		t.Errorf("no node directory in the ranks' environment:\n%s", text)
	}
}

// A program that never connects (like hostname) runs fine.
func TestPlainProgram(t *testing.T) {
	code, out, errs := start(t, "-np", "2", "--host", "n1,n2", rankprog(), "-no-init").wait()
	if code != 0 || len(out) != 2 || !strings.HasPrefix(out[0], "plain program, rank env ") {
		t.Fatalf("exit status %d, output %q; stderr:\n%s", code, out, errs)
	}
}

func TestFailures(t *testing.T) {
	hosts := hostfile(t, twoNodes)
	bad := hostfile(t, "n1 slots=2\nn2 slots=two\n")
	plain := filepath.Join(t.TempDir(), "notexec")
	os.WriteFile(plain, []byte("x"), 0o644)
	tests := []struct {
		name string
		args []string
		code int
		msg  string // in stderr
	}{
		{"rank exits non-zero", []string{"-np", "4", "--hostfile", hosts, rankprog(), "-exit-rank", "3", "-exit-code", "7"},
			7, "gompirun: job aborted: rank 3 on node n2 exited with status 7\n"},
		{"rank does not finalize", []string{"-np", "2", "--host", "n1,n2", rankprog(), "-no-finalize"},
			1, "exited with status 0: it connected to the runtime but ended without finalizing"},
		{"rank aborts", []string{"-np", "2", "--host", "n1,n2", rankprog(), "-abort-rank", "1", "-exit-code", "5"},
			5, "gompirun: job aborted: rank 1 on node n2 called abort with status 5: rank 1 gives up\n"},
		{"program not found", []string{"-np", "2", "./no-such-program"},
			1, "gompirun: program " + root + "/no-such-program not found"},
		{"program not on path", []string{"-np", "2", "no-such-program-e2e"},
			1, `program "no-such-program-e2e" not found on $PATH`},
		{"program not executable", []string{"-np", "1", plain},
			1, "is not executable: chmod +x it"},
		{"too many ranks", []string{"-np", "5", "--hostfile", hosts, rankprog()},
			1, "5 ranks asked for (-np 5) but the nodes have 4 slots (n1:2, n2:2)"},
		{"bad hostfile", []string{"-np", "2", "--hostfile", bad, rankprog()},
			1, bad + `:2: "n2 slots=two": slots: "two" is not a count`},
		{"missing hostfile", []string{"--hostfile", "/nonexistent/hosts", rankprog()},
			1, "no such file"},
		{"unknown parameter", []string{"--mca", "plm_base_sesion_dir", "/x", rankprog()},
			1, "did you mean plm_base_session_dir?"},
		{"unknown plm", []string{"--mca", "plm", "rsh", rankprog()},
			1, `unknown component "rsh"`},
		{"bad map-by", []string{"--map-by", "core", rankprog()}, 2, `--map-by "core": want slot or node`},
		{"no program", []string{"-np", "2"}, 2, "requires at least 1 arg"},
		{"-x unset", []string{"-x", "E2E_SURELY_UNSET", rankprog()}, 2, "E2E_SURELY_UNSET is not set here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := start(t, tt.args...)
			code, _, errs := j.wait()
			if code != tt.code || !strings.Contains(errs, tt.msg) {
				t.Errorf("exit status %d, stderr:\n%s\nwant status %d and %q", code, errs, tt.code, tt.msg)
			}
			noSurvivors(t, "after "+tt.name, func() []int { return marked(j.mark) })
		})
	}
}

func TestRankKilled(t *testing.T) {
	j := start(t, "-np", "4", "--hostfile", hostfile(t, twoNodes), rankprog(), "-sleep")
	pids := j.waitReady(4)
	if err := syscall.Kill(pids[2], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	code, _, errs := j.wait()
	if code != 128+9 || !strings.Contains(errs, "gompirun: job aborted: rank 2 on node n2 was killed by signal 9 (killed)\n") {
		t.Errorf("exit status %d, stderr:\n%s\nwant 137 and a message naming rank 2, node n2 and the signal", code, errs)
	}
	noSurvivors(t, "after a rank was killed", func() []int { return marked(j.mark) })
}

func TestInterrupt(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			j := start(t, "-np", "4", "--hostfile", hostfile(t, twoNodes), rankprog(), "-sleep")
			j.waitReady(4)
			j.signal(sig)
			code, _, errs := j.wait()
			if code != 128+int(sig) || !strings.Contains(errs, fmt.Sprintf("gompirun: caught signal %d (%v); forwarding it to the job's ranks", int(sig), sig)) {
				t.Errorf("exit status %d, stderr:\n%s\nwant %d and a message naming the signal", code, errs, 128+int(sig))
			}
			if strings.Contains(errs, "job aborted") {
				t.Errorf("ranks ended by the forwarded signal were reported as failures:\n%s", errs)
			}
			noSurvivors(t, "after "+sig.String(), func() []int { return marked(j.mark) })
		})
	}
}

// A rank that ignores SIGTERM is killed after the kill grace.
func TestInterruptStubbornRank(t *testing.T) {
	j := start(t, "-np", "2", "--host", "n1,n2", "--mca", "plm_base_kill_grace", "1s",
		"sh", "-c", `trap "" TERM INT; echo "ready rank=$GOMPI_RANK pid=$$"; while :; do sleep 1; done`)
	j.waitReady(2)
	j.signal(syscall.SIGTERM)
	if code, _, errs := j.wait(); code != 143 {
		t.Errorf("exit status %d, stderr:\n%s\nwant 143", code, errs)
	}
	noSurvivors(t, "after SIGTERM to a job ignoring it", func() []int { return marked(j.mark) })
}

func TestGompirunKilled(t *testing.T) {
	sessions := t.TempDir()
	j := start(t, "-np", "4", "--hostfile", hostfile(t, twoNodes), "--mca", "plm_base_session_dir", sessions, rankprog(), "-sleep")
	j.waitReady(4)
	if n := len(marked(j.mark)); n != 1+2+4 {
		t.Fatalf("%d processes carry the job's mark, want gompirun, 2 daemons and 4 ranks", n)
	}
	j.signal(syscall.SIGKILL)
	if code, _, _ := j.wait(); code != 137 {
		t.Fatalf("gompirun status %d after SIGKILL", code)
	}
	noSurvivors(t, "after SIGKILL to gompirun", func() []int { return marked(j.mark) })
	if left, _ := os.ReadDir(sessions); len(left) != 0 {
		t.Errorf("node directories left behind: %v", left)
	}
}

func TestDaemonKilled(t *testing.T) {
	j := start(t, "-np", "4", "--hostfile", hostfile(t, twoNodes), rankprog(), "-sleep")
	j.waitReady(4)
	st := ps(t, "--json", fmt.Sprint(j.cmd.Process.Pid))
	var pid int
	for _, d := range st[0].Daemons {
		if d.Node == "n2" {
			pid = d.PID
		}
	}
	if pid == 0 {
		t.Fatalf("gompi-ps shows no daemon for n2: %+v", st)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	code, _, errs := j.wait()
	// The message says how the daemon died when its exit is seen within
	// a moment of its stream breaking (always, unless the machine is
	// starved), else that its connection broke.
	lost := regexp.MustCompile(`gompirun: job aborted: node n2 was lost: (gompid \(pid ` + fmt.Sprint(pid) + `\) for node n2 was killed by signal 9 \(killed\)|its daemon's connection to gompirun broke)\n`)
	if code != 1 || !lost.MatchString(errs) {
		t.Errorf("exit status %d, stderr:\n%s\nwant 1 and a message naming the lost node", code, errs)
	}
	noSurvivors(t, "after a daemon was killed", func() []int { return marked(j.mark) })
}

// A daemon that stops answering (here: stopped) is declared lost after
// the heartbeat timeout.
func TestHeartbeatTimeout(t *testing.T) {
	j := start(t, "-np", "2", "--host", "n1,n2", "--mca", "errmgr_base_heartbeat_timeout", "2s",
		"--mca", "errmgr_base_heartbeat_period", "200ms", rankprog(), "-sleep")
	j.waitReady(2)
	st := ps(t, "--json", fmt.Sprint(j.cmd.Process.Pid))
	pid := st[0].Daemons[1].PID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	code, _, errs := j.wait()
	if code != 1 || !regexp.MustCompile(`gompirun: job aborted: node n2 was lost: no heartbeat for \S+ \(errmgr_base_heartbeat_timeout = 2s\)`).MatchString(errs) {
		t.Errorf("exit status %d, stderr:\n%s\nwant 1 and a heartbeat message", code, errs)
	}
	noSurvivors(t, "after a silent daemon", func() []int { return marked(j.mark) })
}

func TestHelp(t *testing.T) {
	for _, b := range []string{"gompirun", "gompid", "gompi-ps"} {
		out, err := exec.Command(filepath.Join(bin, b), "--help").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Usage:") {
			t.Errorf("%s --help: %v\n%s", b, err, out)
		}
	}
	out, err := exec.Command(filepath.Join(bin, "gompid"), "--job", "x1", "--node", "n", "--hnp", "unix:/nonexistent").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "started by gompirun, not by hand") {
		t.Errorf("gompid by hand: %v\n%s", err, out)
	}
}

type psJob struct {
	Job     string   `json:"job"`
	PID     int      `json:"pid"`
	NP      int      `json:"np"`
	Nodes   []string `json:"nodes"`
	State   string   `json:"state"`
	Error   string   `json:"error"`
	Daemons []struct {
		Node  string `json:"node"`
		PID   int    `json:"pid"`
		State string `json:"state"`
	} `json:"daemons"`
	Ranks []struct {
		Rank  int    `json:"rank"`
		Node  string `json:"node"`
		PID   int    `json:"pid"`
		State string `json:"state"`
	} `json:"ranks"`
}

// ps runs gompi-ps with args and decodes its JSON.
func ps(t *testing.T, args ...string) []psJob {
	t.Helper()
	out, err := exec.Command(filepath.Join(bin, "gompi-ps"), args...).Output()
	if err != nil {
		t.Fatalf("gompi-ps %v: %v", args, err)
	}
	var js []psJob
	if err := json.Unmarshal(out, &js); err != nil {
		t.Fatalf("gompi-ps %v: %v\n%s", args, err, out)
	}
	return js
}
