// Package snapcnone is the SnapC component for C/R off: every checkpoint
// request is refused with snapc.ErrDisabled, whose text says how to run the
// job with C/R on.
package snapcnone

import (
	"context"
	"fmt"

	"gompi/frameworks/snapc"
	"gompi/mca"
)

// Priority is the component's default priority: the lowest, so a real
// coordinator that is available wins.
const Priority = 1

type component struct{}

// New returns the none SnapC component.
func New() mca.Component[snapc.Module] { return component{} }

func (component) Info() mca.ComponentInfo {
	return mca.ComponentInfo{
		Framework:   snapc.Name,
		Name:        "none",
		Description: "No snapshot coordination (C/R off): checkpoint requests are refused",
		Priority:    Priority,
		Origin:      "built-in",
	}
}

func (component) Query(_ context.Context, q mca.Query) (snapc.Module, int, error) {
	return module{}, q.Priority, nil
}

type module struct{}

func (module) Checkpoint(context.Context, snapc.Request) (snapc.Result, error) {
	return snapc.Result{}, fmt.Errorf("snapc/none: checkpoint: %w", snapc.ErrDisabled)
}

var (
	_ mca.Component[snapc.Module] = component{}
	_ snapc.Module                = module{}
)
