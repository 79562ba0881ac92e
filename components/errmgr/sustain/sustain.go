// Package errmgrsustain is the sustain ErrMgr component (the dissertation's
// run-through stabilization): when a rank fails or its node is lost, the
// job is not aborted. The component declares the lost ranks failed through
// the job's runtime (errmgr.Runtime.NotifyFailed), which tells every
// surviving rank: operations that involve a failed rank then return an
// error wrapping mpi.ErrProcFailed, the application decides what to do
// (mpi.Comm.Shrink gives a communicator of the survivors), and the job
// ends normally when the survivors finalize.
//
// It acts only when asked for, since running on after a failure is a
// promise the application must be written to keep: name it in the
// selection (`--mca errmgr sustain,default`) or set
// errmgr_sustain_enable=1. errmgr_sustain_max_failures bounds how many
// ranks may be lost (0 = no bound); past it, and when no rank is left,
// the component passes the fault on, so the stack's default aborts the
// job with its usual report.
package errmgrsustain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"gompi/frameworks/errmgr"
	"gompi/mca"
)

// Name of the component.
const Name = "sustain"

// Priority is the component's default priority: above default (which
// aborts, and is last anyway), below crmig (40), above autor (20), so a
// job that asked to run through failures does so before a restart is
// tried.
const Priority = 30

// Parameters.
const (
	ParamEnable      = "errmgr_sustain_enable"
	ParamMaxFailures = "errmgr_sustain_max_failures"
)

// New returns the sustain ErrMgr component.
func New() mca.Component[errmgr.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: errmgr.Name, Name: Name,
		Description: "Run through failures: lost ranks are reported to the survivors (mpi.ErrProcFailed), the job goes on",
		Version:     "1.0.0",
		Priority:    Priority,
		Params: []mca.ParamSpec{
			{Name: ParamEnable, Type: mca.Bool, Default: "0", Level: mca.LevelUser,
				Help: "Keep the job running when ranks fail or a node is lost (also on when the errmgr selection names sustain); the application must handle mpi.ErrProcFailed"},
			{Name: ParamMaxFailures, Type: mca.Int, Default: "0", Level: mca.LevelUser,
				Help: "Ranks the job may lose and run on (0 = no bound); one more aborts the job"},
		},
	}, query)
}

// query answers when the component was asked for: by name in the errmgr
// selection, or with errmgr_sustain_enable. Otherwise it skips, so an
// application not written for failures is aborted as before.
func query(_ context.Context, q mca.Query) (errmgr.Module, int, error) {
	if err := errmgr.SkipUnlessAsked(q, Name, ParamEnable, Name+","+errmgr.DefaultName, ""); err != nil {
		return nil, 0, err
	}
	limit := q.Values.Int(ParamMaxFailures)
	if limit < 0 {
		return nil, 0, fmt.Errorf("errmgr/sustain: %s = %d: want 0 (no bound) or a positive count", ParamMaxFailures, limit)
	}
	return NewModule(limit), q.Priority, nil
}

// Module is the policy of one job.
type Module struct {
	limit int

	mu     sync.Mutex
	rt     errmgr.Runtime
	failed map[int]bool // ranks declared failed so far
}

// NewModule returns a module allowing limit lost ranks (0 = no bound);
// Provision must give it its job before it handles a fault.
func NewModule(limit int) *Module { return &Module{limit: limit} }

// Provision implements mca.Provisioner[errmgr.Host]. Provisioning with a
// new run of the job (after a recovery restarted every rank) forgets the
// ranks lost before: they run again. The bound on lost ranks counts per
// run.
func (m *Module) Provision(_ context.Context, h errmgr.Host) error {
	rt := h.Job
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rt, m.failed = rt, nil
	return nil
}

// Failed returns the ranks declared failed so far, ascending.
func (m *Module) Failed() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return sortedKeys(m.failed)
}

// Handle runs the job on through a rank or node failure. It passes a
// predicted fault (nothing has failed), a failure past the bound, and the
// loss of the last ranks; it fails when it has no runtime or the runtime
// could not tell the ranks, so the stack goes on to the next policy.
func (m *Module) Handle(ctx context.Context, f errmgr.Fault, st *errmgr.Status) (errmgr.Decision, error) {
	switch f.Kind {
	case errmgr.ProcExited, errmgr.ProcSignaled, errmgr.NodeLost:
	default:
		return errmgr.Pass, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rt == nil {
		return errmgr.Pass, errors.New("no job to act on (the module was not bound to its runtime)")
	}
	var lost []int
	if f.Kind == errmgr.NodeLost {
		lost = m.rt.RanksOf(f.Node)
	} else {
		lost = []int{f.Rank}
	}
	var fresh []int
	for _, r := range lost {
		if !m.failed[r] {
			fresh = append(fresh, r)
		}
	}
	slices.Sort(fresh)
	if len(fresh) == 0 {
		// Ranks whose failure was run through already: nothing more is lost.
		what := fmt.Sprintf("rank %d was declared failed before", f.Rank)
		if f.Kind == errmgr.NodeLost {
			what = fmt.Sprintf("node %s held no rank still running", f.Node)
		}
		st.Actions = append(st.Actions, "sustain: "+what+"; the job runs on")
		return errmgr.Recovered, nil
	}
	size := m.rt.Size()
	total := len(m.failed) + len(fresh)
	switch {
	case total >= size:
		st.Actions = append(st.Actions, fmt.Sprintf("sustain: no rank would be left (%d of %d lost); not running on", total, size))
		return errmgr.Pass, nil
	case m.limit > 0 && total > m.limit:
		st.Actions = append(st.Actions, fmt.Sprintf("sustain: %d ranks lost, more than %s = %d; not running on", total, ParamMaxFailures, m.limit))
		return errmgr.Pass, nil
	}
	if err := m.rt.NotifyFailed(ctx, fresh, f.Describe()); err != nil {
		return errmgr.Pass, fmt.Errorf("tell the survivors that %s failed: %w", rankList(fresh), err)
	}
	if m.failed == nil {
		m.failed = map[int]bool{}
	}
	for _, r := range fresh {
		m.failed[r] = true
	}
	st.Actions = append(st.Actions, fmt.Sprintf("sustain: the job runs on without %s (%d of %d ranks left)", rankList(fresh), size-total, size))
	return errmgr.Recovered, nil
}

// rankList names ranks for a message: "rank 2", "ranks 2, 3".
func rankList(ranks []int) string {
	if len(ranks) == 1 {
		return fmt.Sprintf("rank %d", ranks[0])
	}
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = fmt.Sprint(r)
	}
	return "ranks " + strings.Join(s, ", ")
}

func sortedKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for r := range m {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

var (
	_ errmgr.Module                = (*Module)(nil)
	_ mca.Provisioner[errmgr.Host] = (*Module)(nil)
)
