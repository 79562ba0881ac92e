package daemon

import (
	"strings"
	"testing"

	"gompi/rte/control"
	pb "gompi/rte/control/proto"
)

// secretScript prints what a rank finds on its secret descriptor, then
// its environment after a marker line.
const secretScript = `cat <&3; echo; echo ---env---; env`

// rankOutput gathers the standard output of rank until it exited.
func (h *harness) rankOutput(rank int32) string {
	h.t.Helper()
	h.waitSent(1, "Exited of the rank", func(m *pb.DaemonMessage) bool {
		return m.GetExited() != nil && m.GetExited().Rank == rank
	})
	var b strings.Builder
	for _, m := range h.sentNow(func(m *pb.DaemonMessage) bool { return m.GetOutput() != nil }) {
		if o := m.GetOutput(); o.Rank == rank && o.Stream == pb.Stream_STREAM_STDOUT {
			b.Write(o.Data)
		}
	}
	return b.String()
}

// checkSecrets checks that a rank's output (secretScript's) shows want
// on its descriptor and neither secret in its environment.
func checkSecrets(t *testing.T, out string, want control.RankSecrets) {
	t.Helper()
	pipe, env, ok := strings.Cut(out, "---env---\n")
	if !ok {
		t.Fatalf("rank output %q has no environment", out)
	}
	if pipe != want.Text()+"\n" {
		t.Errorf("the rank's descriptor held %q, want the job's control secret and the launch's data-plane secret", pipe)
	}
	if strings.Contains(env, want.Control.Hex()) || strings.Contains(env, want.Data.Hex()) {
		t.Errorf("a secret is in the rank's environment:\n%s", env)
	}
}

// TestHarnessRankSecrets: a rank reads, on its descriptor, the job's
// control secret and the data-plane secret its Launch carried, and finds
// neither in its environment.
func TestHarnessRankSecrets(t *testing.T) {
	forEachShape(t, func(t *testing.T, h *harness) {
		h.launch(1, secretScript, 0)
		checkSecrets(t, h.rankOutput(0), control.RankSecrets{Control: h.d.secret, Data: h.data})
	})
}

// TestHarnessLaunchWithoutDataSecret: a Launch without a data-plane
// secret starts no rank (its ranks could prove nothing to each other)
// and says why.
func TestHarnessLaunchWithoutDataSecret(t *testing.T) {
	h := newHarness(t)
	h.d.handle(t.Context(), &pb.HNPMessage{Body: &pb.HNPMessage_Launch{Launch: &pb.Launch{
		Program: "/bin/sh", Args: []string{"-c", "exit 0"}, Size: 1, Ranks: []int32{0}, DataSecret: []byte("short")}}})
	s := h.waitSent(1, "Started", isStarted)[0].GetStarted()
	if s.Pid != 0 || !strings.Contains(s.Error, "data-plane secret") {
		t.Errorf("Started %+v, want no process and an error naming the data-plane secret", s)
	}
}

// TestHarnessMigratedRankSecrets: a rank a migration starts here gets the
// data-plane secret its migration Launch carries (gompirun sends the
// running generation's, which the ranks it joins prove), with the job's
// control secret.
func TestHarnessMigratedRankSecrets(t *testing.T) {
	h := newHarness(t)
	h.launch(2, secretScript, 0)
	moved, err := control.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	h.d.handle(t.Context(), &pb.HNPMessage{Body: &pb.HNPMessage_Launch{Launch: &pb.Launch{
		Migrate: true, Size: 2, Ranks: []int32{1}, RankNodes: []string{"n1", "n1"}, DataSecret: moved.Bytes()}}})
	h.waitSent(2, "Started", isStarted)
	checkSecrets(t, h.rankOutput(1), control.RankSecrets{Control: h.d.secret, Data: moved})
}
