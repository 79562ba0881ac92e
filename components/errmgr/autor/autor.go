// Package autor is the autor ErrMgr component (the dissertation's
// automatic recovery, section 4.3): when a rank fails or a node is lost,
// gompirun ends every rank and restarts the whole job from its last
// committed checkpoint, in the same gompirun (its output goes on, each
// recovery reported). Lost ranks are placed on other nodes (off-node by
// default, errmgr_autor_same_node to allow their own node when it is still
// up); ranks that stay on their node read their cached local snapshot
// (sstore stage) instead of global storage. errmgr_autor_max_recoveries
// bounds the recoveries of a job; past it the fault passes on and the
// stack's default aborts the job.
//
// autor needs checkpoints to restart from: it applies with C/R on
// (-am ft-enable-cr), usually with periodic checkpoints
// (snapc_base_periodic), and when asked for by name
// (--mca errmgr autor,default) or with errmgr_autor_enable.
package autor

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
const Name = "autor"

// Priority is the component's default priority: below crmig (40) and
// sustain (30), so lighter policies act first; above default.
const Priority = 20

// Parameters.
const (
	ParamEnable        = "errmgr_autor_enable"
	ParamMaxRecoveries = "errmgr_autor_max_recoveries"
	ParamSameNode      = "errmgr_autor_same_node"
)

// New returns the autor ErrMgr component.
func New() mca.Component[errmgr.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: errmgr.Name, Name: Name,
		Description: "Automatic recovery: on a failure, restart every rank from the last committed checkpoint, lost ranks on other nodes",
		Version:     "1.0.0",
		Priority:    Priority,
		Params: []mca.ParamSpec{
			{Name: ParamEnable, Type: mca.Bool, Default: "0", Level: mca.LevelUser,
				Help: "Recover failed jobs from their last checkpoint (also on when the errmgr selection names autor); needs -am ft-enable-cr"},
			{Name: ParamMaxRecoveries, Type: mca.Int, Default: "5", Level: mca.LevelUser,
				Help: "Recoveries a job may go through; one more failure aborts it"},
			{Name: ParamSameNode, Type: mca.Bool, Default: "0", Level: mca.LevelUser,
				Help: "Restart a failed rank on its own node when that node is still up (default: on another node)"},
		},
	}, query)
}

// query answers when autor was asked for and C/R is on.
func query(_ context.Context, q mca.Query) (errmgr.Module, int, error) {
	if err := errmgr.SkipUnlessAsked(q, Name, ParamEnable, Name+","+errmgr.DefaultName, "restarts jobs from their checkpoints"); err != nil {
		return nil, 0, err
	}
	limit := q.Values.Int(ParamMaxRecoveries)
	if limit < 0 {
		return nil, 0, fmt.Errorf("errmgr/autor: %s = %d: want 0 or more", ParamMaxRecoveries, limit)
	}
	return NewModule(limit, q.Values.Bool(ParamSameNode)), q.Priority, nil
}

// Module is the policy of one job.
type Module struct {
	limit    int
	sameNode bool

	mu   sync.Mutex
	rt   errmgr.Runtime
	done int // recoveries started
}

// NewModule returns a module allowing limit recoveries.
func NewModule(limit int, sameNode bool) *Module { return &Module{limit: limit, sameNode: sameNode} }

// Provision implements mca.Provisioner[errmgr.Host].
func (m *Module) Provision(_ context.Context, h errmgr.Host) error {
	rt := h.Job
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rt = rt
	return nil
}

// Recoveries returns how many recoveries the module started.
func (m *Module) Recoveries() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.done
}

// Handle restarts the job from its last checkpoint. It passes predicted
// faults (crmig's), faults past the limit, and faults it cannot recover
// from (no checkpoint committed yet), recording why.
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
	rec, ok := m.rt.(errmgr.Recoverer)
	if !ok {
		return errmgr.Pass, errors.New("this job cannot be restarted from a checkpoint (its runtime does not recover)")
	}
	if m.done >= m.limit {
		st.Actions = append(st.Actions, fmt.Sprintf("autor: the job went through %d recoveries, its limit (%s); not recovering again", m.done, ParamMaxRecoveries))
		return errmgr.Pass, nil
	}
	r := errmgr.Recovery{SameNode: m.sameNode, Why: f.Describe()}
	if f.Kind == errmgr.NodeLost {
		r.Lost, r.LostNodes = m.rt.RanksOf(f.Node), []string{f.Node}
	} else {
		r.Lost = []int{f.Rank}
	}
	seq, err := rec.Recover(ctx, r)
	if errors.Is(err, errmgr.ErrNoCheckpoint) {
		st.Actions = append(st.Actions, "autor: cannot recover: "+err.Error())
		return errmgr.Pass, nil
	}
	if err != nil {
		return errmgr.Pass, fmt.Errorf("recover: %w", err)
	}
	m.done++
	where := "lost ranks on other nodes"
	if m.sameNode {
		where = "lost ranks on their node when it is up"
	}
	st.Actions = append(st.Actions, fmt.Sprintf("autor: recovery %d of %d: every rank restarts from sequence %d (%s; %s)",
		m.done, m.limit, seq, rankList(r.Lost), where))
	return errmgr.Recovered, nil
}

func rankList(ranks []int) string {
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = fmt.Sprint(r)
	}
	if len(ranks) == 1 {
		return "rank " + s[0] + " lost"
	}
	return "ranks " + strings.Join(s, ", ") + " lost"
}

var (
	_ errmgr.Module                = (*Module)(nil)
	_ mca.Provisioner[errmgr.Host] = (*Module)(nil)
)
