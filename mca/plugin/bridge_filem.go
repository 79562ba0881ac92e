package plugin

import (
	"context"

	"gompi/frameworks"
	"gompi/frameworks/filem"
	"gompi/mca"
)

// The FileM framework over the bridge, both ways: a FileM component in a
// plugin, and the host's FileM lent to a plugin's module (sstore.Host's).
// Its calls move files, so they are under the I/O bound.

var filemAdapter = adapter{
	methods: filemMethods,
	carrier: carry(func(s *frameworks.Set) *mca.Framework[filem.Module] { return s.FileM },
		func(r *remote, _ bool) filem.Module { return filemModule{filemCalls{r}, r} }),
}

type filemTransfers struct{ Transfers []filem.Transfer }

type filemPaths struct{ Paths []filem.Remote }

var filemMethods = methods{
	"Put": fn(func(ctx context.Context, m filem.Module, a filemTransfers, _ *scope) (none, error) {
		return none{}, m.Put(ctx, a.Transfers)
	}),
	"Get": fn(func(ctx context.Context, m filem.Module, a filemTransfers, _ *scope) (none, error) {
		return none{}, m.Get(ctx, a.Transfers)
	}),
	"Remove": fn(func(ctx context.Context, m filem.Module, a filemPaths, _ *scope) (none, error) {
		return none{}, m.Remove(ctx, a.Paths)
	}),
}

// filemCalls is a filem.Module on the other side of the bridge.
type filemCalls struct{ c caller }

func (f filemCalls) Put(ctx context.Context, ts []filem.Transfer) error {
	return f.c.call(ctx, dataIO, "Put", filemTransfers{ts}, nil)
}

func (f filemCalls) Get(ctx context.Context, ts []filem.Transfer) error {
	return f.c.call(ctx, dataIO, "Get", filemTransfers{ts}, nil)
}

func (f filemCalls) Remove(ctx context.Context, paths []filem.Remote) error {
	return f.c.call(ctx, dataIO, "Remove", filemPaths{paths}, nil)
}

// filemModule is a plugin's FileM module: its calls, and Close.
type filemModule struct {
	filemCalls
	*remote
}

var (
	_ filem.Module = filemCalls{}
	_ filem.Module = filemModule{}
)
