package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"gompi/components/snapc/full"
	"gompi/frameworks/sstore/snapshot"
	"gompi/rte/jobs"
	"gompi/tools/checkpoint"
	"gompi/tools/restart"
)

// The checkpoint/restart tests run crprog (testdata/rte/crprog), which
// implements the application side of a checkpoint with the rank client.

func crprog() string { return filepath.Join(bin, "crprog") }

// crJob starts a 4-rank job over two simulated nodes with C/R on, its
// snapshots in dir, and waits for its ranks' coordinators.
func crJob(t *testing.T, dir string, args ...string) *job {
	t.Helper()
	all := append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes), "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", dir}, args...)
	if !slices.Contains(args, crprog()) {
		all = append(all, crprog())
	}
	j := start(t, all...)
	j.waitReady(4)
	return j
}

// tool runs a gompi tool and returns its status, stdout and stderr.
func tool(t *testing.T, name string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, name), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if strings.Contains(errb.String(), "WARNING: DATA RACE") {
		t.Errorf("the race detector found a race in %s:\n%s", name, errb.String())
	}
	return code, out.String(), errb.String()
}

// refOf returns the reference a job checkpoints into.
func refOf(t *testing.T, j *job, dir string) snapshot.Ref {
	t.Helper()
	r, err := jobs.Read(j.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return snapshot.Ref{Dir: dir, Name: snapshot.RefName(r.Job)}
}

// info is gompi-restart -i --json of ref.
func info(t *testing.T, ref snapshot.Ref) restart.Info {
	t.Helper()
	code, out, errs := tool(t, "gompi-restart", "-i", "--json", ref.String())
	if code != 0 {
		t.Fatalf("gompi-restart -i: status %d: %s", code, errs)
	}
	var in restart.Info
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		t.Fatalf("gompi-restart -i --json: %v\n%s", err, out)
	}
	return in
}

// committed lists the committed and the uncommitted sequences of ref.
func committed(t *testing.T, ref snapshot.Ref) (yes, no []int) {
	t.Helper()
	for _, s := range info(t, ref).Seqs {
		if s.Committed {
			yes = append(yes, s.Seq)
		} else {
			no = append(no, s.Seq)
		}
	}
	return yes, no
}

func pidArg(j *job) string { return fmt.Sprint(j.cmd.Process.Pid) }

