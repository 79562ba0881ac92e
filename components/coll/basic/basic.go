// Package basic is the coll component of the flat algorithms (package
// coll's Barrier, Bcast, Reduce and Allreduce): every member treated
// alike wherever it runs, contributions combined in an order fixed by the
// communicator's size and root alone. It applies to every communicator,
// takes every call, and is the default.
package basic

import (
	"context"

	"gompi/frameworks/coll"
	"gompi/mca"
)

// Priority is the default priority: below any component that knows
// better for a communicator (han).
const Priority = 10

// New returns the basic coll component.
func New() mca.Component[coll.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: coll.Name, Name: "basic",
		Description: "Flat collectives (dissemination barrier, binomial trees, recursive doubling and ring allreduce): results depend only on the communicator's size and root",
		Priority:    Priority,
	}, mca.Module[coll.Module](module{}))
}

// module is stateless: the same operations serve every communicator.
type module struct{}

func (module) Comm(coll.Comm) (any, error) { return ops{}, nil }

type ops struct{}

func (ops) Barrier(ctx context.Context, c coll.Comm, tag int) error {
	return coll.Barrier(ctx, c, tag)
}

func (ops) Bcast(ctx context.Context, c coll.Comm, tag int, buf []byte, root int) error {
	return coll.Bcast(ctx, c, tag, buf, root)
}

func (ops) Reduce(ctx context.Context, c coll.Comm, tag int, send, recv []byte, red coll.Reduction, root int) error {
	return coll.Reduce(ctx, c, tag, send, recv, red, root)
}

func (ops) Allreduce(ctx context.Context, c coll.Comm, tag int, send, recv []byte, red coll.Reduction) error {
	return coll.Allreduce(ctx, c, tag, send, recv, red)
}

// Interface guards.
var (
	_ coll.Barrierer  = ops{}
	_ coll.Bcaster    = ops{}
	_ coll.Reducer    = ops{}
	_ coll.Allreducer = ops{}
)
