package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"gompi/components/filem/sftp"
	"gompi/frameworks/filem/filemtest"
	"gompi/frameworks/sstore/snapshot"
	"gompi/rte/jobs"
)

// stageRun checkpoints a 4-rank 2-node job twice with sstore stage (global
// folder globalDir, which may be remote; the ranks' node-local copies
// under local), kills it, and restarts it on one node: ranks 0 and 1 read
// their node's cached copy, ranks 2 and 3 (from the other node) fetch
// theirs from global storage.
func stageRun(t *testing.T, globalDir string, ref func(job string) snapshot.Ref, extra ...string) {
	local := t.TempDir()
	args := append([]string{"--mca", "sstore", "stage", "--mca", "sstore_stage_compress", "zstd",
		"--mca", "sstore_stage_local_snapshot_dir", local}, extra...)
	j := crJob(t, globalDir, args...)
	r := ref(jobOf(t, j))

	code, out, errs := tool(t, "gompi-checkpoint", pidArg(j))
	if code != 0 || out != "Snapshot Ref.:   0 "+r.Name+"\n" {
		t.Fatalf("gompi-checkpoint: status %d\n%s%s", code, out, errs)
	}
	code, out, errs = tool(t, "gompi-checkpoint", "--status", pidArg(j))
	if code != 0 {
		t.Fatalf("gompi-checkpoint --status: status %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"Drain (n1) - ", "Drain (n2) - ", "Sync - 4 local snapshots stable", "Snapshot Ref.:   1 " + r.Name} {
		if !strings.Contains(out, want) {
			t.Errorf("--status lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = tool(t, "gompi-checkpoint", "--list", pidArg(j))
	if code != 0 || out != "Snapshot Ref.: "+r.Name+"\t[0,1]\n" {
		t.Errorf("--list: status %d: %q", code, out)
	}
	j.signal(syscall.SIGKILL) // gompirun dies: no goodbye
	j.wait()

	res := startProg(t, "gompi-restart", "--hostfile", hostfile(t, "n1 slots=4\n"), r.String())
	res.waitReady(4)
	restarted := regexp.MustCompile(`^restarted rank=(\d) node=n1 ref=` + regexp.QuoteMeta(r.Name) + ` seq=1 `)
	seen := map[string]bool{}
	for _, l := range res.output() {
		if m := restarted.FindStringSubmatch(l); m != nil {
			seen[m[1]] = true
		}
	}
	if len(seen) != 4 {
		t.Errorf("ranks restarted from seq 1: %v; output:\n%s\nstderr:\n%s", seen, strings.Join(res.output(), "\n"), res.errText())
	}
	code, out, errs = tool(t, "gompi-checkpoint", "--term", pidArg(res))
	if code != 0 || out != "Snapshot Ref.:   2 "+r.Name+"\n" {
		t.Errorf("checkpoint-and-terminate of the restarted job: status %d\n%s%s", code, out, errs)
	}
	if code, _, errs := res.wait(); code != 0 {
		t.Errorf("restarted job: status %d\n%s", code, errs)
	}
	// gompi-restart -i says where each local snapshot is and which node
	// caches it.
	in := info(t, r)
	if len(in.Seqs) != 3 {
		t.Fatalf("gompi-restart -i: %+v", in)
	}
	for _, p := range in.Seqs[2].Procs {
		if p.Node != "n1" || p.Cached == "" || !strings.HasSuffix(p.Location, fmt.Sprintf("/2/gompi_snapshot_%d.ckpt", p.Rank)) {
			t.Errorf("seq 2, rank %d: %+v", p.Rank, p)
		}
	}
	// The node-local copies: n1 keeps at most sstore_stage_cache (2)
	// sequences of the reference; n2's last two stay as they were.
	for node, want := range map[string][]string{"n1": {"1", "2"}, "n2": {"0", "1"}} {
		ents, _ := os.ReadDir(filepath.Join(local, node, r.Name))
		var got []string
		for _, e := range ents {
			got = append(got, e.Name())
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("node %s caches sequences %v, want %v", node, got, want)
		}
	}
}

// jobOf is the job id of a running gompirun.
func jobOf(t *testing.T, j *job) string {
	t.Helper()
	r, err := jobs.Read(j.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return r.Job
}

// TestStage: sstore stage with zstd to a global folder on this node.
func TestStage(t *testing.T) {
	dir := t.TempDir()
	stageRun(t, dir, func(job string) snapshot.Ref { return snapshot.Ref{Dir: dir, Name: snapshot.RefName(job)} })
}

// TestStageSFTP: the global snapshot folder is remote
// (sftp://root@127.0.0.1:port/dir, a real sshd with its own keys): the
// daemons drain to it with filem sftp, gompirun keeps the metadata there,
// and gompi-restart reads it back from there. Nobody names filem: the URL
// implies it, for gompirun, its daemons and gompi-restart.
func TestStageSFTP(t *testing.T) {
	s := filemtest.StartSSHD(t)
	dir := t.TempDir()
	remote := fmt.Sprintf("sftp://root@127.0.0.1:%d%s", s.Port, dir)
	// The restart reads the same parameters: files are where a user keeps
	// them, so put the sftp keys in the environment of every tool.
	t.Setenv("GOMPI_MCA_"+sftp.ParamIdentity, s.UserKey)
	t.Setenv("GOMPI_MCA_"+sftp.ParamKnownHosts, s.KnownHosts)
	stageRun(t, remote, func(job string) snapshot.Ref { return snapshot.Ref{Dir: remote, Name: snapshot.RefName(job)} })
	// Global storage holds compressed files, committed metadata.
	ents, _ := filepath.Glob(filepath.Join(dir, "*", "1", "gompi_snapshot_0.ckpt", "*"))
	if len(ents) == 0 {
		t.Errorf("nothing of sequence 1 on global storage under %s", dir)
	}
}
