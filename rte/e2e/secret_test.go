package e2e

import (
	"bytes"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
)

// TestSecretStaysSecret (issue 31 item 2): the job secret reaches ranks
// through a descriptor, not the environment, so a rank's
// /proc/self/environ does not hold it; no file of a written snapshot
// (metadata, the ranks' state) holds it; a restart from the snapshot runs
// under a new secret, never one read back from it.
func TestSecretStaysSecret(t *testing.T) {
	dir := t.TempDir()
	j := crJob(t, dir, crprog(), "-show-secret")
	ref := refOf(t, j, dir)
	first := secretOf(t, j.output())
	if code, out, errs := tool(t, "gompi-checkpoint", pidArg(j)); code != 0 {
		t.Fatalf("gompi-checkpoint: status %d\n%s%s", code, out, errs)
	}
	j.signal(syscall.SIGINT)
	if code, _, errs := j.wait(); code != 130 {
		t.Fatalf("job: status %d\n%s", code, errs)
	}
	noSecretIn(t, dir, first)

	r := startProg(t, "gompi-restart", "--hostfile", hostfile(t, "n1 slots=4\n"), ref.Path())
	r.waitReady(4)
	second := secretOf(t, r.output())
	if bytes.Equal(first, second) {
		t.Error("the restarted job runs under the secret of the run it restarted from")
	}
	if code, out, errs := tool(t, "gompi-checkpoint", "--term", pidArg(r)); code != 0 {
		t.Errorf("checkpoint-and-terminate: status %d\n%s%s", code, out, errs)
	}
	if code, _, errs := r.wait(); code != 0 {
		t.Errorf("restarted job after --term: status %d\n%s", code, errs)
	}
	noSecretIn(t, dir, first)
	noSecretIn(t, dir, second)
}

// secretOf returns the secret every rank of a 4-rank crprog -show-secret
// job printed, checking they agree and that none found it in its
// initial environment.
func secretOf(t *testing.T, lines []string) []byte {
	t.Helper()
	re := regexp.MustCompile(`^secret rank=(\d+) hex=([0-9a-f]+) environ=(\S+)$`)
	var secret string
	ranks := map[string]bool{}
	for _, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		ranks[m[1]] = true
		if m[3] != "clean" {
			t.Errorf("rank %s: /proc/self/environ: %s", m[1], m[3])
		}
		if secret != "" && m[2] != secret {
			t.Errorf("rank %s has another secret than the others", m[1])
		}
		secret = m[2]
	}
	b, err := hex.DecodeString(secret)
	if len(ranks) != 4 || err != nil || len(b) < 16 {
		t.Fatalf("secrets of %d ranks (%v):\n%q", len(ranks), err, lines)
	}
	return b
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
