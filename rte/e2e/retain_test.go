package e2e

import (
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestRetention: a job run with sstore_base_keep 2 keeps its two newest
// restart points as it checkpoints; gompi-checkpoint --remove and --prune
// given its PID go through its gompirun, never the only restart point;
// once the job has ended, given its reference, they act on the folder.
func TestRetention(t *testing.T) {
	dir := t.TempDir()
	j := crJob(t, dir, "--mca", "sstore_base_keep", "2")
	ref := refOf(t, j, dir)
	for i := 0; i < 4; i++ {
		if code, out, errs := tool(t, "gompi-checkpoint", pidArg(j)); code != 0 {
			t.Fatalf("gompi-checkpoint %d: status %d\n%s%s", i, code, out, errs)
		}
	}
	folders := func() []int {
		var out []int
		for seq := 0; seq < 10; seq++ {
			if _, err := os.Lstat(ref.SeqDir(seq)); err == nil {
				out = append(out, seq)
			}
		}
		return out
	}
	if yes, no := committed(t, ref); !slices.Equal(yes, []int{2, 3}) || len(no) != 0 || !slices.Equal(folders(), []int{2, 3}) {
		t.Fatalf("after 4 checkpoints with sstore_base_keep 2: committed %v, not %v, folders %v", yes, no, folders())
	}
	steps := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--prune", "--keep", "1", "--dry-run"}, 0, "Would remove from " + ref.String() + ": sequences 2\n"},
		{[]string{"--remove", "2"}, 0, "Removed from " + ref.String() + ": sequences 2\n"},
		{[]string{"--remove", "3"}, 1, "sequence 3 is the only restart point"},
		{[]string{"--remove", "9"}, 1, "no sequence 9"},
	}
	for _, s := range steps {
		code, out, errs := tool(t, "gompi-checkpoint", append(s.args, pidArg(j))...)
		if code != 0 {
			out = errs
		}
		if code != s.code || !strings.Contains(out, s.want) {
			t.Errorf("gompi-checkpoint %v PID: status %d\n%s\nwant %d and %q", s.args, code, out, s.code, s.want)
		}
	}
	// The job goes on numbering, and retention after its commit.
	if code, out, errs := tool(t, "gompi-checkpoint", pidArg(j)); code != 0 || !strings.HasPrefix(out, "Snapshot Ref.:   4 ") {
		t.Fatalf("gompi-checkpoint after the removals: status %d\n%s%s", code, out, errs)
	}
	j.signal(syscall.SIGINT)
	j.wait()
	code, out, errs := tool(t, "gompi-checkpoint", "--prune", "--keep", "1", ref.Path())
	if code != 0 || out != "Removed from "+ref.String()+": sequences 3\n" {
		t.Errorf("--prune on the reference: status %d\n%s%s", code, out, errs)
	}
	if yes, no := committed(t, ref); !slices.Equal(yes, []int{4}) || len(no) != 0 || !slices.Equal(folders(), []int{4}) {
		t.Errorf("at the end: committed %v, not %v, folders %v", yes, no, folders())
	}
}
