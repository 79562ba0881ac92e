// Package full is the SnapC component that coordinates checkpoints (Open
// MPI's snapc/full): a global coordinator in gompirun turns each request
// into rounds of requests to one local coordinator per node (in gompid),
// which drive the application coordinators inside the ranks (package cr,
// over the rank client's snapc.AppLink). The state machine is described
// with the contracts in frameworks/snapc (coord.go).
//
// It answers when checkpoint/restart is on (ft_cr_enabled, which
// ft-enable-cr sets) or when snapc names it; with C/R off, snapc none is
// left to refuse every request.
package full

import (
	"context"
	"fmt"
	"log/slog"

	"gompi/frameworks/snapc"
	"gompi/mca"
)

// Name of the component.
const Name = "full"

// Priority is the component's default priority (Open MPI's snapc/full: 20).
const Priority = 20

// ParamQueryTimeout bounds the first question of a checkpoint.
const ParamQueryTimeout = "snapc_full_query_timeout"

// New returns the full SnapC component.
func New() mca.Component[snapc.Module] { return newComponent(testHooks) }

// newComponent returns snapc/full; hooks registers the test hooks'
// parameters (hook.go): set in builds with -tags gompitest and in the
// package's own tests, never in the binaries users get.
func newComponent(hooks bool) mca.Component[snapc.Module] {
	params := []mca.ParamSpec{
		{Name: ParamQueryTimeout, Type: mca.Duration, Default: "60s", Level: mca.LevelTuner,
			Help: "How long each rank has to answer the first question of a checkpoint (its safe-point count); a rank that does not answer fails the request. 0 means no limit"},
	}
	if hooks {
		params = append(params, mca.ParamSpec{Name: ParamPauseAt, Type: mca.String, Level: mca.LevelDev + 2,
			Help: "Test hook, not a feature: pause a checkpoint at this point (query, seq, write, local, sync, commit, committed; point:seq for one sequence) until the test kills a process"})
	}
	return mca.NewComponent(mca.ComponentInfo{Framework: snapc.Name, Name: Name,
		Description: "Full snapshot coordination: a global coordinator in gompirun, a local one in each gompid, an application coordinator in each rank",
		Version:     "1.0.0",
		Priority:    Priority,
		Params:      params,
	}, query)
}

// query answers when checkpoint/restart is on or snapc names full.
func query(_ context.Context, q mca.Query) (snapc.Module, int, error) {
	if err := q.SkipUnlessCR(snapc.Name, Name); err != nil {
		return nil, 0, err
	}
	if q.Values.Has(ParamPauseAt) { // a build with the test hooks
		if _, err := ParsePausePoint(q.Values.String(ParamPauseAt)); err != nil {
			return nil, 0, err
		}
	}
	return module{}, q.Priority, nil
}

// module is the selected component before it is bound to a job: gompirun
// makes it the job's global coordinator, gompid a node's local one.
type module struct{}

// Checkpoint refuses: checkpoints are run by the global coordinator that
// NewGlobal returns, in gompirun.
func (module) Checkpoint(context.Context, snapc.Request) (snapc.Result, error) {
	return snapc.Result{}, fmt.Errorf("snapc/full: checkpoint: %w (ask gompirun: gompi-checkpoint PID)", snapc.ErrNotCoordinator)
}

func (module) NewGlobal(job snapc.JobSpec, link snapc.NodeLink) (snapc.Global, error) {
	return newGlobal(job, link)
}

func (module) NewLocal(node snapc.NodeSpec, port snapc.AppPort) (snapc.Local, error) {
	return newLocal(node, port)
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

var (
	_ snapc.Coordinator = module{}
)
