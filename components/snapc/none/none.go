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

// New returns the none SnapC component.
func New() mca.Component[snapc.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: snapc.Name, Name: "none",
		Description: "No snapshot coordination (C/R off): checkpoint requests are refused",
		Priority:    Priority,
	}, mca.Module[snapc.Module](module{}))
}

type module struct{}

func (module) Checkpoint(context.Context, snapc.Request) (snapc.Result, error) {
	return snapc.Result{}, fmt.Errorf("snapc/none: checkpoint: %w", snapc.ErrDisabled)
}

var (
	_ snapc.Module = module{}
)
