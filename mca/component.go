package mca

import (
	"context"
	"slices"
)

// OriginBuiltin is the Origin of a component compiled into gompi (a
// plugin's Origin is the path of its binary).
const OriginBuiltin = "built-in"

// QueryFunc is a component's answer to selection (Component.Query).
type QueryFunc[M any] func(ctx context.Context, q Query) (M, int, error)

// NewComponent returns the component info describes, whose Query is query:
// the one shape of a built-in component, so each component package says
// only what is its own (its description, parameters and query rule). An
// empty info.Origin is OriginBuiltin. A component that holds state or
// offers more than Info and Query keeps a type of its own.
func NewComponent[M any](info ComponentInfo, query QueryFunc[M]) Component[M] {
	if info.Origin == "" {
		info.Origin = OriginBuiltin
	}
	return component[M]{info: info, query: query}
}

// component is what NewComponent returns.
type component[M any] struct {
	info  ComponentInfo
	query QueryFunc[M]
}

// Info returns a copy whose Params a caller may change without touching
// the component's.
func (c component[M]) Info() ComponentInfo {
	info := c.info
	info.Params = slices.Clone(c.info.Params)
	return info
}

func (c component[M]) Query(ctx context.Context, q Query) (M, int, error) { return c.query(ctx, q) }

// Module returns a QueryFunc that answers every query with m at the
// configured priority: the query of a component whose module needs no
// parameters and always applies (the "none" components, errmgr default).
func Module[M any](m M) QueryFunc[M] {
	return func(_ context.Context, q Query) (M, int, error) { return m, q.Priority, nil }
}

// Interface guard.
var _ Component[int] = component[int]{}
