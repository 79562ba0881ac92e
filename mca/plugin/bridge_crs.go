package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/mca"
)

// The CRS framework over the bridge. Checkpoint and Restart pass paths,
// PIDs, options and metadata; the snapshot's bytes stay on disk. Its Host
// crosses as crs.Host says: a rank's Save is lent to the module (its
// calls come back to the rank), a daemon's node is passed. A Restorer's
// Restore passes its request's descriptors on the plugin's descriptor
// socket (fds.go), one batch per call that the plugin closes once the
// module has returned; the restored process stays the plugin's, held by
// handle, its Wait a call bounded by its context only.

// implRestorer in a QueryResponse says the module is a crs.Restorer.
const implRestorer = "crs.Restorer"

var crsAdapter = adapter{
	methods: crsMethods,
	extended: func(m any) bool {
		_, ok := m.(mca.Provisioner[crs.Host])
		return ok
	},
	optional: map[string]func(m any) bool{implRestorer: func(m any) bool {
		_, ok := m.(crs.Restorer)
		return ok
	}},
	carrier: carry(func(s *frameworks.Set) *mca.Framework[crs.Module] { return s.CRS },
		func(r *remote, extended bool) crs.Module {
			restorer := slices.Contains(r.impl, implRestorer)
			switch {
			case extended && restorer:
				return &crsProvisionedRestorer{crsProvisioned{crsModule: crsModule{r}}}
			case extended:
				return &crsProvisioned{crsModule: crsModule{r}}
			case restorer:
				return crsRestorer{crsModule{r}}
			}
			return crsModule{r}
		}),
}

// crsHost is crs.Host with its functions lent.
type crsHost struct {
	Rank   bool
	Save   uint64 // RankHost.Save, lent
	Daemon bool
	Node   string
}

// crsRestore is a crs.RestoreRequest with its descriptors in a batch on
// the descriptor socket: first those of Stdin, Stdout and Stderr that Std
// says are there, then Files.
type crsRestore struct {
	Rank   int
	Dir    string
	Meta   map[string]string
	Launch crs.Launch
	Std    [3]bool
	Batch  uint64
	NFiles int // in the batch, the standard ones included
}

// crsRestored is the process a Restore brought back.
type crsRestored struct {
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
	"Restore": fn(restoreInPlugin),
	"Provision": fn(func(ctx context.Context, m crs.Module, a crsHost, sc *scope) (none, error) {
		host, err := crsHostOf(a, sc)
		if err != nil {
			return none{}, err
		}
		_, err = mca.Provision(ctx, m, host)
		return none{}, err
	}),
}

// restoreInPlugin takes the call's descriptors, restores through the
// module and holds the process it returns for the host's Wait.
func restoreInPlugin(ctx context.Context, m crs.Module, a crsRestore, sc *scope) (crsRestored, error) {
	files, err := sc.srv.fds.take(ctx, a.Batch, a.NFiles)
	if err != nil {
		return crsRestored{}, err
	}
	// The restored process has its own copies; the plugin's are the call's.
	defer closeFiles(files)
	r, ok := m.(crs.Restorer)
	if !ok {
		return crsRestored{}, fmt.Errorf("plugin: crs module %T restores nothing itself (not a crs.Restorer)", m)
	}
	req := crs.RestoreRequest{Rank: a.Rank, Dir: a.Dir, Meta: a.Meta, Launch: a.Launch}
	for i, std := range []**os.File{&req.Stdin, &req.Stdout, &req.Stderr} {
		if a.Std[i] && len(files) > 0 {
			*std, files = files[0], files[1:]
		}
	}
	req.Files = files
	p, err := r.Restore(ctx, req)
	if err != nil {
		return crsRestored{}, err
	}
	return crsRestored{Handle: sc.hold(p, processMethods), PID: p.PID()}, nil
}

// crsHostOf rebuilds the host's crs.Host in the plugin.
func crsHostOf(a crsHost, sc *scope) (crs.Host, error) {
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
	if a.Daemon {
		host.Daemon = &crs.DaemonHost{Node: a.Node}
	}
	return host, nil
}

var saveMethods = methods{
	"Save": fn(func(ctx context.Context, save func(context.Context, string) ([]string, error), dir string, _ *scope) ([]string, error) {
		return save(ctx, dir)
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

// restore sends req's descriptors as one batch and asks the plugin's
// module to restore with them.
func (m crsModule) restore(ctx context.Context, req crs.RestoreRequest) (crs.Process, error) {
	a := crsRestore{Rank: req.Rank, Dir: req.Dir, Meta: req.Meta, Launch: req.Launch}
	var files []*os.File
	for i, f := range []*os.File{req.Stdin, req.Stdout, req.Stderr} {
		if f != nil {
			a.Std[i] = true
			files = append(files, f)
		}
	}
	if slices.Contains(req.Files, nil) {
		return nil, errors.New("plugin: crs restore: a nil file in RestoreRequest.Files (each descriptor from 3 on must be given)")
	}
	files = append(files, req.Files...)
	// A batch the plugin never takes stays open there: send none for a
	// call that cannot be made.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("plugin: crs restore: %w", err)
	}
	var err error
	a.NFiles = len(files)
	if a.Batch, err = m.p.fds.send(files); err != nil {
		return nil, err
	}
	var r crsRestored
	if err := m.call(ctx, dataIO, "Restore", a, &r); err != nil {
		return nil, err
	}
	return &processProxy{r: m.child(r.Handle), pid: r.PID}, nil
}

// crsRestorer is a plugin's CRS module that restores processes itself.
type crsRestorer struct{ crsModule }

func (m crsRestorer) Restore(ctx context.Context, req crs.RestoreRequest) (crs.Process, error) {
	return m.restore(ctx, req)
}

// crsProvisioned is a plugin's CRS module that takes a Host.
type crsProvisioned struct {
	crsModule
	lent []uint64 // what the last Provision lent; guarded by its callers (one provision at a time)
}

func (m *crsProvisioned) Provision(ctx context.Context, h crs.Host) error {
	m.unlend(m.lent...)
	m.lent = nil
	var a crsHost
	if h.Rank != nil {
		a.Rank = true
		if h.Rank.Save != nil {
			a.Save = m.lend(h.Rank.Save, saveMethods)
			m.lent = append(m.lent, a.Save)
		}
	}
	if d := h.Daemon; d != nil {
		a.Daemon, a.Node = true, d.Node
	}
	return m.call(ctx, control, "Provision", a, nil)
}

// crsProvisionedRestorer takes a Host and restores processes itself.
type crsProvisionedRestorer struct{ crsProvisioned }

func (m *crsProvisionedRestorer) Restore(ctx context.Context, req crs.RestoreRequest) (crs.Process, error) {
	return m.restore(ctx, req)
}

// processProxy is a process a plugin's CRS restored; the plugin waits on
// it.
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
	_ crs.Restorer              = crsRestorer{}
	_ mca.Provisioner[crs.Host] = (*crsProvisioned)(nil)
	_ mca.Provisioner[crs.Host] = (*crsProvisionedRestorer)(nil)
	_ crs.Restorer              = (*crsProvisionedRestorer)(nil)
	_ crs.Process               = (*processProxy)(nil)
)
