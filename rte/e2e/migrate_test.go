package e2e

import (
	"strings"
	"syscall"
	"testing"
)

// threeNodes leaves n3 spare for -np 4 (ranks fill n1 and n2).
const threeNodes = "# three simulated nodes\nn1 slots=2\nn2 slots=2\nn3 slots=2\n"

// heatArgs run heat long enough for migrations while it computes; each
// printed line wakes the test's waits.
func heatArgs() []string {
	return []string{bin + "/heat", "-size", "48", "-steps", "800", "-sleep", "5ms", "-every", "10"}
}

// uninterrupted runs heat once without C/R and returns its checksum.
func uninterrupted(t *testing.T, hosts string) string {
	t.Helper()
	clean := start(t, append([]string{"-np", "4", "--hostfile", hostfile(t, hosts)}, heatArgs()...)...)
	if code, _, errs := clean.wait(); code != 0 {
		t.Fatalf("uninterrupted heat: status %d\n%s", code, errs)
	}
	want, _ := heatChecksum(clean.output(), "")
	if want == "" {
		t.Fatalf("no checksum from heat:\n%s", strings.Join(clean.output(), "\n"))
	}
	return want
}

// computing waits until heat has printed n progress lines.
func computing(j *job, n int) {
	j.waitFor("heat computing", func(lines []string, _ string) bool { return len(lines) >= n })
}

// TestMigrate: heat on two nodes moves node n2's ranks to the spare n3,
// then rank 0 to n2, while it computes; it ends with the uninterrupted
// run's checksum, gompirun reports each migration, and nothing is left.
func TestMigrate(t *testing.T) {
	want := uninterrupted(t, threeNodes)
	j := start(t, append([]string{"-np", "4", "--hostfile", hostfile(t, threeNodes), "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", t.TempDir()}, heatArgs()...)...)
	computing(j, 3)
	code, out, errs := tool(t, "gompi-migrate", pidArg(j), "--off", "n2")
	if code != 0 {
		t.Fatalf("gompi-migrate --off n2: status %d\n%s%s\ngompirun:\n%s", code, out, errs, j.errText())
	}
	for _, w := range []string{"Rank 2: n2 -> n3", "Rank 3: n2 -> n3", "Migrated 2 ranks in"} {
		if !strings.Contains(out, w) {
			t.Errorf("gompi-migrate --off n2 printed no %q:\n%s", w, out)
		}
	}
	computing(j, len(j.output())+2)
	code, out, errs = tool(t, "gompi-migrate", pidArg(j), "--ranks", "0", "--onto", "n2")
	if code != 0 || !strings.Contains(out, "Rank 0: n1 -> n2") {
		t.Fatalf("gompi-migrate --ranks 0 --onto n2: status %d\n%s%s\ngompirun:\n%s", code, out, errs, j.errText())
	}
	code, lines, stderr := j.wait()
	if code != 0 {
		t.Fatalf("heat with migrations: status %d\n%s", code, stderr)
	}
	if got, _ := heatChecksum(lines, ""); got != want {
		t.Errorf("checksum %q after two migrations, want %q (uninterrupted)\nstderr:\n%s", got, want, stderr)
	}
	for _, w := range []string{"gompirun: migration: rank 2 n2 -> n3, rank 3 n2 -> n3 in", "gompirun: migration: rank 0 n1 -> n2 in"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("gompirun's output lacks %q:\n%s", w, stderr)
		}
	}
	// The ranks that stay see the moved ranks' connections close: that is
	// the migration working, not a failure to warn about.
	if strings.Contains(stderr, "peer failed") {
		t.Errorf("a successful migration reported a peer failure:\n%s", stderr)
	}
	noSurvivors(t, "after the migrations", func() []int { return marked(j.mark) })
}

