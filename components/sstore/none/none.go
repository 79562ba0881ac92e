// Package sstorenone is the SStore component for C/R off: there is nowhere
// to store a snapshot, so every call fails with an error wrapping
// sstore.ErrDisabled that says how to turn storage on.
package sstorenone

import (
	"context"
	"fmt"

	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// Priority is the component's default priority: the lowest, so any real
// storage strategy that is available wins.
const Priority = 1

// Hint is what every error of this component tells the user to do.
const Hint = "run the job with -am ft-enable-cr, which selects a storage strategy"

// New returns the none SStore component.
func New() mca.Component[sstore.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: sstore.Name, Name: "none",
		Description: "No stable storage (C/R off): every request is refused",
		Priority:    Priority,
	}, mca.Module[sstore.Module](module{}))
}

type module struct{}

func disabled(op string) error {
	return fmt.Errorf("sstore/none: %s: %w; %s", op, sstore.ErrDisabled, Hint)
}

func (module) LocalDir(_ context.Context, ref snapshot.Ref, seq, rank int) (string, error) {
	return "", disabled(fmt.Sprintf("local directory for rank %d of %s seq %d", rank, ref.Name, seq))
}

func (module) Sync(_ context.Context, ref snapshot.Ref, seq int, _ []sstore.Local) error {
	return disabled(fmt.Sprintf("sync %s seq %d", ref.Name, seq))
}

func (module) Fetch(_ context.Context, ref snapshot.Ref, seq, rank int) (string, error) {
	return "", disabled(fmt.Sprintf("fetch rank %d of %s seq %d", rank, ref.Name, seq))
}

func (module) Remove(_ context.Context, ref snapshot.Ref, seq int) error {
	return disabled(fmt.Sprintf("remove %s seq %d", ref.Name, seq))
}

var (
	_ sstore.Module = module{}
)
