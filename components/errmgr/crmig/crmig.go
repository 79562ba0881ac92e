// Package crmig is the crmig ErrMgr component (the dissertation's process
// migration, section 4.5): when a fault is predicted (gompi-migrate, a
// fault monitor, a rank's cr.Migrate), the ranks at risk are checkpointed
// alone, the other ranks wait at their safe point, and the saved ranks are
// restarted on other nodes of the job (eager copy, no residual
// dependency on the node they left). The job goes on without a restart.
//
// It stands above sustain and autor in the stack and passes the fault on
// when migrating cannot help: when the fault is expected sooner than a
// migration would take (about twice the last checkpoint: saving the
// ranks, then restarting them), and when a failure interrupts the
// migration (the runtime abandons it, and autor recovers the job from its
// last committed checkpoint). Destinations follow, in order, a rank's own
// wish (cr.Migrate: a host, or the node of another rank), the suggested
// nodes (gompi-migrate --onto), else the least loaded node that is up and
// not predicted to fail (Place).
//
// crmig needs checkpoint/restart (-am ft-enable-cr); with it on, it is
// selected unless errmgr_crmig_enable is 0 and the errmgr selection does
// not name it.
package crmig

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"gompi/frameworks/errmgr"
	"gompi/mca"
)

// Name of the component.
const Name = "crmig"

// Priority is the component's default priority: above sustain (30) and
// autor (20), so moving ranks ahead of a fault is tried before running
// through it or restarting the job after it.
const Priority = 40

// ParamEnable turns the component on (the default) or off.
const ParamEnable = "errmgr_crmig_enable"

// New returns the crmig ErrMgr component.
func New() mca.Component[errmgr.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: errmgr.Name, Name: Name,
		Description: "Process migration: on a predicted fault, checkpoint only the ranks at risk and restart them on other nodes while the others wait",
		Version:     "1.0.0",
		Priority:    Priority,
		Params: []mca.ParamSpec{
			{Name: ParamEnable, Type: mca.Bool, Default: "1", Level: mca.LevelUser,
				Help: "Move ranks off nodes predicted to fail (gompi-migrate, cr.Migrate) while the job runs (also on when the errmgr selection names crmig); needs -am ft-enable-cr"},
		},
	}, query)
}

// query answers when C/R is on and the component is not turned off.
func query(_ context.Context, q mca.Query) (errmgr.Module, int, error) {
	if err := errmgr.SkipUnlessAsked(q, Name, ParamEnable, Name+",autor,"+errmgr.DefaultName, "moves ranks through checkpoints"); err != nil {
		return nil, 0, err
	}
	return NewModule(), q.Priority, nil
}

// Module is the policy of one job.
type Module struct {
	mu sync.Mutex
	rt errmgr.Runtime
}

// NewModule returns a module; Provision must give it its job before it
// handles a fault.
func NewModule() *Module { return &Module{} }

// Provision implements mca.Provisioner[errmgr.Host]. A new run of the job
// (after autor restarted it) provisions it again; the module keeps the
// newest.
func (m *Module) Provision(_ context.Context, h errmgr.Host) error {
	rt := h.Job
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rt = rt
	return nil
}

func (m *Module) runtime() errmgr.Runtime {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rt
}

// Handle migrates the ranks of a predicted fault. It passes every other
// fault without a word, and a prediction it leaves to the policies below
// with the reason recorded: too close to migrate in time, or a migration
// abandoned after a failure during it. A prediction it cannot act on (a
// runtime that cannot migrate, nothing to move, no node to move to, a
// migration refused) is an error, which the stack records; the prediction
// then passes and the job runs on as it was.
func (m *Module) Handle(ctx context.Context, f errmgr.Fault, st *errmgr.Status) (errmgr.Decision, error) {
	if f.Kind != errmgr.Predicted {
		return errmgr.Pass, nil
	}
	rt := m.runtime()
	if rt == nil {
		return errmgr.Pass, errors.New("no job to act on (the module was not bound to its runtime)")
	}
	mig, ok := rt.(errmgr.Migrator)
	if !ok {
		return errmgr.Pass, errors.New("this job's runtime cannot migrate ranks (run the job with -am ft-enable-cr)")
	}
	p := prediction(f)
	nodes := mig.Nodes()
	dest, err := Place(nodes, p)
	if err != nil {
		return errmgr.Pass, err
	}
	if !p.Deadline.IsZero() {
		if ckpt, known := mig.CheckpointTime(ctx); known {
			left, need := time.Until(p.Deadline), 2*ckpt
			if left < need {
				when := "expected in " + roundDur(left)
				if left <= 0 {
					when = "expected " + roundDur(-left) + " ago"
				}
				st.Actions = append(st.Actions, fmt.Sprintf("crmig: the fault is %s, a migration would take about %s (twice the last checkpoint's %s): left to the policies below (autor recovers after the fault)",
					when, roundDur(need), roundDur(ckpt)))
				return errmgr.Pass, nil
			}
		}
	}
	moves := describeMoves(nodes, dest)
	res, err := mig.Migrate(ctx, errmgr.Migration{Dest: dest, Why: f.Describe()})
	if errors.Is(err, errmgr.ErrMigrationAbandoned) {
		st.Actions = append(st.Actions, "crmig: "+err.Error())
		return errmgr.Pass, nil
	}
	if err != nil {
		return errmgr.Pass, fmt.Errorf("migrate %s: %w", moves, err)
	}
	st.Actions = append(st.Actions, fmt.Sprintf("crmig: moved %s in %.2f s (checkpoint %.2f s, restart %.2f s), sequence %d",
		moves, res.Took.Seconds(), res.Checkpoint.Seconds(), res.Restart.Seconds(), res.Seq))
	return errmgr.Recovered, nil
}

// prediction returns the fault's prediction; a Predicted fault built
// without one names a rank (Rank ≥ 0) or else a node.
func prediction(f errmgr.Fault) errmgr.Prediction {
	if f.Predict != nil {
		return *f.Predict
	}
	if f.Rank >= 0 {
		return errmgr.Prediction{Ranks: []int{f.Rank}}
	}
	if f.Node != "" {
		return errmgr.Prediction{Nodes: []string{f.Node}}
	}
	return errmgr.Prediction{}
}

// describeMoves names each move for the job's report, ascending by rank:
// "rank 2 n2 -> n3, rank 3 n2 -> n3".
func describeMoves(nodes []errmgr.NodeInfo, dest map[int]string) string {
	home := map[int]string{}
	for _, n := range nodes {
		for _, r := range n.Ranks {
			home[r] = n.Name
		}
	}
	ranks := make([]int, 0, len(dest))
	for r := range dest {
		ranks = append(ranks, r)
	}
	slices.Sort(ranks)
	parts := make([]string, len(ranks))
	for i, r := range ranks {
		parts[i] = fmt.Sprintf("rank %d %s -> %s", r, home[r], dest[r])
	}
	return strings.Join(parts, ", ")
}

// roundDur prints a duration the way a person reads it in a report:
// tenths of a second from a second up, milliseconds below.
func roundDur(d time.Duration) string {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

var (
	_ errmgr.Module                = (*Module)(nil)
	_ mca.Provisioner[errmgr.Host] = (*Module)(nil)
)
