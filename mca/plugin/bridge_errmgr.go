package plugin

import (
	"context"
	"log/slog"
	"time"

	"gompi/frameworks"
	"gompi/frameworks/errmgr"
	"gompi/mca"
)

// The ErrMgr framework over the bridge. Handle sends the fault and the
// status vector and gets back the decision and the vector as the module
// left it, also when it failed. Handle may wait on a recovery or a
// migration, so it is under the I/O bound (by default the caller's
// context only). The Host crosses as the job: gompirun's Runtime is lent
// to the module, with its Recoverer and Migrator when it implements them,
// and the plugin's module sees a job implementing the same interfaces.

var errmgrAdapter = adapter{
	methods: errmgrMethods,
	extended: func(m any) bool {
		_, ok := m.(mca.Provisioner[errmgr.Host])
		return ok
	},
	carrier: carry(func(s *frameworks.Set) *mca.Framework[errmgr.Module] { return s.ErrMgr },
		func(r *remote, extended bool) errmgr.Module {
			if extended {
				return &errmgrProvisioned{errmgrModule: errmgrModule{r}}
			}
			return errmgrModule{r}
		}),
}

type errmgrHandle struct {
	Fault  errmgr.Fault
	Status errmgr.Status
}

type errmgrDecision struct {
	Decision errmgr.Decision
	Status   errmgr.Status
	Handled  bool // the module's Handle ran: Status is what it left
}

type errmgrHost struct {
	Job              uint64 // 0: none
	Recover, Migrate bool   // the job implements Recoverer, Migrator
}

var errmgrMethods = methods{
	"Handle": fn(func(ctx context.Context, m errmgr.Module, a errmgrHandle, _ *scope) (errmgrDecision, error) {
		st := a.Status
		d, err := m.Handle(ctx, a.Fault, &st)
		return errmgrDecision{Decision: d, Status: st, Handled: true}, err
	}),
	"Provision": fn(func(ctx context.Context, m errmgr.Module, a errmgrHost, sc *scope) (none, error) {
		c, err := sc.host(a.Job)
		if err != nil {
			return none{}, err
		}
		var host errmgr.Host
		if c != nil {
			host.Job = jobOf(jobCalls{c: c, log: sc.srv.log}, a.Recover, a.Migrate)
		}
		_, err = mca.Provision(ctx, m, host)
		return none{}, err
	}),
}

type jobRanks struct {
	Node  string
	Ranks []int
	Why   string
}

type jobCheckpointTime struct {
	Took time.Duration
	OK   bool
}

// jobMethods serve gompirun's job (errmgr.Host's) to the plugin.
var jobMethods = methods{
	"Size": fn(func(_ context.Context, j errmgr.Runtime, _ none, _ *scope) (int, error) { return j.Size(), nil }),
	"RanksOf": fn(func(_ context.Context, j errmgr.Runtime, a jobRanks, _ *scope) ([]int, error) {
		return j.RanksOf(a.Node), nil
	}),
	"NotifyFailed": fn(func(ctx context.Context, j errmgr.Runtime, a jobRanks, _ *scope) (none, error) {
		return none{}, j.NotifyFailed(ctx, a.Ranks, a.Why)
	}),
	"Recover": fn(func(ctx context.Context, j errmgr.Recoverer, a errmgr.Recovery, _ *scope) (int, error) {
		return j.Recover(ctx, a)
	}),
	"Nodes": fn(func(_ context.Context, j errmgr.Migrator, _ none, _ *scope) ([]errmgr.NodeInfo, error) {
		return j.Nodes(), nil
	}),
	"CheckpointTime": fn(func(ctx context.Context, j errmgr.Migrator, _ none, _ *scope) (jobCheckpointTime, error) {
		took, ok := j.CheckpointTime(ctx)
		return jobCheckpointTime{took, ok}, nil
	}),
	"Migrate": fn(func(ctx context.Context, j errmgr.Migrator, a errmgr.Migration, _ *scope) (errmgr.MigrationResult, error) {
		return j.Migrate(ctx, a)
	}),
}

