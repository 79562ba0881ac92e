package e2e

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
)

// collOut is what testdata/cr/ckpt -coll printed: per rank, the coll
// components of World's Allreduce and the final line (sum and hash of
// every collective result).
type collOut struct {
	comps map[int]string
	done  map[int]string
	ref   string // the reference of the checkpoints it took, if any
}

func collResults(t *testing.T, what string, j *job) collOut {
	t.Helper()
	code, out, errs := j.wait()
	o := collOut{comps: map[int]string{}, done: map[int]string{}}
	for _, l := range out {
		var r, steps, step, seq int
		var s, name, restarted string
		if _, err := fmt.Sscanf(l, "coll rank=%d allreduce=%s", &r, &s); err == nil {
			o.comps[r] = s
		}
		if _, err := fmt.Sscanf(l, "done rank=%d steps=%d", &r, &steps); err == nil {
			o.done[r] = l
		}
		if _, err := fmt.Sscanf(l, "checkpoint rank=%d step=%d ref=%s seq=%d restart=%s", &r, &step, &name, &seq, &restarted); err == nil {
			o.ref = name
		}
	}
	if code != 0 || len(o.done) != 4 || len(o.comps) != 4 {
		t.Fatalf("%s: status %d, output:\n%s\n%s", what, code, strings.Join(out, "\n"), errs)
	}
	return o
}

func wantComps(t *testing.T, what string, o collOut, want string) {
	t.Helper()
	for r, c := range o.comps {
		if c != want {
			t.Errorf("%s: rank %d ran World's Allreduce on %s, want %s", what, r, c, want)
		}
	}
}

// A job on two nodes with two ranks each runs its collectives on han and
// gets the flat algorithms' results (--mca coll ^han), integer and
// floating point, bit for bit. With C/R on, han is not selected (a
// restart on another layout would split the ranks between two
// groupings): the job checkpointed in the middle, and restarted on another
// layout (one rank on n1, three on n2), runs basic and gets the same bits.
func TestCollHierarchical(t *testing.T) {
	ckpt := []string{filepath.Join(bin, "ckpt"), "-steps", "30", "-coll"}
	two := []string{"-np", "4", "--hostfile", hostfile(t, twoNodes)}
	flat := collResults(t, "coll ^han", start(t, append(append(two, "--mca", "coll", "^han"), ckpt...)...))
	wantComps(t, "coll ^han", flat, "basic")
	han := collResults(t, "han", start(t, append(two, ckpt...)...))
	wantComps(t, "han", han, "han,basic")
	if !maps.Equal(han.done, flat.done) {
		t.Fatalf("results with han differ from the flat algorithms':\nhan  %v\nflat %v", han.done, flat.done)
	}

	dir := t.TempDir()
	cr := collResults(t, "checkpointed", start(t, append(append(two, "-am", "ft-enable-cr", "--mca", "snapc_base_global_snapshot_dir", dir),
		append(ckpt, "-at", "10")...)...))
	wantComps(t, "checkpointed", cr, "basic")
	if cr.ref == "" || !maps.Equal(cr.done, flat.done) {
		t.Fatalf("checkpointed job (ref %q): results %v, want %v", cr.ref, cr.done, flat.done)
	}
	other := hostfile(t, "n1 slots=1\nn2 slots=3\n")
	re := collResults(t, "restarted", startProg(t, "gompi-restart", "-s", "0", "--hostfile", other, filepath.Join(dir, cr.ref)))
	wantComps(t, "restarted", re, "basic")
	if !maps.Equal(re.done, flat.done) {
		t.Fatalf("job restarted on n1:1,n2:3: results %v, want %v", re.done, flat.done)
	}
}
