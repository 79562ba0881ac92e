package plugin

import (
	"context"
	"io"
	"sync"

	"gompi/frameworks"
	"gompi/frameworks/plm"
	"gompi/mca"
)

// The PLM framework over the bridge. Launch sends the Spec; its Stderr
// (an io.Writer of gompirun) is lent for the module's life, so what the
// daemons write comes back to it. The daemons are the plugin's children:
// each comes back as a handle with its node and PID, and Wait and Kill are
// calls on it. Wait has no context in plm.Daemon, so its call has no bound
// but the plugin's life: it returns when the daemon's launch process ends
// or fails with ErrPluginDied when the plugin does (whose death also ends
// its daemons: their parent-death signal). A daemon's handle is released
// with its module's Close.

var plmAdapter = adapter{
	methods: plmMethods,
	carrier: carry(func(s *frameworks.Set) *mca.Framework[plm.Module] { return s.PLM },
		func(r *remote, _ bool) plm.Module { return plmModule{r} }),
}

// plmSpec is plm.Spec with its Stderr lent.
type plmSpec struct {
	Spec   plm.Spec // without Stderr
	Stderr uint64   // 0: discard
}

type plmDaemon struct {
	Handle uint64
	Node   string
	PID    int
}

var plmMethods = methods{
	"Network": fn(func(_ context.Context, m plm.Module, _ none, _ *scope) (string, error) { return m.Network(), nil }),
	"Launch": fn(func(ctx context.Context, m plm.Module, a plmSpec, sc *scope) ([]plmDaemon, error) {
		w, err := sc.host(a.Stderr)
		if err != nil {
			return nil, err
		}
		if w != nil {
			a.Spec.Stderr = writerCalls{w}
		}
		ds, err := m.Launch(ctx, a.Spec)
		if err != nil {
			return nil, err
		}
		out := make([]plmDaemon, len(ds))
		for i, d := range ds {
			out[i] = plmDaemon{Handle: sc.hold(d, daemonMethods), Node: d.Node(), PID: d.PID()}
		}
		return out, nil
	}),
}

var daemonMethods = methods{
	"Wait": fn(func(_ context.Context, d plm.Daemon, _ none, _ *scope) (none, error) { return none{}, d.Wait() }),
	"Kill": fn(func(_ context.Context, d plm.Daemon, _ none, _ *scope) (none, error) { return none{}, d.Kill() }),
}

type writeArgs struct{ P []byte }

// writerMethods serve an io.Writer of the host to the plugin.
var writerMethods = methods{
	"Write": fn(func(_ context.Context, w io.Writer, a writeArgs, _ *scope) (int, error) { return w.Write(a.P) }),
}

// writerCalls is an io.Writer of the host, in the plugin. The daemons'
// diagnostics are relayed as well as the bridge can: a write that cannot
// reach the host (released with its module, the host gone) is dropped
// rather than failed, since a failed write would stop the copying of a
// daemon's output and leave the daemon writing into a closed pipe.
type writerCalls struct{ c caller }

func (w writerCalls) Write(p []byte) (int, error) {
	_ = w.c.call(context.Background(), control, "Write", writeArgs{p}, nil)
	return len(p), nil
}

// plmModule is a plugin's PLM module.
type plmModule struct{ *remote }

func (m plmModule) Network() string {
	var n string
	if err := m.call(context.Background(), control, "Network", nil, &n); err != nil {
		m.p.log.Warn("plm: network of a plugin's module", "component", m.name(), "err", err)
	}
	return n
}

func (m plmModule) Launch(ctx context.Context, spec plm.Spec) ([]plm.Daemon, error) {
	a := plmSpec{Spec: spec}
	a.Spec.Stderr = nil
	if spec.Stderr != nil {
		a.Stderr = m.lend(spec.Stderr, writerMethods)
	}
	var ds []plmDaemon
	if err := m.call(ctx, dataIO, "Launch", a, &ds); err != nil {
		return nil, err
	}
	out := make([]plm.Daemon, len(ds))
	for i, d := range ds {
		out[i] = &daemonProxy{r: m.child(d.Handle), node: d.Node, pid: d.PID}
	}
	return out, nil
}

// daemonProxy is a daemon a plugin's PLM started.
type daemonProxy struct {
	r        *remote
	node     string
	pid      int
	waitOnce sync.Once
	waitErr  error
}

func (d *daemonProxy) Node() string { return d.node }
func (d *daemonProxy) PID() int     { return d.pid }

// Wait waits once over the bridge; every caller (concurrent ones block in
// the Once) gets that answer.
func (d *daemonProxy) Wait() error {
	d.waitOnce.Do(func() { d.waitErr = d.r.call(context.Background(), unbounded, "Wait", nil, nil) })
	return d.waitErr
}

func (d *daemonProxy) Kill() error { return d.r.call(context.Background(), control, "Kill", nil, nil) }

var (
	_ plm.Module = plmModule{}
	_ plm.Daemon = (*daemonProxy)(nil)
	_ io.Writer  = writerCalls{}
)
