// Package crsself is the application-level CRS: a rank saves itself, at a
// safe point, from state it registered (package cr: values given to
// cr.Protect, files written by cr.OnCheckpoint callbacks). It can only
// save its own process: another PID is refused with
// crs.ErrNotCheckpointable, as Open MPI's self could only call its own
// process's callbacks. A restart re-runs the program unchanged; the
// program restores itself through package cr.
//
// The state comes from package cr, which provisions the rank's module
// with a crs.Host whose Rank.Save writes the registered state into a
// directory and names the files written; Checkpoint calls it. Close drops
// it. Provisioned anywhere but in a rank, the module refuses with
// crs.ErrNotCheckpointable.
//
// Like Open MPI's, it cannot stop a process once saved (--stop): the
// process saves itself and must go on running to do anything else.
package crsself

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"gompi/frameworks/crs"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// Name of the component.
const Name = "self"

// Priority is the component's default priority: above none.
const Priority = 20

// New returns the self CRS component.
func New() mca.Component[crs.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: crs.Name, Name: Name,
		Description: "Application-level checkpoint: a rank saves the state it registered with package cr at a safe point",
		Version:     "1.0.0",
		Priority:    Priority,
	}, query)
}

// query answers in ranks of a job with checkpoint/restart on.
func query(_ context.Context, q mca.Query) (crs.Module, int, error) {
	if err := q.SkipUnlessRankCR(crs.Name, Name, "a rank saves itself from inside"); err != nil {
		return nil, 0, err
	}
	return NewModule(), q.Priority, nil
}

// Module saves the process it lives in.
type Module struct {
	mu   sync.Mutex
	save func(ctx context.Context, dir string) ([]string, error)
}

// NewModule returns a module with no state source: Provision gives it one.
func NewModule() *Module { return &Module{} }

// Provision gives the module the rank's registered state (h.Rank). One
// source at a time: a second Provision before Close is refused.
func (m *Module) Provision(_ context.Context, h crs.Host) error {
	if h.Rank == nil || h.Rank.Save == nil {
		return fmt.Errorf("crs/self: provision: %w: crs=self saves a rank from inside, from its registered state; this host is not a rank", crs.ErrNotCheckpointable)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.save != nil {
		return errors.New("crs/self: provision: a state source is already attached")
	}
	m.save = h.Rank.Save
	return nil
}

// Close drops the state source: the module is left as NewModule made it.
func (m *Module) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.save = nil
	return nil
}

// Checkpoint saves this process into req.Dir through the attached source.
func (m *Module) Checkpoint(ctx context.Context, req crs.CheckpointRequest) (crs.CheckpointResult, error) {
	fail := func(err error) (crs.CheckpointResult, error) {
		return crs.CheckpointResult{}, fmt.Errorf("crs/self: checkpoint pid %d: %w", req.PID, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := crs.Alive(req.PID); err != nil {
		return fail(err)
	}
	if req.PID != os.Getpid() {
		return fail(fmt.Errorf("%w: crs=self saves only the process it runs in (pid %d), from its registered state; save another process with a transparent CRS", crs.ErrNotCheckpointable, os.Getpid()))
	}
	if req.Options.Stop {
		return fail(fmt.Errorf("%w: crs=self cannot stop a process once saved (--stop; Open MPI's self could not either): checkpoint without --stop, or with --term to end the job", crs.ErrNotCheckpointable))
	}
	m.mu.Lock()
	save := m.save
	m.mu.Unlock()
	if save == nil {
		return fail(fmt.Errorf("%w: the program registered no state (crs=self needs cr.Protect, cr.OnCheckpoint or cr.SafePoint)", crs.ErrNotCheckpointable))
	}
	files, err := save(ctx, req.Dir)
	if err != nil {
		return fail(err)
	}
	res := crs.CheckpointResult{State: crs.StateContinue, Files: files, Meta: map[string]string{"self_files": strconv.Itoa(len(files))}}
	if req.Options.Term {
		res.State = crs.StateTerm
	}
	return res, nil
}

// Restart returns the original launch unchanged: the program restarts
// from the beginning and restores itself from the snapshot (package cr),
// which must be one crs=self wrote.
func (m *Module) Restart(ctx context.Context, req crs.RestartRequest) (crs.Launch, error) {
	if err := ctx.Err(); err != nil {
		return crs.Launch{}, fmt.Errorf("crs/self: restart from %s: %w", req.Dir, err)
	}
	meta, err := snapshot.ReadLocal(req.Dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return crs.Launch{}, fmt.Errorf("crs/self: restart from %s: %w: no %s there", req.Dir, crs.ErrNoSnapshot, snapshot.LocalMetaFile)
		}
		return crs.Launch{}, fmt.Errorf("crs/self: restart from %s: %w", req.Dir, err)
	}
	if meta.CRS != Name {
		return crs.Launch{}, fmt.Errorf("crs/self: restart from %s: %w: the snapshot was taken by crs=%s", req.Dir, crs.ErrNoSnapshot, meta.CRS)
	}
	if len(req.Launch.Argv) == 0 {
		return crs.Launch{}, fmt.Errorf("crs/self: restart from %s: no original launch to re-run (empty argv)", req.Dir)
	}
	return req.Launch, nil
}

var (
	_ crs.Module                = (*Module)(nil)
	_ mca.Provisioner[crs.Host] = (*Module)(nil)
	_ io.Closer                 = (*Module)(nil)
)