// TestCheckpointRestart: a 4-rank job on two nodes is checkpointed twice,
// restarted on one node over another transport, and goes on checkpointing
// into the same reference.
func TestCheckpointRestart(t *testing.T) {
	dir := t.TempDir()
	j := crJob(t, dir)
	ref := refOf(t, j, dir)

	code, out, errs := tool(t, "gompi-checkpoint", pidArg(j))
	if code != 0 || out != "Snapshot Ref.:   0 "+ref.Name+"\n" {
		t.Fatalf("gompi-checkpoint: status %d\n%s%s", code, out, errs)
	}
	code, out, errs = tool(t, "gompi-checkpoint", "--status", pidArg(j))
	if code != 0 {
		t.Fatalf("gompi-checkpoint --status: status %d\n%s%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	status := regexp.MustCompile(`^\[ +\d+\.\d\d / +\d+\.\d\d\] +(.+) - (.+)$`)
	var phases []string
	for _, l := range lines[:len(lines)-1] {
		m := status.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a status line: %q", l)
		}
		phases = append(phases, m[1])
	}
	slices.Sort(phases[3:5])
	if want := []string{"Requested", "Query", "Target", "Local Write (n1)", "Local Write (n2)", "Sync", "Commit"}; !reflect.DeepEqual(phases, want) {
		t.Errorf("phases %q, want %q:\n%s", phases, want, out)
	}
	if last := lines[len(lines)-1]; last != "Snapshot Ref.:   1 "+ref.Name {
		t.Errorf("last line %q", last)
	}
	code, out, _ = tool(t, "gompi-checkpoint", "--list", pidArg(j))
	if code != 0 || out != "Snapshot Ref.: "+ref.Name+"\t[0,1]\n" {
		t.Errorf("--list: status %d: %q", code, out)
	}
	code, out, _ = tool(t, "gompi-checkpoint", "-l", "--json", pidArg(j))
	var l checkpoint.Listing
	if err := json.Unmarshal([]byte(out), &l); code != 0 || err != nil || !reflect.DeepEqual(l.Committed, []int{0, 1}) || l.Dir != dir {
		t.Errorf("--list --json: status %d %v: %s", code, err, out)
	}
	j.signal(syscall.SIGINT)
	if code, _, errs := j.wait(); code != 130 {
		t.Fatalf("job: status %d\n%s", code, errs)
	}
	in := info(t, ref)
	if in.Ranks != 4 || in.Restart != 1 || len(in.Seqs) != 2 || in.Launch.Program != crprog() || !slices.Contains(in.AMCA, "ft-enable-cr") {
		t.Errorf("gompi-restart -i: %+v", in)
	}
	for _, p := range in.Seqs[1].Procs {
		if want := []string{"n1", "n1", "n2", "n2"}[p.Rank]; p.Node != want || p.CRS != "self" || len(p.Files) != 2 {
			t.Errorf("rank %d of seq 1: %+v", p.Rank, p)
		}
	}

	// Damaged copies are refused, naming the file and the previous sequence.
	for _, d := range []struct {
		name   string
		damage func(r snapshot.Ref)
		want   string
	}{
		{"truncate", func(r snapshot.Ref) { os.Truncate(filepath.Join(r.LocalPath(1, 2), "app.state"), 3) }, "gompi_snapshot_2.ckpt/app.state is 3 bytes"},
		{"flip", func(r snapshot.Ref) {
			p := filepath.Join(r.LocalPath(1, 0), "library.state")
			b, _ := os.ReadFile(p)
			b[0] ^= 0x40
			os.WriteFile(p, b, 0o644)
		}, "gompi_snapshot_0.ckpt/library.state has checksum"},
		{"delete", func(r snapshot.Ref) { os.Remove(filepath.Join(r.LocalPath(1, 3), "app.state")) }, "gompi_snapshot_3.ckpt/app.state: no such file"},
		{"no meta", func(r snapshot.Ref) { os.Remove(filepath.Join(r.LocalPath(1, 1), snapshot.LocalMetaFile)) }, "gompi_snapshot_1.ckpt/snapshot_meta: no such file"},
	} {
		cp := snapshot.Ref{Dir: t.TempDir(), Name: ref.Name}
		if out, err := exec.Command("cp", "-a", ref.Path(), cp.Dir).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		d.damage(cp)
		code, out, errs := tool(t, "gompi-restart", cp.Path())
		if code != 1 || out != "" || !strings.Contains(errs, d.want) || !strings.Contains(errs, "restart with -s 0") {
			t.Errorf("%s: status %d, stdout %q, stderr:\n%s\nwant %q and a suggestion of -s 0", d.name, code, out, errs, d.want)
		}
	}

	// Restart on one node, over tcp only.
	r := startProg(t, "gompi-restart", "--hostfile", hostfile(t, "n1 slots=4\n"), "--mca", "btl", "tcp", ref.Path())
	r.waitReady(4)
	restarted := regexp.MustCompile(`^restarted rank=(\d) node=n1 ref=` + regexp.QuoteMeta(ref.Name) + ` seq=1 count=\d+ lib="library of rank (\d) at \d+" btl=tcp$`)
	seen := map[string]bool{}
	for _, l := range r.output() {
		if m := restarted.FindStringSubmatch(l); m != nil && m[1] == m[2] {
			seen[m[1]] = true
		}
	}
	if len(seen) != 4 {
		t.Errorf("ranks restarted: %v; output:\n%s", seen, strings.Join(r.output(), "\n"))
	}
	code, out, errs = tool(t, "gompi-checkpoint", "--json", pidArg(r))
	var o checkpoint.Outcome
	if err := json.Unmarshal([]byte(out), &o); code != 0 || err != nil || o.Seq != 2 || o.Ref != ref.Name || o.Dir != dir || len(o.Events) != 6 { // one node: one local write
		t.Errorf("checkpoint of the restarted job: status %d %v\n%s%s\n%+v", code, err, out, errs, o)
	}
	code, out, errs = tool(t, "gompi-checkpoint", "--term", pidArg(r))
	if code != 0 || out != "Snapshot Ref.:   3 "+ref.Name+"\n" {
		t.Errorf("checkpoint-and-terminate: status %d\n%s%s", code, out, errs)
	}
	if code, _, errs := r.wait(); code != 0 {
		t.Errorf("restarted job after --term: status %d\n%s", code, errs)
	}
	noSurvivors(t, "after --term", func() []int { return marked(r.mark) })
	if yes, no := committed(t, ref); !reflect.DeepEqual(yes, []int{0, 1, 2, 3}) || len(no) != 0 {
		t.Errorf("committed %v, not %v", yes, no)
	}
}

// TestAppCheckpoint: every rank asks for a checkpoint at the same safe
// point (cr.Checkpoint, over the rank client's AppLink); the requests are
// merged into one sequence.
func TestAppCheckpoint(t *testing.T) {
	dir := t.TempDir()
	j := crJob(t, dir, crprog(), "-checkpoint-at", "30")
	ref := refOf(t, j, dir)
	j.waitFor("4 ranks checkpointed", func(lines []string, _ string) bool {
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(l, "checkpointed rank=") && strings.HasSuffix(l, " seq=0 ref="+ref.Name) {
				n++
			}
		}
		return n == 4
	})
	for _, l := range j.output() {
		if strings.HasPrefix(l, "saved ") && !strings.HasSuffix(l, " seq=0 count=31") {
			t.Errorf("saved elsewhere than at the ranks' safe point 31: %q", l)
		}
	}
	code, out, errs := tool(t, "gompi-checkpoint", pidArg(j))
	if code != 0 || out != "Snapshot Ref.:   1 "+ref.Name+"\n" {
		t.Errorf("tool checkpoint after the ranks' own: status %d\n%s%s", code, out, errs)
	}
	j.signal(syscall.SIGINT)
	j.wait()
	if yes, no := committed(t, ref); !reflect.DeepEqual(yes, []int{0, 1}) || len(no) != 0 {
		t.Errorf("committed %v, uncommitted %v: want the ranks' requests merged into seq 0", yes, no)
	}
}

