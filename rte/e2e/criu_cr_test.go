package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCRIUProgramWithCR: a program written for crs=self (heat: Protect,
// SafePoint) run with crs=criu named is saved whole from outside, its
// package cr calls inert, its cr.Migrate moves its last rank as
// gompi-migrate would, and it finishes with the checksum of an
// uninterrupted run; a program calling cr.Checkpoint from inside is
// refused with what to do instead (package cr's doc, "Under crs=criu").
func TestCRIUProgramWithCR(t *testing.T) {
	dir := t.TempDir()
	args := append([]string{"-np", "4", "--hostfile", hostfile(t, threeNodes), "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", dir}, criuParams()...)
	j := start(t, append(append(args, filepath.Join(bin, "heat")), append(plainArgs, "-migrate-at", "40")...)...)
	j.waitFor("heat's migration by cr.Migrate", func(_ []string, stderr string) bool {
		return strings.Contains(stderr, "gompirun: migration: rank 3 n2 -> n3")
	})
	ref := refOf(t, j, dir)
	checkpointCRIU(t, j, ref.Name, "1") // the migration's save is sequence 0
	code, out, errs := j.wait()
	if got, _ := heatChecksum(out, ""); code != 0 || got != plainSum(t) {
		t.Fatalf("heat under crs=criu: status %d, checksum %q\n%s", code, got, errs)
	}
	seqs := info(t, ref).Seqs
	for _, p := range seqs[len(seqs)-1].Procs {
		if want := []string{"n1", "n1", "n2", "n3"}[p.Rank]; p.CRS != "criu" || p.Node != want {
			t.Errorf("rank %d saved on %s by crs %q, want on %s by criu", p.Rank, p.Node, p.CRS, want)
		}
	}
	noSurvivors(t, "after heat", func() []int { return marked(j.mark) })

	args = append([]string{"-np", "2", "--hostfile", hostfile(t, twoNodes), "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", t.TempDir()}, criuParams()...)
	j = start(t, append(args, filepath.Join(bin, "ckpt"), "-steps", "10", "-at", "5")...)
	code, _, errs = j.wait()
	if want := "which has no safe points; checkpoint it with gompi-checkpoint"; code == 0 || !strings.Contains(errs, want) {
		t.Errorf("cr.Checkpoint under crs=criu: status %d, want a refusal saying %q\n%s", code, want, errs)
	}
	noSurvivors(t, "after ckpt", func() []int { return marked(j.mark) })
}
