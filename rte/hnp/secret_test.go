package hnp

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"gompi/boot"
	"gompi/frameworks/errmgr"
	"gompi/rte"
	"gompi/rte/control"
)

// TestDataSecretPerGeneration (issue 31 item 2): every daemon's Launch
// carries the job's data-plane secret; a migration's Launch carries the
// same one (the moved ranks join ranks that hold it); the job a recovery
// makes relaunches its ranks under a new one.
func TestDataSecretPerGeneration(t *testing.T) {
	h := newHarness(t, twoNodesAndSpare, true)
	first := h.j.dataSecret
	if first.IsZero() {
		t.Fatal("the job has no data-plane secret")
	}
	for _, n := range twoNodesAndSpare.Nodes {
		if l := h.launched[n]; l == nil || !bytes.Equal(l.DataSecret, first.Bytes()) {
			t.Errorf("%s's Launch does not carry the job's data-plane secret", n)
		}
	}

	migrating(h)
	h.settle() // the save (committed), then the moved rank's Launch
	var moved int
	for _, m := range h.sent("n3") {
		if l := m.GetLaunch(); l != nil {
			moved++
			if !l.Migrate || !bytes.Equal(l.DataSecret, first.Bytes()) {
				t.Errorf("migration Launch (migrate=%v) does not carry the running ranks' data-plane secret", l.Migrate)
			}
		}
	}
	if moved != 1 {
		t.Fatalf("%d Launches to the migration's node, want 1", moved)
	}

	r := newHarness(t, twoNodesAndSpare, true)
	before := r.j.dataSecret
	if before == first {
		t.Error("two runs share a data-plane secret")
	}
	recovering(r)
	r.j.mods = &boot.HNP{ErrMgr: errmgr.NewStack(nil)}
	nj, err := r.j.recovered(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if nj.dataSecret.IsZero() || nj.dataSecret == before {
		t.Error("the recovered job relaunches its ranks under the data-plane secret of the generation before")
	}
}

// TestHNPDirClearsDeadJob: the directory a dead gompirun with this pid
// left (its record, anything else) is gone before the new one's secret is
// written, so no tool takes the old record for this job.
func TestHNPDirClearsDeadJob(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	old := rte.HNPDir(os.Getpid())
	if err := os.MkdirAll(old, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{rte.JobRecordFile, "leftover"} {
		if err := os.WriteFile(filepath.Join(old, f), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := control.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := hnpDir(s)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 || ents[0].Name() != rte.SecretFile {
		t.Fatalf("%s holds %v (%v), want only %s", dir, ents, err, rte.SecretFile)
	}
}
