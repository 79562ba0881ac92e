// Package plmlocal is the local PLM component: every node name of a job is
// a simulated node on this machine, run by its own gompid process with its
// own node-local directory. It is how tests and the demo get several nodes
// on one machine, and the default PLM.
package plmlocal

import (
	"context"
	"fmt"
	"os/exec"

	"gompi/frameworks/plm"
	"gompi/mca"
)

// Priority is the component's default priority, above ssh's: launching
// needs no set-up.
const Priority = 20

// ParamDaemonPath names the gompid to run.
const ParamDaemonPath = "plm_local_daemon_path"

// New returns the local PLM component.
func New() mca.Component[plm.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: plm.Name, Name: "local",
		Description: "Start every node's gompid on this machine: each node name is a simulated node with its own daemon and node-local directory",
		Priority:    Priority,
		Params: []mca.ParamSpec{
			{Name: ParamDaemonPath, Type: mca.String, Level: mca.LevelTuner,
				Help: "The gompid to run; empty = gompid beside gompirun, else gompid on $PATH"},
		},
	}, query)
}

func query(_ context.Context, q mca.Query) (plm.Module, int, error) {
	if q.Role != mca.RoleHNP {
		return nil, 0, fmt.Errorf("plm/local: only gompirun launches daemons: %w", mca.ErrSkip)
	}
	return &module{path: q.Values.String(ParamDaemonPath)}, q.Priority, nil
}

type module struct{ path string }

func (m *module) Network() string { return "unix" }

// Launch starts one gompid per node. Each gets the handshake on its
// standard input and dies with gompirun (parent-death signal), even when
// gompirun is killed with SIGKILL.
func (m *module) Launch(ctx context.Context, spec plm.Spec) ([]plm.Daemon, error) {
	path, err := plm.FindDaemon(m.path)
	if err != nil {
		// No daemon to run is a launch failure like any other (hnp
		// tells them apart from its own errors with errors.Is).
		return nil, fmt.Errorf("plm/local: %w: %w", plm.ErrLaunch, err)
	}
	var out []plm.Daemon
	for _, node := range spec.Nodes {
		cmd := exec.Command(path, plm.DaemonArgs(spec, node)...)
		p, err := plm.StartProcess(node, "gompid", cmd, spec.Handshake, spec.Stderr)
		if err != nil {
			for _, d := range out {
				_ = d.Kill()
			}
			return nil, fmt.Errorf("plm/local: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

var (
	_ plm.Module = (*module)(nil)
)
