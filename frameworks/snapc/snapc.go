// Package snapc is the Snapshot Coordination framework: the life cycle of a
// checkpoint across the job. The global coordinator (in gompirun) turns a
// request into local requests to the daemons, which drive the application
// coordinators inside the ranks, then writes the global metadata and
// commits the sequence number last.
//
// Components: full (the global coordinator in gompirun, a local one in
// each gompid, and the application coordinators of package cr in the
// ranks; -am ft-enable-cr selects it) and none (C/R off: every request is
// refused with a message saying how to turn it on).
package snapc

import (
	"context"
	"errors"
	"time"

	"gompi/frameworks/crs"
)

// Name of the framework, and of its selection parameter.
const Name = "snapc"

// Request asks for one global checkpoint.
type Request struct {
	Options crs.Options `json:"options"`
	// Ranks makes the request a migration's checkpoint: every rank is
	// still brought to the target safe point with its channels drained,
	// but only these ranks are saved; the others are held there, unsaved.
	// Once committed (as a sequence marked Migrate, not a restart point)
	// every rank stays held until Global.Release. Empty: a checkpoint of
	// the whole job. For a job whose CRS saves ranks from outside
	// (JobSpec.FromOutside) there is no safe point: every rank is
	// quiesced now, these ranks are dumped, and every rank is held
	// quiesced, with no socket, until the Release.
	Ranks []int `json:"ranks,omitempty"`
}

// Release ends a committed migration checkpoint: the ranks in Leave end
// (they run again elsewhere, started from their local snapshots), the
// others resume, reaching the moved ranks at their new endpoints (Peers,
// by rank: each one's new modex entry; ranks quiesced from outside find
// them in the exchange of addresses that follows every suspension and
// need none). A Release with nothing in it
// resumes every rank where it was (the migration was abandoned).
type Release struct {
	Leave []int                     `json:"leave,omitempty"`
	Peers map[int]map[string]string `json:"peers,omitempty"`
}

// Result is a committed global snapshot.
type Result struct {
	Ref      string        `json:"ref"` // gompi_global_snapshot_<job>.ckpt
	Dir      string        `json:"dir"` // the global snapshot directory holding Ref
	Seq      int           `json:"seq"`
	Duration time.Duration `json:"duration"`
}

// Module is a selected coordinator.
type Module interface {
	// Checkpoint runs one global checkpoint and returns once its sequence is
	// committed. Only the head node process coordinates; elsewhere it
	// returns an error wrapping ErrNotCoordinator.
	Checkpoint(ctx context.Context, req Request) (Result, error)
}

var (
	// ErrDisabled: the job runs without C/R.
	ErrDisabled = errors.New("checkpoint/restart is not enabled for this job; run it with -am ft-enable-cr")
	// ErrNotCoordinator: this process does not coordinate checkpoints.
	ErrNotCoordinator = errors.New("not the global snapshot coordinator")
)
