package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"gompi/frameworks/sstore/snapshot"
)

// eightSlots is two simulated nodes with room for 8 ranks.
const eightSlots = "n1 slots=4\nn2 slots=4\n"

// ckptTerm starts prog (with args) on 4 ranks over two simulated nodes
// with C/R on, waits until rank 0 printed a line holding mark, takes a
// checkpoint with --term (sequence 0) and waits for the job's end.
func ckptTerm(t *testing.T, dir, mark string, prog ...string) snapshot.Ref {
	t.Helper()
	args := append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes), "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", dir}, prog...)
	j := start(t, args...)
	j.waitFor(fmt.Sprintf("%q in the output", mark), func(lines []string, _ string) bool {
		return strings.Contains(strings.Join(lines, "\n"), mark)
	})
	ref := refOf(t, j, dir)
	if code, out, errs := tool(t, "gompi-checkpoint", "--term", pidArg(j)); code != 0 || out != "Snapshot Ref.:   0 "+ref.Name+"\n" {
		t.Fatalf("gompi-checkpoint --term: status %d\n%s%s", code, out, errs)
	}
	if code, _, errs := j.wait(); code != 0 {
		t.Fatalf("job after --term: status %d\n%s", code, errs)
	}
	return ref
}

// TestRestartOtherRankCount: heat checkpointed on 4 ranks restarts on 2,
// 3, 6 and 8 ranks (gompi-restart -np) and ends with the checksum of an
// uninterrupted run; each restart records its repartition sequence in the
// reference with its rank count, and the job restarted on 8 checkpoints on
// into the reference.
func TestRestartOtherRankCount(t *testing.T) {
	want := heatWant(t)
	dir := t.TempDir()
	ref := ckptTerm(t, dir, "step 20: residual", append([]string{filepath.Join(bin, "heat")}, autorHeat...)...)
	hosts := hostfile(t, eightSlots)
	for _, m := range []int{2, 3, 6, 8} {
		r := startProg(t, "gompi-restart", "-np", fmt.Sprint(m), "--hostfile", hosts, ref.Path())
		if m == 8 {
			// The restarted job checkpoints on into the reference, with
			// its own rank count.
			r.waitFor("a progress line of the restarted job", func(lines []string, _ string) bool { return len(lines) > 0 })
			if code, out, errs := tool(t, "gompi-checkpoint", pidArg(r)); code != 0 || out != "Snapshot Ref.:   5 "+ref.Name+"\n" {
				t.Fatalf("checkpoint of the job restarted on 8 ranks: status %d\n%s%s", code, out, errs)
			}
		}
		code, lines, errs := r.wait()
		if sum, _ := heatChecksum(lines, ""); code != 0 || sum != want {
			t.Fatalf("restart on %d ranks: status %d, checksum %q, want %q (uninterrupted)\nstderr:\n%s", m, code, sum, want, errs)
		}
		if !strings.Contains(errs, fmt.Sprintf("sequence 0 of 4 ranks repartitioned for %d ranks as sequence", m)) {
			t.Errorf("restart on %d ranks: stderr lacks the repartition:\n%s", m, errs)
		}
	}
	in := info(t, ref)
	var got []string
	for _, s := range in.Seqs {
		got = append(got, fmt.Sprintf("%d:%d", s.Seq, s.Ranks))
	}
	if strings.Join(got, " ") != "0:4 1:2 2:3 3:6 4:8 5:8" || in.Ranks != 8 {
		t.Errorf("reference of %d ranks, sequences (number:ranks) %q, want 8 ranks and 0:4 1:2 2:3 3:6 4:8 5:8", in.Ranks, got)
	}
}

// TestRestartOtherRankCountRefused: a program whose state is not declared
// redistributable (examples/ring registers its values with cr.Protect) is
// refused a restart on another rank count, saying why and what to do, and
// the reference is left as it was.
func TestRestartOtherRankCountRefused(t *testing.T) {
	dir := t.TempDir()
	ref := ckptTerm(t, dir, "step 20: lap", filepath.Join(bin, "ring"), "-steps", "400", "-size", "64", "-sleep", "5ms")
	code, out, errs := tool(t, "gompi-restart", "-np", "2", ref.Path())
	if code != 1 || out != "" || !strings.Contains(errs, `cannot restart on another rank count from 4 to 2 ranks: sequence 0 of`) ||
		!strings.Contains(errs, `the program saved "step", "buf" with cr.Protect`) || !strings.Contains(errs, "cr.ProtectDistributed") {
		t.Fatalf("gompi-restart -np 2 of ring: status %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	if in := info(t, ref); len(in.Seqs) != 1 {
		t.Errorf("the refused restart changed the reference: %+v", in.Seqs)
	}
}

// TestCRIURestartOtherRankCountRefused: a sequence saved by crs=criu
// (whole processes, laid out for their rank count) is refused a restart
// on another rank count, saying why, and the reference is left as it was.
func TestCRIURestartOtherRankCountRefused(t *testing.T) {
	dir := t.TempDir()
	j := criuJob(t, dir)
	ref := refOf(t, j, dir)
	checkpointCRIU(t, j, ref.Name, "0", "--term")
	if code, _, errs := j.wait(); code != 0 {
		t.Fatalf("job after --term: status %d\n%s", code, errs)
	}
	code, out, errs := tool(t, "gompi-restart", "-np", "2", "--mca", "mca_base_component_path", plugins, ref.Path())
	if code != 1 || out != "" || !strings.Contains(errs, "cannot restart on another rank count from 4 to 2 ranks") || !strings.Contains(errs, "it was saved by crs=criu") {
		t.Fatalf("gompi-restart -np 2 of a crs=criu sequence: status %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	if in := info(t, ref); len(in.Seqs) != 1 {
		t.Errorf("the refused restart changed the reference: %+v", in.Seqs)
	}
}
