package errmgr

import (
	"context"
	"errors"
)

// ErrJobOver is wrapped by Runtime calls made once the job has ended (or
// is ending): there is nothing left to act on.
var ErrJobOver = errors.New("the job is over")

// Runtime is what a policy may ask of the job it watches; gompirun
// implements it. Its methods are safe to call from a module's Handle
// (which runs outside the job's own loop) and from any goroutine.
// Policies that restart or move ranks need more of the job; those
// methods are added here as those policies arrive, so a module must only
// rely on the methods it uses.
type Runtime interface {
	// Size is the number of ranks of the job.
	Size() int
	// RanksOf returns the ranks the job placed on node, ascending (nil
	// for a node the job does not use). A NodeLost fault names only the
	// node; these are the ranks lost with it.
	RanksOf(node string) []int
	// NotifyFailed declares ranks failed for good and tells every rank
	// still running, through its daemon: their operations involving a
	// failed rank then end with an error (mpi.ErrProcFailed) instead of
	// waiting, and the job's runtime collectives (the barrier of
	// mpi.Finalize) no longer wait for them. why says what happened, for
	// the ranks' error messages. The ranks must have ended (or their node
	// been lost): a failed rank is not stopped, and the survivors count on
	// it never sending again. It returns once the job has recorded the
	// failure and queued the notices to the daemons, not when every rank
	// has read them; an error wrapping ErrJobOver means the job ended
	// first. Naming a rank already declared failed is no error.
	NotifyFailed(ctx context.Context, ranks []int, why string) error
}

// Host is what gompirun provisions a Module with when the module acts on
// the job rather than only deciding (mca.Provisioner[Host]): the job it
// watches. gompirun provisions every stacked module that takes a Host
// before the job's ranks start and before any fault can reach Handle; a
// recovery starts a new run of the job, and the modules are provisioned
// again with the new run before it starts, so a module keeps the newest
// Host (and may reset what it counts per run).
type Host struct {
	// Job is the run of the job the module acts on.
	Job Runtime
}
