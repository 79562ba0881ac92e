package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"gompi/frameworks/sstore/snapshot"
	"gompi/rte/jobs"
	"gompi/rte/slurmtest"
)

// The Slurm tests run gompirun inside allocations of a private Slurm
// cluster (rte/slurmtest: three nodes n1-n3 on this machine), started by
// the first test that needs it and stopped when the test binary ends.
var slurm struct {
	once    sync.Once
	cluster *slurmtest.Cluster
	err     error
}

// slurmCluster returns the cluster, starting it on first use; the test
// skips (fails in CI) when this machine cannot run one.
func slurmCluster(t *testing.T) *slurmtest.Cluster {
	t.Helper()
	slurmtest.Need(t)
	slurm.once.Do(func() {
		dir, err := os.MkdirTemp(root, "slurm")
		if err != nil {
			slurm.err = err
			return
		}
		slurm.cluster, slurm.err = slurmtest.Start(context.Background(), dir)
	})
	if slurm.err != nil {
		t.Fatal(slurm.err)
	}
	return slurm.cluster
}

// stopSlurm stops the cluster if a test started it (TestMain).
func stopSlurm() {
	if slurm.cluster != nil {
		slurm.cluster.Stop()
	}
}

// slurmEnv is the environment of a command run against the cluster;
// SALLOC_NO_KILL=set and SBATCH_NO_KILL=set make every allocation --no-kill
// and tell gompirun so (which otherwise warns).
func slurmEnv(c *slurmtest.Cluster) []string {
	return append(c.Env(), "SALLOC_NO_KILL=set", "SBATCH_NO_KILL=set")
}

// TestSlurmHeat: heat on six ranks in a three-node allocation (its daemons
// a chain: routed_radix 1), its nodes
// and slots taken from Slurm and its daemons started by srun, computes
// what one rank computes; an -np above the allocation's slots is refused
// with a clear error; an allocation not known to be --no-kill is warned
// about.
func TestSlurmHeat(t *testing.T) {
	c := slurmCluster(t)
	heat := []string{filepath.Join(bin, "heat"), "-size", "48", "-steps", "30"}
	_, one, _ := start(t, append([]string{"-np", "1"}, heat...)...).wait()
	want, ok := heatChecksum(one, "1")
	if !ok {
		t.Fatalf("heat -np 1 printed no checksum: %q", one)
	}
	// The daemons a chain (n1 - n2 - n3): n3 asks gompirun where n2
	// listens and attaches there over TLS.
	j := startPath(t, slurmEnv(c), "salloc", append([]string{"-k", "-N", "3", "-n", "6", filepath.Join(bin, "gompirun"), "-np", "6", "--tag-output",
		"--mca", "routed_radix", "1"}, heat...)...)
	code, out, errs := j.wait()
	if code != 0 {
		t.Fatalf("salloc gompirun -np 6 heat: status %d\n%s", code, errs)
	}
	if strings.Contains(errs, "warning") {
		t.Errorf("gompirun warned in a --no-kill allocation:\n%s", errs)
	}
	var sum string
	for _, l := range out {
		if _, s, ok := strings.Cut(l, "<stdout>:checksum: "); ok {
			sum = s
		}
	}
	if sum != want {
		t.Errorf("heat -np 6 under Slurm: checksum %q, -np 1: %q; output:\n%s", sum, want, strings.Join(out, "\n"))
	}
	noSurvivors(t, "after the job", func() []int { return marked(j.mark) })

	j = startPath(t, slurmEnv(c), "salloc", append([]string{"-k", "-N", "3", "-n", "3", filepath.Join(bin, "gompirun"), "-np", "6"}, heat...)...)
	code, _, errs = j.wait()
	if code == 0 || !regexp.MustCompile(`-np 6, but Slurm job \d+ has 3 slots \(SLURM_TASKS_PER_NODE=1\(x3\) on n\[1-3\]\)`).MatchString(errs) {
		t.Errorf("-np 6 in a 3-slot allocation: status %d, stderr:\n%s\nwant an error naming the slots", code, errs)
	}

	// salloc -k without SALLOC_NO_KILL: the job runs, and gompirun warns
	// once that it cannot tell.
	j = startPath(t, c.Env(), "salloc", append([]string{"-k", "-N", "2", "-n", "2", filepath.Join(bin, "gompirun")}, heat...)...)
	code, _, errs = j.wait()
	if code != 0 || strings.Count(errs, "cannot tell whether Slurm job") != 1 || !strings.Contains(errs, "SALLOC_NO_KILL=set") {
		t.Errorf("an allocation not known to be --no-kill: status %d, stderr:\n%s\nwant one warning", code, errs)
	}
}

