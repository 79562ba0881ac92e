// Package rollback is the rollback ErrMgr component: in-job rollback. When
// a rank fails or a node is lost, the surviving ranks keep their processes
// (same PIDs) and go back in place to the newest committed sequence every
// node of the job can reach (its node cache of sstore stage, or global
// storage); only the lost ranks are started anew from that sequence, by
// their node's gompid, or another node's when their node is gone. Programs
// cooperate through package cr's contract (cr.Run, cr.ErrRolledBack): a
// library call interrupted by the rollback returns cr.ErrRolledBack, and
// the program goes back to its re-entry point, where its Protect'ed values
// hold the sequence's state.
//
// Its place in the ErrMgr stack, by priority: crmig (40) moves ranks
// before a predicted fault; sustain (30) runs through a failure when the
// program asked for that; rollback (25) rolls back in place; autor (20)
// restarts the whole job; default aborts. rollback passes the fault on to
// autor, naming why in the job's report, when an in-place rollback is not
// possible: crs other than self (crs=criu survivors are whole-process
// images: autor restores them), no committed sequence (or none every node
// reaches), every rank lost, no node left to start the lost ranks on, a
// failure during a rollback under way (autor then restarts every rank),
// errmgr_rollback_max_rollbacks reached, or a runtime that cannot roll
// back (RollBack refused with errmgr.ErrCannotRollBack).
//
// The failed set and the sequence are decided once, by this policy in
// gompirun, which alone knows the committed sequences and every failure,
// and reach every survivor in the same Rollback request: the survivors
// need no agreement among themselves (a ULFM agreement would add a round
// for nothing they lack). A second failure before every rank computes
// again is not joined: this policy passes it on and autor restarts the
// whole job, which abandons the rollback.
//
// It applies with C/R on (-am ft-enable-cr) when asked for by name
// (--mca errmgr rollback,autor,default) or with errmgr_rollback_enable.
package rollback

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"gompi/frameworks/errmgr"
	"gompi/mca"
)

// Name of the component.
const Name = "rollback"

// Priority is the component's default priority: below crmig (40) and
// sustain (30), above autor (20), which it falls back to.
const Priority = 25

// Parameters.
const (
	ParamEnable       = "errmgr_rollback_enable"
	ParamMaxRollbacks = "errmgr_rollback_max_rollbacks"
)

// New returns the rollback ErrMgr component.
func New() mca.Component[errmgr.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: errmgr.Name, Name: Name,
		Description: "In-job rollback: on a failure, survivors return in place to the last committed sequence, only lost ranks start anew; acts after crmig and sustain, before autor, which it falls back to (crs criu, nothing committed, a failure during a rollback)",
		Version:     "1.0.0",
		Priority:    Priority,
		Params: []mca.ParamSpec{
			{Name: ParamEnable, Type: mca.Bool, Default: "0", Level: mca.LevelUser,
				Help: "Roll failed jobs back in place (also on when the errmgr selection names rollback); needs -am ft-enable-cr and a program using package cr (cr.Run)"},
			{Name: ParamMaxRollbacks, Type: mca.Int, Default: "5", Level: mca.LevelUser,
				Help: "In-place rollbacks a job may go through; past it faults pass on (to autor)"},
		},
	}, query)
}

func query(_ context.Context, q mca.Query) (errmgr.Module, int, error) {
	if err := errmgr.SkipUnlessAsked(q, Name, ParamEnable, Name+",autor,"+errmgr.DefaultName, "rolls jobs back to their checkpoints"); err != nil {
		return nil, 0, err
	}
	limit := q.Values.Int(ParamMaxRollbacks)
	if limit < 0 {
		return nil, 0, fmt.Errorf("errmgr/rollback: %s = %d: want 0 or more", ParamMaxRollbacks, limit)
	}
	return NewModule(limit), q.Priority, nil
}

// Module is the policy of one job.
type Module struct {
	limit int

	mu   sync.Mutex
	rt   errmgr.Runtime
	done int // rollbacks started
}

// NewModule returns a module allowing limit rollbacks.
func NewModule(limit int) *Module { return &Module{limit: limit} }

// Provision implements mca.Provisioner[errmgr.Host]. A new run of the job
// (autor restarted it) keeps the count: the bound is the job's.
func (m *Module) Provision(_ context.Context, h errmgr.Host) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rt = h.Job
	return nil
}

// Rollbacks returns how many rollbacks the module started.
func (m *Module) Rollbacks() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.done
}

// Handle rolls the job back in place, or passes the fault on saying why
// (see the package doc for when).
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
	fallBack := func(why string) (errmgr.Decision, error) {
		st.Actions = append(st.Actions, "rollback: falls back: "+why)
		return errmgr.Pass, nil
	}
	rb, ok := m.rt.(errmgr.RollBacker)
	if !ok {
		return fallBack("this job's runtime cannot roll back in place")
	}
	if m.done >= m.limit {
		return fallBack(fmt.Sprintf("the job went through %d rollbacks, its limit (%s)", m.done, ParamMaxRollbacks))
	}
	view, err := rb.RollbackView(ctx)
	if err != nil {
		return fallBack(fmt.Sprintf("the job's state cannot be read: %v", err))
	}
	lost, lostNodes := []int{f.Rank}, []string(nil)
	if f.Kind == errmgr.NodeLost {
		lost, lostNodes = m.rt.RanksOf(f.Node), []string{f.Node}
	}
	plan, err := decide(m.rt.Size(), lost, lostNodes, view)
	if err != nil {
		return fallBack(strings.TrimPrefix(err.Error(), errFallBack.Error()+": "))
	}
	plan.Why = f.Describe()
	if err := rb.RollBack(ctx, plan); errors.Is(err, errmgr.ErrCannotRollBack) {
		return fallBack(err.Error())
	} else if err != nil {
		return errmgr.Pass, fmt.Errorf("roll back: %w", err)
	}
	m.done++
	st.Actions = append(st.Actions, fmt.Sprintf("rollback: rollback %d of %d: survivors return to sequence %d in place, %s",
		m.done, m.limit, plan.Seq, describePlace(plan)))
	return errmgr.Recovered, nil
}

// describePlace names the restarted ranks and their nodes: "rank 2 starts
// again on n2", "ranks 4, 5 start again on n1, n1".
func describePlace(p errmgr.Rollback) string {
	rs := make([]string, len(p.Lost))
	ns := make([]string, len(p.Lost))
	for i, r := range p.Lost {
		rs[i], ns[i] = fmt.Sprint(r), p.Place[r]
	}
	if len(rs) == 1 {
		return fmt.Sprintf("rank %s starts again on %s", rs[0], ns[0])
	}
	return fmt.Sprintf("ranks %s start again on %s", strings.Join(rs, ", "), strings.Join(ns, ", "))
}

var (
	_ errmgr.Module                = (*Module)(nil)
	_ mca.Provisioner[errmgr.Host] = (*Module)(nil)
)