// TestCheckpointRefused: a rank that cannot be checkpointed fails the
// request for all, before anything is written, and the job runs on.
func TestCheckpointRefused(t *testing.T) {
	dir := t.TempDir()
	j := crJob(t, dir, crprog(), "-refuse-rank", "2")
	code, out, errs := tool(t, "gompi-checkpoint", pidArg(j))
	want := "rank 2 on node n2 cannot be checkpointed: rank 2 is not checkpointable (test: -refuse-rank); no rank was affected"
	if code != 1 || out != "" || !strings.Contains(errs, want) {
		t.Errorf("status %d, stdout %q, stderr:\n%s\nwant %q", code, out, errs, want)
	}
	if _, err := os.Stat(refOf(t, j, dir).Path()); !os.IsNotExist(err) {
		t.Errorf("a refused checkpoint created the reference: %v", err)
	}
	for _, l := range j.output() {
		if strings.HasPrefix(l, "saved ") {
			t.Errorf("a rank saved: %q", l)
		}
	}
	if js := ps(t, "--json", pidArg(j)); len(js) != 1 || js[0].State != "running" {
		t.Errorf("job after the refusal: %+v", js)
	}
	j.signal(syscall.SIGINT)
	j.wait()

	// --stop: crs=self (as crprog answers) cannot stop a process.
	k := crJob(t, t.TempDir())
	code, _, errs = tool(t, "gompi-checkpoint", "--stop", pidArg(k))
	if code != 1 || !strings.Contains(errs, "crs/self cannot stop a process after its checkpoint") {
		t.Errorf("--stop: status %d: %s", code, errs)
	}
	code, out, errs = tool(t, "gompi-checkpoint", pidArg(k))
	if code != 0 || !strings.HasPrefix(out, "Snapshot Ref.:   0 ") {
		t.Errorf("checkpoint after the refused --stop: status %d\n%s%s", code, out, errs)
	}
	k.signal(syscall.SIGINT)
	k.wait()

	// A job without C/R.
	n := start(t, "-np", "2", "--host", "n1,n2", rankprog(), "-sleep")
	n.waitReady(2)
	for _, args := range [][]string{{pidArg(n)}, {"--list", pidArg(n)}} {
		code, _, errs := tool(t, "gompi-checkpoint", args...)
		if code != 1 || !strings.Contains(errs, "checkpoint/restart is not enabled for this job; run it with -am ft-enable-cr") {
			t.Errorf("%v on a job without C/R: status %d: %s", args, code, errs)
		}
	}
	n.signal(syscall.SIGINT)
	n.wait()
}

