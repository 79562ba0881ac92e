package plugin

import (
	"context"

	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/mca"
)

// The CRS framework over the bridge. Checkpoint and Restart pass paths,
// PIDs, options and metadata; the snapshot's bytes stay on disk. A CRS's
// Host (crs.Host) does not cross yet: a plugin's CRS module is not
// provisioned. How it will cross is in the package doc.

var crsAdapter = adapter{
	methods: crsMethods,
	carrier: carry(func(s *frameworks.Set) *mca.Framework[crs.Module] { return s.CRS },
		func(r *remote, _ bool) crs.Module { return crsModule{r} }),
}

var crsMethods = methods{
	"Checkpoint": fn(func(ctx context.Context, m crs.Module, a crs.CheckpointRequest, _ *scope) (crs.CheckpointResult, error) {
		return m.Checkpoint(ctx, a)
	}),
	"Restart": fn(func(ctx context.Context, m crs.Module, a crs.RestartRequest, _ *scope) (crs.Launch, error) {
		return m.Restart(ctx, a)
	}),
}

// crsModule is a plugin's CRS module.
type crsModule struct{ *remote }

func (m crsModule) Checkpoint(ctx context.Context, req crs.CheckpointRequest) (crs.CheckpointResult, error) {
	var res crs.CheckpointResult
	err := m.call(ctx, dataIO, "Checkpoint", req, &res)
	return res, err
}

func (m crsModule) Restart(ctx context.Context, req crs.RestartRequest) (crs.Launch, error) {
	var l crs.Launch
	err := m.call(ctx, dataIO, "Restart", req, &l)
	return l, err
}

var _ crs.Module = crsModule{}
