package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// examples/resilient is a ULFM-style solver: when a rank dies the
// survivors revoke the communicator, agree, shrink it, spread the saved
// field over those left and go on; it prints the serial solve's checksum
// whatever failed.

var resilientDone = regexp.MustCompile(`^resilient: done: \d+ points, \d+ iterations, checksum [0-9a-f]{16}$`)

// resilientRun runs the solver under errmgr sustain and returns its done
// line, with the job's output.
func resilientRun(t *testing.T, np string, extra ...string) (string, []string) {
	t.Helper()
	buildSustain(t)
	args := append([]string{"--mca", "errmgr", "sustain,default", "-np", np, "--hostfile", hostfile(t, twoNodes),
		filepath.Join(sustainBin, "resilient"), "-points", "3000", "-iters", "300", "-every", "10"}, extra...)
	j := startSustain(t, args...)
	code, out, errs := j.wait()
	if code != 0 {
		t.Fatalf("exit status %d, want 0; stdout:\n%s\nstderr:\n%s", code, strings.Join(out, "\n"), errs)
	}
	for _, l := range out {
		if resilientDone.MatchString(l) {
			return l, out
		}
	}
	t.Fatalf("no done line; stdout:\n%s\nstderr:\n%s", strings.Join(out, "\n"), errs)
	return "", nil
}

func TestResilientSolver(t *testing.T) {
	want, _ := resilientRun(t, "2")
	for _, tt := range []struct{ name, rank, at string }{
		{"a rank of the other node dies mid-solve", "2", "105"},
		{"the first rank dies right after a save", "0", "50"},
		{"the last rank dies at the start", "3", "0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, out := resilientRun(t, "4", "-crash-rank", tt.rank, "-crash-at", tt.at)
			if got != want {
				t.Errorf("got %q, want the failure-free run's %q", got, want)
			}
			recovered := regexp.MustCompile(`^resilient: failure at iteration \d+ \(.*\): 3 ranks left \(lost world ranks \[` + tt.rank + `\]\); going on from iteration \d+$`)
			found := false
			for _, l := range out {
				found = found || recovered.MatchString(l)
			}
			if !found {
				t.Errorf("no recovery line for rank %s in:\n%s", tt.rank, strings.Join(out, "\n"))
			}
		})
	}
}
