// Package errmgr is the Error Manager framework: what a job does when a
// rank or a node fails, or is predicted to. Its components form a stack,
// ordered by priority: each sees the fault and the status vector left by
// those above it, so a light policy (migration) can act first and a heavier
// one (restart from the last checkpoint) only if needed. default, which
// aborts the job with a report naming rank, node and cause, is always last.
//
// Components: default, sustain, rollback, autor and crmig.
package errmgr

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// Name of the framework, and of its selection parameter.
const Name = "errmgr"

// Kind is what happened.
type Kind int

const (
	ProcExited   Kind = iota // a rank exited with a non-zero status
	ProcSignaled             // a rank was killed by a signal
	NodeLost                 // a daemon stopped answering heartbeats or died
	Predicted                // a fault is announced ahead (gompi-migrate, a monitor)
)

var kindNames = [...]string{"exited", "signaled", "node lost", "predicted"}

func (k Kind) String() string {
	if int(k) >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Fault is one failure.
type Fault struct {
	Kind     Kind           `json:"kind"`
	Rank     int            `json:"rank"` // -1 for a node fault
	Node     string         `json:"node"`
	ExitCode int            `json:"exit_code,omitempty"`
	Signal   syscall.Signal `json:"signal,omitempty"`
	Time     time.Time      `json:"time"`
	Detail   string         `json:"detail,omitempty"`
	// Predict is set for a Predicted fault.
	Predict *Prediction `json:"predict,omitempty"`
}

// Describe says what happened in words a user reads in a job's output.
func (f Fault) Describe() string {
	who := fmt.Sprintf("rank %d on node %s", f.Rank, f.Node)
	if f.Rank < 0 {
		who = "node " + f.Node
	}
	plural := false
	if p := f.Predict; p != nil && f.Kind == Predicted {
		who, plural = p.describe()
	}
	var what string
	switch f.Kind {
	case ProcExited:
		what = fmt.Sprintf("exited with status %d", f.ExitCode)
	case ProcSignaled:
		what = fmt.Sprintf("was killed by signal %d (%v)", int(f.Signal), f.Signal)
	case NodeLost:
		what = "was lost"
	case Predicted:
		what = "is predicted to fail"
		if plural {
			what = "are predicted to fail"
		}
	default:
		what = f.Kind.String()
	}
	if f.Detail != "" {
		what += ": " + f.Detail
	}
	return who + " " + what
}

// Decision is a component's answer to a fault.
type Decision int

const (
	Pass      Decision = iota // not mine: let the next component act
	Recovered                 // handled; the job goes on
	Abort                     // the job must end
)

var decisionNames = [...]string{"pass", "recovered", "abort"}

func (d Decision) String() string {
	if int(d) >= 0 && int(d) < len(decisionNames) {
		return decisionNames[d]
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// Status is the status vector passed down the stack: what the components
// above have seen and done about the current fault.
type Status struct {
	Faults  []Fault  // every fault of this episode, oldest first
	Actions []string // what each component did, "component: action"
	Report  string   // set with Abort: the message the job ends with
}

// Module is one policy of the stack.
type Module interface {
	// Handle reacts to a fault and records what it did in st.
	Handle(ctx context.Context, f Fault, st *Status) (Decision, error)
}