// TestCheckpointCrash kills a rank, a daemon, gompirun or gompi-checkpoint
// while the second checkpoint of a job is held at each point of its state
// machine (snapc_full_test_pause_at). The first sequence stays intact and
// restartable; the second is recorded only once past the query, and
// committed only if the kill came after its commit mark, or if only
// gompi-checkpoint died (gompirun then finishes the checkpoint by itself
// and the job runs on). The matrix runs with crs=self (crprog) at every
// point, and with crs=criu (plainheat, no C/R code: criuCrashCases) at a
// subset of the points a criu checkpoint passes (it has no query and no
// rank writing its own snapshot).
func TestCheckpointCrash(t *testing.T) {
	hnpPoints := []string{full.PauseQuery, full.PauseSeq, full.PauseLocal, full.PauseCommit, full.PauseCommitted}
	var cases []crashCase
	for _, v := range []string{"rank", "daemon", "gompirun"} {
		for _, p := range full.PausePoints {
			cases = append(cases, crashCase{point: p, victim: v})
		}
	}
	for _, p := range hnpPoints {
		cases = append(cases, crashCase{point: p, victim: "tool"})
	}
	cases = append(cases, criuCrashCases...)
	for _, c := range cases {
		name := c.victim + "-at-" + c.point
		if c.criu {
			name = "criu/" + name
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel() // jobs of their own; mostly waiting, so -parallel (the CPU count) of them share the machine well
			checkpointCrash(t, c)
		})
	}
}

// crashCase is one case of the crash matrix: victim killed while the
// second checkpoint is held at point, in a crs=criu job when criu.
type crashCase struct {
	point, victim string
	criu          bool
}

// criuCrashCases are the crash matrix's crs=criu cases. A criu checkpoint
// passes seq (recorded, nothing dumped), local (every rank dumped and let
// go on), sync (a gompid storing its dumps), commit (stored, no commit
// mark) and committed. Every victim is killed at local, where the dumps
// are new; then each point has one victim more, the one whose loss there
// differs most: a rank before the dump (seq), a daemon amid its own step
// (sync), gompirun before the commit mark (commit), the tool after it
// (committed): 9 cases, not the 19 of the full product. Each starts a
// job, dumps it once or twice, kills, and restores four ranks (CRIU runs
// one at a time per host): 19-47 s a case under -race on 2 cores loaded
// by other jobs (load 10), two at a time, about 2.5 minutes added to the
// matrix; the full product would be twice that.
var criuCrashCases = []crashCase{
	{point: full.PauseLocal, victim: "rank", criu: true},
	{point: full.PauseLocal, victim: "daemon", criu: true},
	{point: full.PauseLocal, victim: "gompirun", criu: true},
	{point: full.PauseLocal, victim: "tool", criu: true},
	{point: full.PauseSeq, victim: "rank", criu: true},
	{point: full.PauseSync, victim: "daemon", criu: true},
	{point: full.PauseCommit, victim: "gompirun", criu: true},
	{point: full.PauseCommitted, victim: "tool", criu: true},
	{point: full.PauseCommitted, victim: "rank", criu: true},
}

