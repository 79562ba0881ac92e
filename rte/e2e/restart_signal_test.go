package e2e

import (
	"strings"
	"syscall"
	"testing"
)

// SIGTERM to a real gompi-restart --fork while it waits for the job it
// restarted ends it promptly: the signal is passed on to gompirun, which
// forwards it to the ranks, and gompi-restart ends with gompirun's status,
// leaving no rank behind. (The parse and verify phases are checked in
// tools/restart and frameworks/sstore/snapshot with cancelled contexts:
// with bounded files they take milliseconds, too short to signal into.)
func TestRestartForkSignalled(t *testing.T) {
	dir := t.TempDir()
	j := crJob(t, dir)
	ref := refOf(t, j, dir)
	if code, out, errs := tool(t, "gompi-checkpoint", pidArg(j)); code != 0 {
		t.Fatalf("gompi-checkpoint: status %d\n%s%s", code, out, errs)
	}
	j.signal(syscall.SIGINT)
	if code, _, errs := j.wait(); code != 130 {
		t.Fatalf("job: status %d\n%s", code, errs)
	}
	r := startProg(t, "gompi-restart", "--fork", ref.Path())
	r.waitReady(4)
	r.signal(syscall.SIGTERM)
	code, _, errs := r.wait()
	if code != 128+int(syscall.SIGTERM) || !strings.Contains(errs, "gompirun: caught signal 15") {
		t.Errorf("gompi-restart --fork after SIGTERM: status %d, want 143 from gompirun ending on the forwarded signal; stderr:\n%s", code, errs)
	}
	noSurvivors(t, "after SIGTERM to gompi-restart --fork", func() []int { return marked(r.mark) })
}