// errmgrModule is a plugin's ErrMgr module.
type errmgrModule struct{ *remote }

func (m errmgrModule) Handle(ctx context.Context, f errmgr.Fault, st *errmgr.Status) (errmgr.Decision, error) {
	var res errmgrDecision
	err := m.call(ctx, dataIO, "Handle", errmgrHandle{Fault: f, Status: *st}, &res)
	if res.Handled {
		*st = res.Status
	}
	return res.Decision, err
}

// errmgrProvisioned is a plugin's ErrMgr module that takes a Host; each
// provision (each run of the job) replaces the job lent before.
type errmgrProvisioned struct {
	errmgrModule
	job uint64 // guarded by Provision's callers: gompirun extended between runs
}

func (m *errmgrProvisioned) Provision(ctx context.Context, h errmgr.Host) error {
	if m.job != 0 {
		m.unlend(m.job)
		m.job = 0
	}
	var a errmgrHost
	if h.Job != nil {
		_, a.Recover = h.Job.(errmgr.Recoverer)
		_, a.Migrate = h.Job.(errmgr.Migrator)
		m.job = m.lend(h.Job, jobMethods)
		a.Job = m.job
	}
	return m.call(ctx, control, "Provision", a, nil)
}

// jobCalls is gompirun's job seen from a plugin's module. Size, RanksOf
// and Nodes take no context and return no error: a failed call (the host
// is gone, and the plugin with it shortly) is logged and answers empty.
type jobCalls struct {
	c   caller
	log *slog.Logger
}

func (j jobCalls) ask(method string, args, reply any) {
	if err := j.c.call(context.Background(), control, method, args, reply); err != nil {
		j.log.Warn("errmgr: ask the job", "method", method, "err", err)
	}
}

func (j jobCalls) Size() (n int) { j.ask("Size", nil, &n); return n }

func (j jobCalls) RanksOf(node string) (ranks []int) {
	j.ask("RanksOf", jobRanks{Node: node}, &ranks)
	return ranks
}

func (j jobCalls) NotifyFailed(ctx context.Context, ranks []int, why string) error {
	return j.c.call(ctx, control, "NotifyFailed", jobRanks{Ranks: ranks, Why: why}, nil)
}

func (j jobCalls) Recover(ctx context.Context, r errmgr.Recovery) (seq int, err error) {
	err = j.c.call(ctx, control, "Recover", r, &seq)
	return seq, err
}

func (j jobCalls) Nodes() (nodes []errmgr.NodeInfo) { j.ask("Nodes", nil, &nodes); return nodes }

func (j jobCalls) CheckpointTime(ctx context.Context) (time.Duration, bool) {
	var res jobCheckpointTime
	_ = j.c.call(ctx, control, "CheckpointTime", nil, &res)
	return res.Took, res.OK
}

func (j jobCalls) Migrate(ctx context.Context, mig errmgr.Migration) (res errmgr.MigrationResult, err error) {
	err = j.c.call(ctx, control, "Migrate", mig, &res)
	return res, err
}

// jobOf returns j as a job implementing exactly the interfaces the host's
// job implements, so the module's type assertions see what they would in
// process.
func jobOf(j jobCalls, recover, migrate bool) errmgr.Runtime {
	type runtime struct{ errmgr.Runtime }
	type recoverer struct {
		errmgr.Runtime
		errmgr.Recoverer
	}
	type migrator struct {
		errmgr.Runtime
		errmgr.Migrator
	}
	type both struct {
		errmgr.Runtime
		errmgr.Recoverer
		errmgr.Migrator
	}
	switch {
	case recover && migrate:
		return both{j, j, j}
	case recover:
		return recoverer{j, j}
	case migrate:
		return migrator{j, j}
	}
	return runtime{j}
}

var (
	_ errmgr.Module                = errmgrModule{}
	_ mca.Provisioner[errmgr.Host] = (*errmgrProvisioned)(nil)
	_ errmgr.Runtime               = jobCalls{}
	_ errmgr.Recoverer             = jobCalls{}
	_ errmgr.Migrator              = jobCalls{}
)
