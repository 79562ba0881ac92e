package jobs

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	pb "gompi/rte/control/proto"
)

// Job is one running job as gompi-ps reports it: its record and, when its
// gompirun answered, its live state.
type Job struct {
	Record
	State   string        `json:"state"`
	Error   string        `json:"error,omitempty"` // why the live state is missing
	Daemons []DaemonState `json:"daemons,omitempty"`
	Ranks   []RankState   `json:"ranks,omitempty"`
}

// DaemonState is one node's daemon.
type DaemonState struct {
	Node     string `json:"node"`
	PID      int    `json:"pid"`
	Hostname string `json:"hostname,omitempty"`
	State    string `json:"state"`
}

// RankState is one rank.
type RankState struct {
	Rank     int    `json:"rank"`
	Node     string `json:"node"`
	PID      int    `json:"pid"`
	State    string `json:"state"`
	ExitCode int    `json:"exit_code,omitempty"`
	Signal   int    `json:"signal,omitempty"`
}

// Query asks the HNP of r for its live state, within ctx.
func Query(ctx context.Context, r Record) Job {
	j := Job{Record: r, State: "unreachable"}
	conn, err := Dial(r.PID)
	if err != nil {
		j.Error = err.Error()
		return j
	}
	defer conn.Close()
	st, err := pb.NewToolClient(conn).Status(ctx, &pb.StatusRequest{}, grpc.WaitForReady(true))
	if err != nil {
		j.Error = fmt.Sprintf("jobs: status of pid %d: %v", r.PID, err)
		return j
	}
	j.State = st.State
	for _, d := range st.Daemons {
		j.Daemons = append(j.Daemons, DaemonState{Node: d.Node, PID: int(d.Pid), Hostname: d.Hostname, State: d.State})
	}
	for _, rk := range st.Ranks {
		j.Ranks = append(j.Ranks, RankState{Rank: int(rk.Rank), Node: rk.Node, PID: int(rk.Pid), State: rk.State,
			ExitCode: int(rk.ExitCode), Signal: int(rk.Signal)})
	}
	return j
}
