package e2e

import (
	"testing"
)

// TestCRIUFlag: a crs=criu job run with --mca crcp flag quiesces its
// ranks by flags (mpi.Proc.Suspend, crcp.QuiesceFlags) instead of bkmrk's
// counts: plainheat is checkpointed twice while it runs and finishes with
// the uninterrupted checksum, the snapshot records the job's crcp, and
// its last sequence restarted finishes with the checksum again.
func TestCRIUFlag(t *testing.T) {
	dir := t.TempDir()
	j := criuJobWith(t, dir, append(criuParams(), "--mca", "crcp", "flag"))
	ref := refOf(t, j, dir)
	checkpointCRIU(t, j, ref.Name, "0")
	checkpointCRIU(t, j, ref.Name, "1")
	code, out, errs := j.wait()
	want := plainSum(t)
	if got, _ := heatChecksum(out, ""); code != 0 || got != want {
		t.Fatalf("checkpointed plainheat: status %d, checksum %q, want %q\n%s", code, got, want, errs)
	}
	noSurvivors(t, "after the checkpointed job", func() []int { return marked(j.mark) })
	in := info(t, ref)
	crcp := ""
	for _, s := range in.Params {
		if s.Name == "crcp" {
			crcp = s.Value
		}
	}
	if crcp != "flag" {
		t.Errorf("the snapshot records crcp %q, want flag (params %v)", crcp, in.Params)
	}
	restartCRIU(t, ref.Path(), want)
}