// TestMigrateRefused: requests that cannot be carried out say why and
// leave the job running; it ends with the right answer.
func TestMigrateRefused(t *testing.T) {
	want := uninterrupted(t, twoNodes)
	j := start(t, append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes), "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", t.TempDir()}, heatArgs()...)...)
	computing(j, 3)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--off", "n9"}, `node "n9" is not a node of the job`},
		{[]string{"--ranks", "7"}, "the job has ranks 0 to 3"},
		{[]string{"--off", "n1,n2"}, "no node left"},
		{[]string{"--ranks", "1", "--onto", "n1"}, "n1"},
	} {
		code, out, errs := tool(t, "gompi-migrate", append([]string{pidArg(j)}, tt.args...)...)
		if code == 0 || !strings.Contains(out+errs, tt.want) {
			t.Errorf("gompi-migrate %v: status %d, want an error with %q:\n%s%s", tt.args, code, tt.want, out, errs)
		}
	}
	code, lines, stderr := j.wait()
	if code != 0 {
		t.Fatalf("heat after refused migrations: status %d\n%s", code, stderr)
	}
	if got, _ := heatChecksum(lines, ""); got != want {
		t.Errorf("checksum %q, want %q", got, want)
	}
	noSurvivors(t, "after refused migrations", func() []int { return marked(j.mark) })
}

// TestMigrateFailureRecovered: a rank dies in the middle of a migration
// (its save is committed, the moved ranks not started yet); the migration
// is abandoned and autor recovers the job from its last full checkpoint,
// never from the migration's partial one.
func TestMigrateFailureRecovered(t *testing.T) {
	want := uninterrupted(t, threeNodes)
	j := start(t, append([]string{"-np", "4", "--hostfile", hostfile(t, threeNodes), "-am", "ft-enable-cr",
		"--mca", "errmgr", "crmig,autor,default", "--mca", "snapc_base_global_snapshot_dir", t.TempDir(),
		"--mca", "snapc_full_test_pause_at", "committed:1"}, heatArgs()...)...)
	computing(j, 3)
	if code, out, errs := tool(t, "gompi-checkpoint", pidArg(j)); code != 0 {
		t.Fatalf("checkpoint: status %d\n%s%s", code, out, errs)
	}
	var victim int
	j.waitFor("rank 0's pid", func([]string, string) bool {
		victim = rankOrDaemonPID(t, j, 0, "")
		return victim != 0
	})
	mig := startProg(t, "gompi-migrate", pidArg(j), "--off", "n2")
	j.waitFor("the migration paused after its commit", func(_ []string, stderr string) bool {
		return strings.Contains(stderr, "paused at committed of seq 1")
	})
	syscall.Kill(victim, syscall.SIGKILL)
	code, _, _ := mig.wait()
	if code == 0 {
		t.Errorf("gompi-migrate succeeded although the migration was abandoned:\n%s", strings.Join(mig.output(), "\n"))
	}
	code, lines, stderr := j.wait()
	if code != 0 {
		t.Fatalf("heat after the abandoned migration: status %d\n%s", code, stderr)
	}
	if got, _ := heatChecksum(lines, ""); got != want {
		t.Errorf("checksum %q, want %q\nstderr:\n%s", got, want, stderr)
	}
	for _, w := range []string{"migration abandoned", "every rank restarts from sequence 0", "recovery 1: every rank runs again"} {
		if !strings.Contains(stderr+strings.Join(mig.output(), "\n"), w) {
			t.Errorf("no %q in the output:\n%s", w, stderr)
		}
	}
	noSurvivors(t, "after the abandoned migration", func() []int { return marked(j.mark) })
}

// TestMigrateFromRank: heat's last rank asks to move off its node with
// cr.Migrate; it moves to the spare node at a later safe point and the
// answer is the uninterrupted run's.
func TestMigrateFromRank(t *testing.T) {
	want := uninterrupted(t, threeNodes)
	j := start(t, append([]string{"-np", "4", "--hostfile", hostfile(t, threeNodes), "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", t.TempDir()}, append(heatArgs(), "-migrate-at", "100")...)...)
	code, lines, stderr := j.wait()
	if code != 0 {
		t.Fatalf("heat with cr.Migrate: status %d\n%s", code, stderr)
	}
	if got, _ := heatChecksum(lines, ""); got != want {
		t.Errorf("checksum %q after the migration, want %q\nstderr:\n%s", got, want, stderr)
	}
	if !strings.Contains(stderr, "gompirun: migration: rank 3 n2 -> n3 in") {
		t.Errorf("gompirun did not report rank 3's move to n3:\n%s", stderr)
	}
	noSurvivors(t, "after cr.Migrate", func() []int { return marked(j.mark) })
}
