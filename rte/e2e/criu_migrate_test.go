package e2e

import (
	"strings"
	"syscall"
	"testing"
)

// TestCRIUMigrate: gompi-migrate moves node n2's ranks of plainheat (no
// line of C/R code) to n1 with crs=criu: every rank is quiesced, ranks 2
// and 3 are dumped and restored on n1 through its gompid, and every rank
// reconnects at the new addresses. gompi-ps shows them on n1 with new
// processes, a checkpoint then saves every rank on n1, the job ends with the uninterrupted checksum, never started
// anew (its first progress line is printed once), and nothing is left.
func TestCRIUMigrate(t *testing.T) {
	dir := t.TempDir()
	j := criuJob(t, dir)
	ref := refOf(t, j, dir)
	first := j.output()[0]
	old := map[int]int{2: j.waitPID(2, ""), 3: j.waitPID(3, "")}
	code, out, errs := tool(t, "gompi-migrate", pidArg(j), "--off", "n2")
	if code != 0 {
		t.Fatalf("gompi-migrate --off n2: status %d\n%s%s\ngompirun:\n%s", code, out, errs, j.errText())
	}
	for _, w := range []string{"Rank 2: n2 -> n1", "Rank 3: n2 -> n1", "Migrated 2 ranks in"} {
		if !strings.Contains(out, w) {
			t.Errorf("gompi-migrate --off n2 printed no %q:\n%s", w, out)
		}
	}
	j.waitFor("ranks 2 and 3 connected on n1", func([]string, string) bool {
		js := psNow(j)
		if js == nil {
			return false
		}
		on := 0
		for _, r := range js.Ranks {
			if (r.Rank == 2 || r.Rank == 3) && r.Node == "n1" && r.State == "connected" && r.PID > 0 && r.PID != old[r.Rank] {
				on++
			}
		}
		return on == 2
	})
	// The moved ranks are n1's now: n1's gompid quiesces and dumps all
	// four, and the sequence records them there.
	checkpointCRIU(t, j, ref.Name, "1")
	in := info(t, ref)
	last := in.Seqs[len(in.Seqs)-1]
	if len(last.Procs) != 4 {
		t.Errorf("the checkpoint after the migration saved %d ranks, want 4", len(last.Procs))
	}
	for _, p := range last.Procs {
		if p.Node != "n1" || p.CRS != "criu" {
			t.Errorf("rank %d of the checkpoint after the migration: %+v, want it saved on n1", p.Rank, p)
		}
	}
	code, lines, stderr := j.wait()
	if got, _ := heatChecksum(lines, ""); code != 0 || got != plainSum(t) {
		t.Fatalf("plainheat after its migration: status %d, checksum %q\n%s", code, got, stderr)
	}
	if n := strings.Count("\n"+strings.Join(lines, "\n")+"\n", "\n"+first+"\n"); n != 1 {
		t.Errorf("plainheat's first progress line %q printed %d times", first, n)
	}
	if strings.Contains(stderr, "peer failed") {
		t.Errorf("a successful migration reported a peer failure:\n%s", stderr)
	}
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "gompirun: migration:") {
			t.Log(l)
		}
	}
	noSurvivors(t, "after the migration", func() []int { return marked(j.mark) })
}

// TestCRIUMigrateFailureRecovered: a rank that stays is killed while a
// crs=criu migration holds every rank quiesced (its dumps committed, the
// moved ranks not restored yet): the migration is abandoned, and autor
// restores every rank from the last full checkpoint, never from the
// migration's dumps; the job ends with the uninterrupted checksum.
func TestCRIUMigrateFailureRecovered(t *testing.T) {
	j := criuJobWith(t, t.TempDir(), append(criuParams(), "--mca", "errmgr", "crmig,autor,default", "--mca", "snapc_full_test_pause_at", "committed:1"))
	victim := j.waitPID(0, "")
	if code, out, errs := tool(t, "gompi-checkpoint", pidArg(j)); code != 0 {
		t.Fatalf("checkpoint: status %d\n%s%s", code, out, errs)
	}
	mig := startProg(t, "gompi-migrate", pidArg(j), "--off", "n2")
	j.waitErr("paused at committed of seq 1")
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := mig.wait(); code == 0 {
		t.Errorf("gompi-migrate succeeded although the migration was abandoned:\n%s", strings.Join(mig.output(), "\n"))
	}
	code, lines, stderr := j.wait()
	if got, _ := heatChecksum(lines, ""); code != 0 || got != plainSum(t) {
		t.Fatalf("plainheat after the abandoned migration: status %d, checksum %q\n%s", code, got, stderr)
	}
	for _, w := range []string{"migration abandoned", "every rank restarts from sequence 0", "recovery 1: every rank runs again"} {
		if !strings.Contains(stderr+strings.Join(mig.output(), "\n"), w) {
			t.Errorf("no %q in the output:\n%s", w, stderr)
		}
	}
	noSurvivors(t, "after the abandoned migration", func() []int { return marked(j.mark) })
}