// checkpointCrash runs one case of the crash matrix.
func checkpointCrash(t *testing.T, c crashCase) {
	dir := t.TempDir()
	j := crashJob(t, c, dir)
	ref := refOf(t, j, dir)
	if code, out, errs := tool(t, "gompi-checkpoint", pidArg(j)); code != 0 || out != "Snapshot Ref.:   0 "+ref.Name+"\n" {
		t.Fatalf("first checkpoint: status %d\n%s%s", code, out, errs)
	}
	ck := exec.Command(filepath.Join(bin, "gompi-checkpoint"), "--status", pidArg(j))
	var ckOut bytes.Buffer
	ck.Stdout, ck.Stderr = &ckOut, &ckOut
	if err := ck.Start(); err != nil {
		t.Fatal(err)
	}
	ckDone := make(chan struct{})
	go func() { ck.Wait(); close(ckDone) }()
	t.Cleanup(func() { ck.Process.Kill(); <-ckDone })

	msg := full.PauseMessage(c.point, 1)
	if c.point == full.PauseWrite {
		j.waitFor("4 ranks paused writing", func(lines []string, _ string) bool {
			n := 0
			for _, l := range lines {
				if l == msg {
					n++
				}
			}
			return n == 4
		})
	} else {
		j.waitFor("the pause at "+c.point, func(_ []string, stderr string) bool { return strings.Contains(stderr, msg) })
	}

	switch c.victim {
	case "rank":
		syscall.Kill(crashRankPID(t, j, c), syscall.SIGKILL)
	case "daemon":
		var pid int
		for _, js := range ps(t, "--json", pidArg(j)) {
			for _, d := range js.Daemons {
				if d.Node == "n2" {
					pid = d.PID
				}
			}
		}
		if pid == 0 {
			t.Fatal("no daemon of n2 in gompi-ps")
		}
		syscall.Kill(pid, syscall.SIGKILL)
	case "gompirun":
		j.cmd.Process.Kill()
	case "tool":
		ck.Process.Kill()
		<-ckDone
		// The checkpoint goes on without its tool: a second request
		// is answered once the first is over.
		code, out, errs := tool(t, "gompi-checkpoint", pidArg(j))
		if code != 0 || out != "Snapshot Ref.:   2 "+ref.Name+"\n" {
			t.Errorf("checkpoint after the tool was killed: status %d\n%s%s", code, out, errs)
		}
		j.signal(syscall.SIGINT)
	}
	code, _, errs := j.wait()
	if code == 0 {
		t.Errorf("job ended with status 0 after its %s was killed", c.victim)
	}
	if c.victim != "gompirun" && c.victim != "tool" && !strings.Contains(errs, "gompirun: job aborted") {
		t.Errorf("no abort report:\n%s", errs)
	}
	noSurvivors(t, "after the crash", func() []int { return marked(j.mark) })

	yes, no := committed(t, ref)
	wantYes, wantNo := []int{0}, []int{1}
	switch {
	case c.victim == "tool":
		wantYes, wantNo = []int{0, 1, 2}, nil
	case c.point == full.PauseQuery: // held before its sequence was recorded
		wantNo = nil
	case c.point == full.PauseCommitted:
		wantYes, wantNo = []int{0, 1}, nil
	}
	if !reflect.DeepEqual(yes, wantYes) || !reflect.DeepEqual(no, wantNo) {
		t.Errorf("committed %v, uncommitted %v; want %v and %v", yes, no, wantYes, wantNo)
	}
	// The newest committed sequence restarts.
	crashRestart(t, c, ref, wantYes[len(wantYes)-1])
}

