// Package none is the CRS component used when a process cannot be
// checkpointed (C/R off, or no CRS can save it). Unlike Open MPI's
// crs/none, which reported success and saved nothing, it refuses with
// crs.ErrNotCheckpointable and says what to select instead, so a checkpoint
// never "succeeds" without state.
package crsnone

import (
	"context"
	"fmt"

	"gompi/frameworks/crs"
	"gompi/mca"
)

// Name of the component.
const Name = "none"

// New returns the none CRS component.
func New() mca.Component[crs.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: crs.Name, Name: Name,
		Description: "No checkpoint/restart: every checkpoint request is refused with advice on what to select instead",
		Version:     "1.0.0",
		Priority:    1,
	}, mca.Module[crs.Module](module{}))
}

type module struct{}

func (module) Checkpoint(ctx context.Context, req crs.CheckpointRequest) (crs.CheckpointResult, error) {
	if err := ctx.Err(); err != nil {
		return crs.CheckpointResult{}, fmt.Errorf("crs/none: checkpoint pid %d: %w", req.PID, err)
	}
	if err := crs.Alive(req.PID); err != nil {
		return crs.CheckpointResult{}, fmt.Errorf("crs/none: checkpoint pid %d: %w", req.PID, err)
	}
	return crs.CheckpointResult{}, fmt.Errorf("crs/none: checkpoint pid %d: %w: checkpoint/restart is off for this process; select crs=self and register state with cr.Protect, or run with -am ft-enable-cr",
		req.PID, crs.ErrNotCheckpointable)
}

func (module) Restart(ctx context.Context, req crs.RestartRequest) (crs.Launch, error) {
	if err := ctx.Err(); err != nil {
		return crs.Launch{}, fmt.Errorf("crs/none: restart from %s: %w", req.Dir, err)
	}
	return crs.Launch{}, fmt.Errorf("crs/none: restart from %s: %w: the none component never writes snapshots; restart from a snapshot taken with crs=self or another checkpointing CRS",
		req.Dir, crs.ErrNoSnapshot)
}

var (
	_ crs.Module = module{}
)
