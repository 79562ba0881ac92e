package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestScaleCheckpointRestart runs heat on 32 real ranks over 8 simulated
// nodes (a gompid each), checkpoints it, checkpoints it again with --term,
// and restarts it from that snapshot on the same nodes: it ends with the
// checksum of an uninterrupted run on one rank. Every checkpoint's
// bookmark exchange and agreement cross the ranks' control tree, so they
// cost 4(N-1) messages, not N(N-1).
func TestScaleCheckpointRestart(t *testing.T) {
	const ranks, nodes = 32, 8
	heat := []string{filepath.Join(bin, "heat"), "-size", "64", "-steps", "300"}
	code, out, errs := start(t, append([]string{"-np", "1"}, heat...)...).wait()
	want, ok := heatChecksum(out, "")
	if code != 0 || !ok {
		t.Fatalf("heat -np 1: status %d %q\n%s", code, out, errs)
	}
	var hosts strings.Builder
	for n := 1; n <= nodes; n++ {
		fmt.Fprintf(&hosts, "n%d slots=%d\n", n, ranks/nodes)
	}
	hf := hostfile(t, hosts.String())
	dir := t.TempDir()
	j := start(t, append([]string{"-np", fmt.Sprint(ranks), "--hostfile", hf, "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", dir}, append(heat, "-every", "1", "-sleep", "10ms")...)...)
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
	r := startProg(t, "gompi-restart", "--hostfile", hf, ref.Path())
	code, out, errs = r.wait()
	if got, _ := heatChecksum(out, ""); code != 0 || got != want {
		t.Errorf("restarted heat: status %d, checksum %q, want %q\n%s", code, got, want, errs)
	}
}