// TestSlurmBatch: a batch script (sbatch -k) runs gompirun; sbatch --wait
// returns when the job has ended, and its output file has heat's result
// from six ranks on the allocation's three nodes.
func TestSlurmBatch(t *testing.T) {
	c := slurmCluster(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	body := fmt.Sprintf("#!/bin/sh\nexec %s -np 6 --map-by node %s -size 48 -steps 30\n", filepath.Join(bin, "gompirun"), filepath.Join(bin, "heat"))
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(dir, "out")
	j := startPath(t, slurmEnv(c), "sbatch", "-k", "--wait", "-N", "3", "-n", "6", "-o", outFile, "-D", dir, script)
	if code, out, errs := j.wait(); code != 0 {
		b, _ := os.ReadFile(outFile)
		t.Fatalf("sbatch --wait: status %d\n%s\n%s\njob output:\n%s", code, out, errs, b)
	}
	b, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^heat: 48x48 grid, 30 steps, ranks: 6, .*\nchecksum: [0-9a-f]{16}$`).Match(b) {
		t.Errorf("batch job output:\n%s", b)
	}
	noSurvivors(t, "after the batch job", func() []int { return marked(j.mark) })
}

// TestSlurmCheckpointRestart: a C/R job of six ranks in a three-node
// allocation is checkpointed and terminated by gompi-checkpoint, then
// restarted by gompi-restart in a new allocation of two nodes (overcommitted:
// the test nodes have two CPUs each).
func TestSlurmCheckpointRestart(t *testing.T) {
	c := slurmCluster(t)
	dir := t.TempDir()
	j := startPath(t, slurmEnv(c), "salloc", "-k", "-N", "3", "-n", "6", filepath.Join(bin, "gompirun"), "-np", "6", "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", dir, crprog())
	j.waitReady(6)
	run := gompirunOf(t, j)
	ref := refOfPID(t, run, dir)
	code, out, errs := tool(t, "gompi-checkpoint", "--term", fmt.Sprint(run))
	if code != 0 || out != "Snapshot Ref.:   0 "+ref.Name+"\n" {
		t.Fatalf("gompi-checkpoint --term: status %d\n%s%s", code, out, errs)
	}
	if code, _, errs := j.wait(); code != 0 {
		t.Fatalf("the job after --term: status %d\n%s", code, errs)
	}
	noSurvivors(t, "after --term", func() []int { return marked(j.mark) })

	r := startPath(t, slurmEnv(c), "salloc", "-k", "-O", "-N", "2", "-n", "6", filepath.Join(bin, "gompi-restart"), ref.Path())
	r.waitReady(6)
	restarted := regexp.MustCompile(`^restarted rank=(\d) node=(n[12]) ref=` + regexp.QuoteMeta(ref.Name) + ` seq=0 `)
	nodes := map[string]int{}
	for _, l := range r.output() {
		if m := restarted.FindStringSubmatch(l); m != nil {
			nodes[m[2]]++
		}
	}
	if nodes["n1"]+nodes["n2"] != 6 || nodes["n1"] == 0 || nodes["n2"] == 0 {
		t.Errorf("ranks restarted per node: %v, want six over n1 and n2; output:\n%s", nodes, strings.Join(r.output(), "\n"))
	}
	code, out, errs = tool(t, "gompi-checkpoint", "--term", fmt.Sprint(gompirunOf(t, r)))
	if code != 0 || out != "Snapshot Ref.:   1 "+ref.Name+"\n" {
		t.Errorf("checkpoint-and-terminate of the restarted job: status %d\n%s%s", code, out, errs)
	}
	if code, _, errs := r.wait(); code != 0 {
		t.Errorf("restarted job after --term: status %d\n%s", code, errs)
	}
	noSurvivors(t, "after the restarted job", func() []int { return marked(r.mark) })
	if yes, _ := committed(t, ref); len(yes) != 2 {
		t.Errorf("committed sequences %v, want 0 and 1", yes)
	}
}

// gompirunOf returns the PID of the gompirun (or gompi-restart) that
// salloc runs for j.
func gompirunOf(t *testing.T, j *job) int {
	t.Helper()
	for _, pid := range marked(j.mark) {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if c := strings.TrimSpace(string(comm)); err == nil && (c == "gompirun" || c == "gompi-restart") {
			return pid
		}
	}
	t.Fatalf("no gompirun under %s", j.cmd.Path)
	return 0
}

// refOfPID returns the reference the job of gompirun pid checkpoints into.
func refOfPID(t *testing.T, pid int, dir string) snapshot.Ref {
	t.Helper()
	r, err := jobs.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	return snapshot.Ref{Dir: dir, Name: snapshot.RefName(r.Job)}
}

// TestSlurmAutor: heat under errmgr autor in a three-node allocation, its
// daemons a chain (routed_radix 1: n1 - n2 - n3), loses node n2 (its
// slurmd and its gompid killed) after a checkpoint, and recovers onto n1
// and n3 in a new srun step, ending with the checksum of an uninterrupted
// run. n3, below n2, attaches to n1 and is not lost.
func TestSlurmAutor(t *testing.T) {
	c := slurmCluster(t)
	want := heatWant(t)
	dir, local := t.TempDir(), t.TempDir()
	args := []string{"-k", "-N", "3", "-n", "6", filepath.Join(bin, "gompirun"), "-np", "6", "-am", "ft-enable-cr",
		"--mca", "errmgr", "autor,default", "--mca", "snapc_base_global_snapshot_dir", dir, "--mca", "routed_radix", "1",
		"--mca", "sstore", "stage", "--mca", "sstore_stage_local_snapshot_dir", local, filepath.Join(bin, "heat")}
	j := startPath(t, slurmEnv(c), "salloc", append(args, autorHeat...)...)
	var run, victim int
	j.waitFor("n2's daemon connected", func([]string, string) bool {
		if run == 0 {
			run = findMarked(j.mark, "gompirun", "")
		}
		victim = findMarked(j.mark, "gompid", "n2")
		return run != 0 && victim != 0 && daemonConnected(run, "n2")
	})
	ref := refOfPID(t, run, dir)
	if code, out, errs := tool(t, "gompi-checkpoint", fmt.Sprint(run)); code != 0 || out != "Snapshot Ref.:   0 "+ref.Name+"\n" {
		t.Fatalf("gompi-checkpoint: status %d\n%s%s", code, out, errs)
	}
	if err := c.KillNode("n2"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.StartNode(context.Background(), "n2"); err != nil {
			t.Errorf("restart n2's slurmd: %v", err)
		}
	})
	kill(t, "n2's gompid", victim)
	j.waitErr("gompirun: recovery 1: every rank runs again")
	code, lines, errs := j.wait()
	if code != 0 {
		t.Fatalf("heat under autor after n2 was lost: status %d\n%s", code, errs)
	}
	if got, _ := heatChecksum(lines, ""); got != want {
		t.Errorf("checksum %q after the recovery, want %q\n%s", got, want, errs)
	}
	moved := regexp.MustCompile(`restarting 6 ranks from sequence 0 of \S+ \(rank 2 n2 -> n[13], rank 3 n2 -> n[13]\)`)
	if !strings.Contains(errs, "node n2 was lost") || !moved.MatchString(errs) {
		t.Errorf("gompirun's report does not say n2 was lost and its ranks moved to n1 and n3:\n%s", errs)
	}
	if !strings.Contains(errs, "the daemon of node n3 lost its parent daemon and attached to the daemon of node n1") || strings.Contains(errs, "node n3 was lost") {
		t.Errorf("n3, below n2, did not attach to n1:\n%s", errs)
	}
	noSurvivors(t, "after the recovery", func() []int { return marked(j.mark) })
}

// findMarked returns a process of the job marked mark whose name is comm
// and, when node is set, whose command line names node; 0 if none.
func findMarked(mark, comm, node string) int {
	for _, pid := range marked(mark) {
		c, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		cl, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && (node == "" || strings.Contains(string(cl), "\x00--node\x00"+node+"\x00")) {
			return pid
		}
	}
	return 0
}

// daemonConnected reports whether gompi-ps shows node's daemon in the job
// of gompirun pid.
func daemonConnected(pid int, node string) bool {
	out, err := quickTool("gompi-ps", "--json", "--ranks", fmt.Sprint(pid)).Output()
	var jobs []psJob
	if err != nil || json.Unmarshal(out, &jobs) != nil || len(jobs) != 1 {
		return false
	}
	for _, d := range jobs[0].Daemons {
		if d.Node == node && d.PID > 0 {
			return true
		}
	}
	return false
}