// crashJob starts the crash matrix's job, its second checkpoint held at
// c.point: crprog (crs=self), or plainheat with crs=criu, slowed so that
// it is still computing when its gompirun is killed or signalled.
func crashJob(t *testing.T, c crashCase, dir string) *job {
	t.Helper()
	pause := []string{"--mca", full.ParamPauseAt, c.point + ":1"}
	if !c.criu {
		return crJob(t, dir, pause...)
	}
	if os.Geteuid() != 0 {
		t.Skip("CRIU and the rank init's PID namespace need root")
	}
	args := append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes), "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", dir}, append(criuParams(), pause...)...)
	j := start(t, append(args, plainheat(), "-size", "96", "-steps", "100000", "-every", "20", "-sleep", "20ms")...)
	j.waitFor("plainheat's first progress line", func(lines []string, _ string) bool {
		return len(lines) > 0 && strings.HasPrefix(lines[0], "step ")
	})
	return j
}

// crashRankPID is the pid of rank 3 of j: crprog prints it; under
// crs=criu gompi-ps gives its init's (connected or not: the ranks may be
// reconnecting after the dump).
func crashRankPID(t *testing.T, j *job, c crashCase) int {
	t.Helper()
	if !c.criu {
		return j.waitReady(4)[3]
	}
	var pid int
	j.waitFor("rank 3's pid", func([]string, string) bool {
		if js := psNow(j); js != nil {
			for _, r := range js.Ranks {
				if r.Rank == 3 {
					pid = r.PID
				}
			}
		}
		return pid > 0
	})
	return pid
}

// crashRestart restarts ref, which must start from sequence seq, and
// ends the restarted job once its 4 ranks run: crprog says where it
// restarted from; a criu job's restored ranks reconnect (gompi-ps), and
// gompi-restart --verbose names the sequence.
func crashRestart(t *testing.T, c crashCase, ref snapshot.Ref, seq int) {
	t.Helper()
	if !c.criu {
		r := startProg(t, "gompi-restart", "--hostfile", hostfile(t, twoNodes), ref.Path())
		r.waitReady(4)
		want := fmt.Sprintf("ref=%s seq=%d ", ref.Name, seq)
		n := 0
		for _, l := range r.output() {
			if strings.HasPrefix(l, "restarted ") && strings.Contains(l, want) {
				n++
			}
		}
		if n != 4 {
			t.Errorf("%d ranks restarted from seq %d:\n%s", n, seq, strings.Join(r.output(), "\n"))
		}
		r.signal(syscall.SIGINT)
		r.wait()
		return
	}
	r := startProg(t, "gompi-restart", append(criuParams(), "--verbose", "--hostfile", hostfile(t, twoNodes), ref.Path())...)
	r.waitErr(fmt.Sprintf("gompi-restart: restarting %s from sequence %d:", ref.Name, seq))
	r.waitConnected()
	r.signal(syscall.SIGINT)
	if code, _, errs := r.wait(); code != 130 {
		t.Errorf("restored job after SIGINT: status %d, want 130\n%s", code, errs)
	}
	noSurvivors(t, "after the restored job", func() []int { return marked(r.mark) })
}

