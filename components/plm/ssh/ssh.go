// Package plmssh is the ssh PLM component: it starts each node's gompid
// with OpenSSH (`ssh <node> gompid ...`). The job secret travels on the ssh
// session's standard input, never on a command line; the daemon dials back
// to gompirun over TCP with TLS pinned to the job's certificate. When
// gompirun dies, its ssh clients die with it (parent-death signal), the
// remote daemon's standard input closes, and the daemon ends its ranks.
package plmssh

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"gompi/frameworks/plm"
	"gompi/mca"
)

// Priority is below local's: ssh is used when asked for (--mca plm ssh).
const Priority = 10

// Parameters.
const (
	ParamAgent      = "plm_ssh_agent"
	ParamArgs       = "plm_ssh_args"
	ParamDaemonPath = "plm_ssh_daemon_path"
)

// New returns the ssh PLM component.
func New() mca.Component[plm.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: plm.Name, Name: "ssh",
		Description: "Start each node's gompid with OpenSSH",
		Priority:    Priority,
		Params: []mca.ParamSpec{
			{Name: ParamAgent, Type: mca.String, Default: "ssh", Level: mca.LevelUser,
				Help: "The ssh client to run (a program on $PATH or a path)"},
			{Name: ParamArgs, Type: mca.String, Default: "-o BatchMode=yes", Level: mca.LevelUser,
				Help: "Arguments given to the ssh client before the node name, split on spaces (e.g. -p 2222 -i key); BatchMode keeps a password prompt from hanging the launch"},
			{Name: ParamDaemonPath, Type: mca.String, Level: mca.LevelUser,
				Help: "Path of gompid on the remote nodes; empty = the same path as the gompid beside gompirun here"},
		},
	}, query)
}

func query(_ context.Context, q mca.Query) (plm.Module, int, error) {
	if q.Role != mca.RoleHNP {
		return nil, 0, fmt.Errorf("plm/ssh: only gompirun launches daemons: %w", mca.ErrSkip)
	}
	agent := q.Values.String(ParamAgent)
	path, err := exec.LookPath(agent)
	if err != nil {
		return nil, 0, fmt.Errorf("plm/ssh: no ssh client %q (install openssh-client or set %s): %w", agent, ParamAgent, mca.ErrSkip)
	}
	return &module{agent: path, args: strings.Fields(q.Values.String(ParamArgs)), daemon: q.Values.String(ParamDaemonPath)}, q.Priority, nil
}

type module struct {
	agent  string
	args   []string
	daemon string
}

func (m *module) Network() string { return "tcp" }

// Launch runs `ssh [args] <node> <gompid command>` for every node.
func (m *module) Launch(ctx context.Context, spec plm.Spec) ([]plm.Daemon, error) {
	remote := m.daemon
	if remote == "" {
		local, err := plm.FindDaemon("")
		if err != nil {
			return nil, fmt.Errorf("plm/ssh: %w: %w; or set %s to gompid's path on the nodes", plm.ErrLaunch, err, ParamDaemonPath)
		}
		remote = local
	}
	var out []plm.Daemon
	for _, node := range spec.Nodes {
		args := append(append([]string(nil), m.args...), node, RemoteCommand(remote, plm.DaemonArgs(spec, node)))
		cmd := exec.Command(m.agent, args...)
		p, err := plm.StartProcess(node, "ssh", cmd, spec.Handshake, spec.Stderr)
		if err != nil {
			for _, d := range out {
				_ = d.Kill()
			}
			return nil, fmt.Errorf("plm/ssh: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// RemoteCommand is the command line the remote shell runs: every word
// quoted for a POSIX shell, and exec'd so the shell does not stay between
// sshd and gompid.
func RemoteCommand(program string, args []string) string {
	words := []string{"exec", Quote(program)}
	for _, a := range args {
		words = append(words, Quote(a))
	}
	return strings.Join(words, " ")
}

// Quote quotes s as one POSIX shell word.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,@+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var (
	_ plm.Module = (*module)(nil)
)
