package hnp

import "fmt"

// The job's, its daemons' and its ranks' states. Their names are what
// gompi-ps shows, and what refusals say ("the job is aborting").

// jobState is where the job is in its life.
type jobState int

const (
	jobLaunching jobState = iota // daemons starting
	jobRunning
	jobAborting  // ranks being killed
	jobFinishing // daemons told to leave
	jobDone
)

var jobStateNames = [...]string{"launching", "running", "aborting", "finishing", "done"}

func (s jobState) String() string { return stateName(jobStateNames[:], int(s), "job") }

// daemonState is one daemon as the job sees it.
type daemonState int

const (
	daemonStarting daemonState = iota // launched, not attached yet
	daemonRunning
	daemonBreaking // its stream broke; its process's exit is awaited
	daemonLeaving  // told to leave
	daemonGone     // left
	daemonLost
)

var daemonStateNames = [...]string{"starting", "running", "breaking", "leaving", "gone", "lost"}

func (s daemonState) String() string { return stateName(daemonStateNames[:], int(s), "daemon") }

// rankState is one rank as the job sees it.
type rankState int

const (
	rankPending rankState = iota // its daemon is not told to start it yet
	rankRunning
	rankConnected // initialized
	rankFinalizing
	rankExited
	rankKilled
	rankFailed
	rankLost
)

var rankStateNames = [...]string{"pending", "running", "connected", "finalizing", "exited", "killed", "failed", "lost"}

func (s rankState) String() string { return stateName(rankStateNames[:], int(s), "rank") }

func stateName(names []string, i int, what string) string {
	if i < 0 || i >= len(names) {
		return fmt.Sprintf("%s state %d", what, i)
	}
	return names[i]
}
