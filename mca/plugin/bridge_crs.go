package plugin

import (
	"context"

	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/mca"
)

// The CRS framework over the bridge. Checkpoint and Restart pass paths,
// PIDs, options and metadata; the snapshot's bytes stay on disk. Its Host
// crosses as crs.Host says: a rank's Save is lent to the module (its
// calls come back to the rank), a daemon's Files are passed as
// descriptors on the plugin's descriptor socket (fds.go) and its Restored
// is lent, the restored processes staying the plugin's children, held by
// handle, their Wait a call bounded by its context only.

var crsAdapter = adapter{
	methods: crsMethods,
	extended: func(m any) bool {
		_, ok := m.(mca.Provisioner[crs.Host])
		return ok
	},
	carrier: carry(func(s *frameworks.Set) *mca.Framework[crs.Module] { return s.CRS },
		func(r *remote, extended bool) crs.Module {
			if extended {
				return &crsProvisioned{crsModule: crsModule{r}}
			}
			return crsModule{r}
		}),
}

// crsHost is crs.Host with its functions lent and its files passed.
type crsHost struct {
	Rank     bool
	Save     uint64 // RankHost.Save, lent
	Daemon   bool
	Node     string
	Files    uint64 // the batch of DaemonHost.Files on the descriptor socket
	NFiles   int
	Restored uint64 // DaemonHost.Restored, lent
}

type crsRestored struct {
	Rank   int
	Handle uint64 // the process, held by the plugin
	PID    int
}

var crsMethods = methods{
	"Checkpoint": fn(func(ctx context.Context, m crs.Module, a crs.CheckpointRequest, _ *scope) (crs.CheckpointResult, error) {
		return m.Checkpoint(ctx, a)
	}),
	"Restart": fn(func(ctx context.Context, m crs.Module, a crs.RestartRequest, _ *scope) (crs.Launch, error) {
		return m.Restart(ctx, a)
	}),
	"Provision": fn(func(ctx context.Context, m crs.Module, a crsHost, sc *scope) (none, error) {
		host, err := crsHostOf(ctx, a, sc)
		if err != nil {
			return none{}, err
		}
		_, err = mca.Provision(ctx, m, host)
		return none{}, err
	}),
}

// crsHostOf rebuilds the host's crs.Host in the plugin.
func crsHostOf(ctx context.Context, a crsHost, sc *scope) (crs.Host, error) {
	host := crs.Host{Log: sc.srv.log.With("framework", sc.comp.framework, "component", sc.comp.name)}
	if a.Rank {
		save, err := sc.host(a.Save)
		if err != nil {
			return host, err
		}
		host.Rank = &crs.RankHost{}
		if save != nil {
			host.Rank.Save = func(ctx context.Context, dir string) (files []string, err error) {
				err = save.call(ctx, dataIO, "Save", dir, &files)
				return files, err
			}
		}
	}
	if !a.Daemon {
		return host, nil
	}
	// Taken first, so they are the module's (closed with it) whatever
	// fails next.
	files, err := sc.srv.fds.take(ctx, a.Files, a.NFiles)
	if err != nil {
		return host, err
	}
	sc.srv.own(sc.handle, files)
	restored, err := sc.host(a.Restored)
	if err != nil {
		return host, err
	}
	host.Daemon = &crs.DaemonHost{Node: a.Node, Files: files}
	if restored != nil {
		host.Daemon.Restored = func(rank int, p crs.Process) {
			id := sc.hold(p, processMethods)
			if err := restored.call(context.Background(), control, "Restored", crsRestored{Rank: rank, Handle: id, PID: p.PID()}, nil); err != nil {
				host.Log.Warn("crs: hand a restored rank to the daemon", "rank", rank, "pid", p.PID(), "err", err)
			}
		}
	}
	return host, nil
}

var saveMethods = methods{
	"Save": fn(func(ctx context.Context, save func(context.Context, string) ([]string, error), dir string, _ *scope) ([]string, error) {
		return save(ctx, dir)
	}),
}

var restoredMethods = methods{
	"Restored": fn(func(_ context.Context, f func(crsRestored), a crsRestored, _ *scope) (none, error) {
		f(a)
		return none{}, nil
	}),
}

var processMethods = methods{
	"Wait": fn(func(ctx context.Context, p crs.Process, _ none, _ *scope) (crs.Exit, error) { return p.Wait(ctx) }),
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

// crsProvisioned is a plugin's CRS module that takes a Host.
type crsProvisioned struct {
	crsModule
	lent []uint64 // what the last Provision lent; guarded by its callers (one provision at a time)
}

func (m *crsProvisioned) Provision(ctx context.Context, h crs.Host) error {
	m.unlend(m.lent...)
	m.lent = nil
	lend := func(v any, ms methods) uint64 {
		id := m.lend(v, ms)
		m.lent = append(m.lent, id)
		return id
	}
	var a crsHost
	if h.Rank != nil {
		a.Rank = true
		if h.Rank.Save != nil {
			a.Save = lend(h.Rank.Save, saveMethods)
		}
	}
	if d := h.Daemon; d != nil {
		a.Daemon, a.Node, a.NFiles = true, d.Node, len(d.Files)
		var err error
		if a.Files, err = m.p.fds.send(d.Files); err != nil {
			return err
		}
		if d.Restored != nil {
			r := m.remote
			a.Restored = lend(func(x crsRestored) {
				d.Restored(x.Rank, &processProxy{r: r.child(x.Handle), pid: x.PID})
			}, restoredMethods)
		}
	}
	return m.call(ctx, control, "Provision", a, nil)
}

// processProxy is a rank a plugin's CRS restored; it is the plugin's
// child, so the plugin waits on it.
type processProxy struct {
	r   *remote
	pid int
}

func (p *processProxy) PID() int { return p.pid }

func (p *processProxy) Wait(ctx context.Context) (crs.Exit, error) {
	var e crs.Exit
	err := p.r.call(ctx, unbounded, "Wait", nil, &e)
	return e, err
}

var (
	_ crs.Module                = crsModule{}
	_ mca.Provisioner[crs.Host] = (*crsProvisioned)(nil)
	_ crs.Process               = (*processProxy)(nil)
)