// TestMPICheckpointRestart runs programs of packages mpi and cr (crs=self,
// crcp=bkmrk) under the runtime: checkpointed on two nodes, restarted on
// one over tcp, they end as if never stopped.
func TestMPICheckpointRestart(t *testing.T) {
	one := hostfile(t, "n1 slots=4\n")
	t.Run("heat", func(t *testing.T) {
		heat := []string{filepath.Join(bin, "heat"), "-size", "48", "-steps", "400"}
		code, out, errs := start(t, append([]string{"-np", "1"}, heat...)...).wait()
		want, ok := heatChecksum(out, "")
		if code != 0 || !ok {
			t.Fatalf("heat -np 1: status %d %q\n%s", code, out, errs)
		}
		dir := t.TempDir()
		j := start(t, append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes), "-am", "ft-enable-cr",
			"--mca", "snapc_base_global_snapshot_dir", dir}, append(heat, "-every", "1", "-sleep", "5ms")...)...)
		j.waitFor("heat's first step", func(lines []string, _ string) bool {
			return slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "step 1: residual") })
		})
		ref := refOf(t, j, dir)
		if code, out, errs := tool(t, "gompi-checkpoint", pidArg(j)); code != 0 || out != "Snapshot Ref.:   0 "+ref.Name+"\n" {
			t.Fatalf("checkpoint: status %d\n%s%s", code, out, errs)
		}
		if code, out, errs := tool(t, "gompi-checkpoint", "--term", pidArg(j)); code != 0 || out != "Snapshot Ref.:   1 "+ref.Name+"\n" {
			t.Fatalf("checkpoint --term: status %d\n%s%s", code, out, errs)
		}
		if code, out, errs := j.wait(); code != 0 || slices.ContainsFunc(out, func(l string) bool { return strings.HasPrefix(l, "checksum") }) {
			t.Fatalf("job after --term: status %d, output %q\n%s", code, out, errs)
		}
		r := startProg(t, "gompi-restart", "--hostfile", one, "--mca", "btl", "tcp", ref.Path())
		code, out, errs = r.wait()
		if got, _ := heatChecksum(out, ""); code != 0 || got != want {
			t.Errorf("restarted heat: status %d, checksum %q, want %q\n%s", code, got, want, errs)
		}
	})
	t.Run("collective", func(t *testing.T) {
		ckpt := []string{filepath.Join(bin, "ckpt"), "-steps", "30", "-at", "5,15"}
		dir := t.TempDir()
		j := start(t, append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes), "-am", "ft-enable-cr",
			"--mca", "snapc_base_global_snapshot_dir", dir}, ckpt...)...)
		code, out, errs := j.wait()
		sums := map[string]bool{}
		var ref string
		for _, l := range out {
			var r, steps int
			var sum string
			if _, err := fmt.Sscanf(l, "done rank=%d steps=%d sum=%s", &r, &steps, &sum); err == nil {
				sums[fmt.Sprint(r, sum)] = true
			}
			var step, seq int
			var name, restarted string
			if _, err := fmt.Sscanf(l, "checkpoint rank=%d step=%d ref=%s seq=%d restart=%s", &r, &step, &name, &seq, &restarted); err == nil {
				ref = name
				if seq != map[int]int{5: 0, 15: 1}[step] || restarted != "false" {
					t.Errorf("line %q", l)
				}
			}
		}
		if code != 0 || len(sums) != 4 || ref == "" {
			t.Fatalf("status %d, output:\n%s\n%s", code, strings.Join(out, "\n"), errs)
		}
		// From seq 0 (step 5), on one node over tcp: step 15 checkpoints
		// again, as seq 2 of the same reference, and every sum is the same.
		r := startProg(t, "gompi-restart", "-s", "0", "--hostfile", one, "--mca", "btl", "tcp", filepath.Join(dir, ref))
		code, out, errs = r.wait()
		again := map[string]bool{}
		seq2 := 0
		for _, l := range out {
			var rk, steps int
			var sum string
			if _, err := fmt.Sscanf(l, "done rank=%d steps=%d sum=%s", &rk, &steps, &sum); err == nil {
				again[fmt.Sprint(rk, sum)] = true
			}
			if strings.Contains(l, " step=15 ref="+ref+" seq=2 restart=true") {
				seq2++
			}
		}
		if code != 0 || !reflect.DeepEqual(again, sums) || seq2 != 4 {
			t.Errorf("restart: status %d, sums %v (want %v), %d ranks checkpointed as seq 2; output:\n%s\n%s", code, again, sums, seq2, strings.Join(out, "\n"), errs)
		}
	})
}
