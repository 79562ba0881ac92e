package plugin

import (
	"context"

	"gompi/frameworks"
	"gompi/frameworks/filem"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// The SStore framework over the bridge. Its Host crosses as the node's
// name and the host's FileM, lent to the module (its calls come back over
// Callbacks); the plugin's module logs to the plugin's log, which the host
// relays. A Sync's progress callback (sstore.WithProgress in the host's
// context) is lent for the one call: the module's reports come back to it.

var sstoreAdapter = adapter{
	methods: sstoreMethods,
	extended: func(m any) bool {
		_, ok := m.(mca.Provisioner[sstore.Host])
		return ok
	},
	carrier: carry(func(s *frameworks.Set) *mca.Framework[sstore.Module] { return s.SStore },
		func(r *remote, extended bool) sstore.Module {
			if extended {
				return sstoreProvisioned{sstoreModule{sstoreCalls{r}, r}}
			}
			return sstoreModule{sstoreCalls{r}, r}
		}),
}

type sstoreSeq struct {
	Ref       snapshot.Ref
	Seq, Rank int
	Locals    []sstore.Local
	// Progress is the host's progress callback of a Sync.
	Progress uint64
}

type sstoreHost struct {
	Node  string
	FileM uint64 // 0: none
}

var sstoreMethods = methods{
	"LocalDir": fn(func(ctx context.Context, m sstore.Module, a sstoreSeq, _ *scope) (string, error) {
		return m.LocalDir(ctx, a.Ref, a.Seq, a.Rank)
	}),
	"Sync": fn(func(ctx context.Context, m sstore.Module, a sstoreSeq, sc *scope) (none, error) {
		progress, err := sc.host(a.Progress)
		if err != nil {
			return none{}, err
		}
		if progress != nil {
			ctx = sstore.WithProgress(ctx, func(p sstore.Progress) {
				// Reports are best effort, as in process: a lost one is
				// followed by the next.
				_ = progress.call(ctx, control, "Progress", p, nil)
			})
		}
		return none{}, m.Sync(ctx, a.Ref, a.Seq, a.Locals)
	}),
	"Fetch": fn(func(ctx context.Context, m sstore.Module, a sstoreSeq, _ *scope) (string, error) {
		return m.Fetch(ctx, a.Ref, a.Seq, a.Rank)
	}),
	"Remove": fn(func(ctx context.Context, m sstore.Module, a sstoreSeq, _ *scope) (none, error) {
		return none{}, m.Remove(ctx, a.Ref, a.Seq)
	}),
	"Provision": fn(func(ctx context.Context, m sstore.Module, a sstoreHost, sc *scope) (none, error) {
		host := sstore.Host{Node: a.Node, Log: sc.srv.log.With("framework", sc.comp.framework, "component", sc.comp.name)}
		fm, err := sc.host(a.FileM)
		if err != nil {
			return none{}, err
		}
		if fm != nil {
			host.FileM = filemCalls{fm}
		}
		_, err = mca.Provision(ctx, m, host)
		return none{}, err
	}),
}

// progressMethods serve a Sync's progress callback to the plugin.
var progressMethods = methods{
	"Progress": fn(func(_ context.Context, f func(sstore.Progress), p sstore.Progress, _ *scope) (none, error) {
		f(p)
		return none{}, nil
	}),
}

// sstoreCalls is an sstore.Module on the other side of the bridge: a
// plugin's (through sstoreModule) or the host's lent to a plugin's snapc
// coordinator, whose Sync progress then stays with the host's module.
type sstoreCalls struct{ c caller }

func (m sstoreCalls) LocalDir(ctx context.Context, ref snapshot.Ref, seq, rank int) (string, error) {
	var dir string
	err := m.c.call(ctx, control, "LocalDir", sstoreSeq{Ref: ref, Seq: seq, Rank: rank}, &dir)
	return dir, err
}

func (m sstoreCalls) Sync(ctx context.Context, ref snapshot.Ref, seq int, locals []sstore.Local) error {
	return m.c.call(ctx, dataIO, "Sync", sstoreSeq{Ref: ref, Seq: seq, Locals: locals}, nil)
}

func (m sstoreCalls) Fetch(ctx context.Context, ref snapshot.Ref, seq, rank int) (string, error) {
	var dir string
	err := m.c.call(ctx, dataIO, "Fetch", sstoreSeq{Ref: ref, Seq: seq, Rank: rank}, &dir)
	return dir, err
}

func (m sstoreCalls) Remove(ctx context.Context, ref snapshot.Ref, seq int) error {
	return m.c.call(ctx, dataIO, "Remove", sstoreSeq{Ref: ref, Seq: seq}, nil)
}

// sstoreModule is a plugin's SStore module.
type sstoreModule struct {
	sstoreCalls
	*remote
}

// Sync lends the progress callback of ctx for the call.
func (m sstoreModule) Sync(ctx context.Context, ref snapshot.Ref, seq int, locals []sstore.Local) error {
	report := func(p sstore.Progress) { sstore.ReportProgress(ctx, p) }
	id := m.lend(report, progressMethods)
	defer m.unlend(id)
	return m.call(ctx, dataIO, "Sync", sstoreSeq{Ref: ref, Seq: seq, Locals: locals, Progress: id}, nil)
}

// sstoreProvisioned is a plugin's SStore module that takes a Host.
type sstoreProvisioned struct{ sstoreModule }

// Provision lends the host's FileM to the module for its life.
func (m sstoreProvisioned) Provision(ctx context.Context, h sstore.Host) error {
	var fm uint64
	if h.FileM != nil {
		fm = m.lend(h.FileM, filemMethods)
	}
	return m.call(ctx, control, "Provision", sstoreHost{Node: h.Node, FileM: fm}, nil)
}

var (
	_ sstore.Module                = sstoreModule{}
	_ sstore.Module                = sstoreCalls{}
	_ mca.Provisioner[sstore.Host] = sstoreProvisioned{}
	_ filem.Module                 = filemCalls{}
)
