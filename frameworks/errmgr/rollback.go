package errmgr

import (
	"context"
	"errors"
)

// In-job rollback (errmgr rollback): the survivors of a failure keep their
// processes and go back in place to a committed sequence; only the lost
// ranks are started anew, from the same sequence.

// RollbackView is what a rollback policy needs to know of the job to
// decide: the rollback runtime answers it when a fault arrives.
type RollbackView struct {
	// CRS is the job's checkpointer: "self" rolls back in place, any other
	// (criu) cannot.
	CRS string
	// Global are the committed sequences of the job's reference in global
	// storage, ascending (empty: none committed yet, or the reference
	// cannot be read).
	Global []int
	// Cached are, per node still up, the committed sequences its node
	// cache holds (sstore stage's sstore_stage_cache), ascending.
	Cached map[string][]int
	// Nodes are the job's nodes, with their ranks and whether their
	// daemon runs.
	Nodes []NodeInfo
	// Rolling is set while an earlier rollback has not ended (its ranks
	// have not all run again).
	Rolling bool
}

// Rollback asks the job to roll back in place.
type Rollback struct {
	// Seq is the committed sequence every rank returns to.
	Seq int
	// Lost are the ranks started anew, ascending; Place[r] is rank r's
	// node (its own when its daemon runs, else another up node).
	Lost  []int
	Place map[int]string
	// LostNodes are the nodes whose daemon is gone.
	LostNodes []string
	// Why is the fault, for the job's report.
	Why string
}

// RollBacker is implemented by a Runtime that can roll its job back in
// place (gompirun with C/R on).
type RollBacker interface {
	// RollbackView describes the job for a rollback decision.
	RollbackView(ctx context.Context) (RollbackView, error)
	// RollBack starts a rollback and returns once the job accepted it:
	// the survivors are told to go back to r.Seq and the lost ranks are
	// being started; they run again later (gompirun reports when). It
	// fails with an error wrapping ErrCannotRollBack when the job cannot
	// do it now (the policy then leaves the fault to the next one),
	// ErrJobOver when the job ended first.
	RollBack(ctx context.Context, r Rollback) error
}

// ErrCannotRollBack is wrapped by a RollBack the job cannot perform.
var ErrCannotRollBack = errors.New("cannot roll back in place")
