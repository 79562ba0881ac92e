package errmgr

import (
	"syscall"
	"testing"
)

func TestDescribe(t *testing.T) {
	tests := []struct {
		f    Fault
		want string
	}{
		{Fault{Kind: ProcExited, Rank: 2, Node: "n2", ExitCode: 3}, "rank 2 on node n2 exited with status 3"},
		{Fault{Kind: ProcSignaled, Rank: 0, Node: "n1", Signal: syscall.SIGKILL}, "rank 0 on node n1 was killed by signal 9 (killed)"},
		{Fault{Kind: NodeLost, Rank: -1, Node: "n3", Detail: "no heartbeat"}, "node n3 was lost: no heartbeat"},
		{Fault{Kind: Predicted, Rank: -1, Node: "n2"}, "node n2 is predicted to fail"},
		{Fault{Kind: Predicted, Rank: -1, Predict: &Prediction{Ranks: []int{2, 5}}}, "ranks 2, 5 are predicted to fail"},
		{Fault{Kind: Predicted, Rank: -1, Predict: &Prediction{Ranks: []int{1}, Nodes: []string{"n2", "n3"}}, Detail: "announced with gompi-migrate"},
			"rank 1 and nodes n2, n3 are predicted to fail: announced with gompi-migrate"},
		{Fault{Kind: Predicted, Rank: -1, Predict: &Prediction{Wishes: []MigrateWish{{Rank: 3, Near: -1, OffNode: true}}}}, "rank 3 is predicted to fail"},
	}
	for _, tt := range tests {
		if got := tt.f.Describe(); got != tt.want {
			t.Errorf("Describe(%+v) = %q, want %q", tt.f, got, tt.want)
		}
	}
}
