package errmgr

import (
	"context"
	"errors"
)

// Recovery is what a restart policy (autor) asks of the job: end every
// rank and start the whole job again from its last committed checkpoint,
// in the same gompirun.
type Recovery struct {
	// Lost are the ranks whose process or node failed.
	Lost []int
	// LostNodes are the nodes whose daemon is gone; nothing is placed
	// there again.
	LostNodes []string
	// SameNode lets a lost rank whose node is still up restart on that
	// node; otherwise it is placed on another one (a rank that crashed
	// may have been killed by its node).
	SameNode bool
	// Why is the fault, for the job's report.
	Why string
}

// Recoverer is implemented by a Runtime that can restart its job from a
// checkpoint (gompirun with C/R on).
type Recoverer interface {
	// Recover starts a recovery and returns the sequence the job restarts
	// from, once the job has accepted it; the ranks run again later. It
	// fails with an error wrapping ErrNoCheckpoint when nothing was
	// committed to restart from, ErrJobOver when the job ended first.
	Recover(ctx context.Context, r Recovery) (seq int, err error)
}

// ErrNoCheckpoint: the job has no committed checkpoint to restart from.
var ErrNoCheckpoint = errors.New("no committed checkpoint to restart from")
