package e2e

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"gompi/rte"
)

// TestSecretStaysSecret (issue 31 item 2): the job's secrets (the
// control secret and the data-plane secret) reach ranks through a
// descriptor, not the environment, so a rank's /proc/PID/environ holds
// neither; no file of a written snapshot (metadata, the ranks' state)
// holds them; a restart from the snapshot runs under new ones, never ones
// read back from it.
func TestSecretStaysSecret(t *testing.T) {
	dir := t.TempDir()
	j := crJob(t, dir, crprog(), "-show-secret")
	ref := refOf(t, j, dir)
	first, pids := secretOf(t, j.output())
	ctl := controlSecret(t, j)
	cleanEnviron(t, pids, first, ctl)
	if code, out, errs := tool(t, "gompi-checkpoint", pidArg(j)); code != 0 {
		t.Fatalf("gompi-checkpoint: status %d\n%s%s", code, out, errs)
	}
	j.signal(syscall.SIGINT)
	if code, _, errs := j.wait(); code != 130 {
		t.Fatalf("job: status %d\n%s", code, errs)
	}
	noSecretIn(t, dir, first)
	noSecretIn(t, dir, ctl)

	r := startProg(t, "gompi-restart", "--hostfile", hostfile(t, "n1 slots=4\n"), ref.Path())
	r.waitReady(4)
	second, pids := secretOf(t, r.output())
	ctl2 := controlSecret(t, r)
	cleanEnviron(t, pids, second, ctl2)
	if bytes.Equal(first, second) || bytes.Equal(ctl, ctl2) {
		t.Error("the restarted job runs under a secret of the run it restarted from")
	}
	if code, out, errs := tool(t, "gompi-checkpoint", "--term", pidArg(r)); code != 0 {
		t.Errorf("checkpoint-and-terminate: status %d\n%s%s", code, out, errs)
	}
	if code, _, errs := r.wait(); code != 0 {
		t.Errorf("restarted job after --term: status %d\n%s", code, errs)
	}
	for _, s := range [][]byte{first, ctl, second, ctl2} {
		noSecretIn(t, dir, s)
	}
}

// TestDataSecretNewAfterRecovery (issue 31 item 2): inside one run, the
// ranks errmgr autor relaunches from a checkpoint run under a new
// data-plane secret (ranks of the generation before cannot connect to
// them), while the job keeps its control secret; the new secret is in no
// rank's environment and in no file of the job's snapshots.
func TestDataSecretNewAfterRecovery(t *testing.T) {
	dir := t.TempDir()
	j := crJob(t, dir, "--mca", "errmgr", "autor,default", crprog(), "-show-secret")
	first, pids := secretOf(t, j.output())
	ctl := controlSecret(t, j)
	if code, out, errs := tool(t, "gompi-checkpoint", pidArg(j)); code != 0 {
		t.Fatalf("gompi-checkpoint: status %d\n%s%s", code, out, errs)
	}
	before := len(j.output())
	kill(t, "rank 2", pids[2])
	j.waitErr("gompirun: recovery 1: every rank runs again")
	j.waitFor("the relaunched ranks' secrets", func(lines []string, _ string) bool {
		n := 0
		for _, l := range lines[before:] {
			if strings.HasPrefix(l, "secret ") {
				n++
			}
		}
		return n == 4
	})
	second, pids := secretOf(t, j.output()[before:])
	if bytes.Equal(first, second) {
		t.Error("the recovered ranks run under the data-plane secret of the ranks they replace")
	}
	if !bytes.Equal(controlSecret(t, j), ctl) {
		t.Error("the job's control secret changed in the recovery (its daemons and tools hold it)")
	}
	cleanEnviron(t, pids, second, ctl)
	j.signal(syscall.SIGINT)
	if code, _, errs := j.wait(); code != 130 {
		t.Fatalf("job: status %d\n%s", code, errs)
	}
	for _, s := range [][]byte{first, second, ctl} {
		noSecretIn(t, dir, s)
	}
}

// secretOf returns the data-plane secret every rank of a 4-rank crprog
// -show-secret job printed, checking they agree and that none found it
// in its initial environment, and the ranks' pids.
func secretOf(t *testing.T, lines []string) ([]byte, map[int]int) {
	t.Helper()
	re := regexp.MustCompile(`^secret rank=(\d+) pid=(\d+) hex=([0-9a-f]+) environ=(\S+)$`)
	var secret string
	pids := map[int]int{}
	for _, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		r, _ := strconv.Atoi(m[1])
		pids[r], _ = strconv.Atoi(m[2])
		if m[4] != "clean" {
			t.Errorf("rank %s: /proc/self/environ: %s", m[1], m[4])
		}
		if secret != "" && m[3] != secret {
			t.Errorf("rank %s has another secret than the others", m[1])
		}
		secret = m[3]
	}
	b, err := hex.DecodeString(secret)
	if len(pids) != 4 || err != nil || len(b) < 16 {
		t.Fatalf("secrets of %d ranks (%v):\n%q", len(pids), err, lines)
	}
	return b, pids
}

// controlSecret is the control secret of the running job j: the one its
// gompirun keeps, owner-only, in its private folder for the tools.
func controlSecret(t *testing.T, j *job) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rte.HNPDir(j.cmd.Process.Pid), rte.SecretFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(s) < 16 {
		t.Fatalf("the job's secret file holds %q (%v)", b, err)
	}
	return s
}

// cleanEnviron fails when the initial environment of any of the ranks
// (pids by rank) holds one of secrets, as bytes or hex.
func cleanEnviron(t *testing.T, pids map[int]int, secrets ...[]byte) {
	t.Helper()
	for r, pid := range pids {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		for _, s := range secrets {
			if bytes.Contains(env, s) || bytes.Contains(env, []byte(hex.EncodeToString(s))) {
				t.Errorf("rank %d (pid %d): /proc/%d/environ holds a secret of the job", r, pid, pid)
			}
		}
	}
}

// noSecretIn fails when any file under dir holds secret, as bytes or as
// its hex text.
func noSecretIn(t *testing.T, dir string, secret []byte) {
	t.Helper()
	h := []byte(hex.EncodeToString(secret))
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		if bytes.Contains(b, h) || bytes.Contains(b, secret) {
			t.Errorf("%s holds the job secret", path)
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("searched %d files under %s: %v", files, dir, err)
	}
}
