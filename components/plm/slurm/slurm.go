// Package plmslurm is the slurm PLM component: inside a Slurm allocation
// (salloc, sbatch: SLURM_JOB_ID set) it starts every node's gompid with one
// `srun` job step, one task per node, so that Slurm tracks, signals and
// accounts every daemon and, through them, every rank. It is selected
// automatically inside an allocation (its priority is above local's there)
// and skips itself outside one.
//
// Unlike Open MPI's plm/slurm, the step must not end the job when one
// daemon dies: a fault-tolerant job recovers from a lost node. The step runs
// with --no-kill and --kill-on-bad-exit=0 (the explicit 0 overrides a
// cluster's KillOnBadExit=1 and a SLURM_KILL_BAD_EXIT in the environment),
// and gompirun warns when it cannot tell that the allocation itself was
// made with --no-kill (Slurm 22.05 shows that nowhere a job can read: see
// package rte/slurm).
//
// The step's srun is every node's launch process: its standard input
// carries the handshake to every task (--input=all) and, when it closes,
// tells every daemon gompirun is gone. Each daemon learns its node's name
// from SLURMD_NODENAME. A recovery (errmgr autor) launches again with the
// remaining nodes: a new step that excludes the lost one. One node's
// daemon is ended alone (the HNP's reaction to a lost node) by an srun
// --overlap of kill on that node (plm.NodeKiller); the step itself is
// signalled once every node's daemon has been asked to end, or when
// gompirun ends.
package plmslurm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"gompi/frameworks/plm"
	"gompi/frameworks/plm/slurm"
	"gompi/mca"
)

// Priority inside an allocation: above local's (20), so a job inside an
// allocation runs on the allocation's nodes without asking.
const Priority = 40

// Parameters.
const (
	ParamSrun       = "plm_slurm_srun"
	ParamArgs       = "plm_slurm_args"
	ParamDaemonPath = "plm_slurm_daemon_path"
	ParamWarnNoKill = "plm_slurm_warn_no_kill"
)

// New returns the slurm PLM component.
func New() mca.Component[plm.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: plm.Name, Name: "slurm",
		Description: "Inside a Slurm allocation, start every node's gompid with one srun step (one task per node, --no-kill)",
		Priority:    Priority,
		Params: []mca.ParamSpec{
			{Name: ParamSrun, Type: mca.String, Default: "srun", Level: mca.LevelUser,
				Help: "The srun to run (a program on $PATH or a path)"},
			{Name: ParamArgs, Type: mca.String, Level: mca.LevelUser,
				Help: "More arguments for the daemons' srun step, split on spaces (e.g. --partition=p); gompi's own come after them and win"},
			{Name: ParamDaemonPath, Type: mca.String, Level: mca.LevelUser,
				Help: "Path of gompid on the allocation's nodes; empty = the same path as the gompid beside gompirun here"},
			{Name: ParamWarnNoKill, Type: mca.Bool, Default: "true", Level: mca.LevelUser,
				Help: "Warn when the allocation is not known to be made with --no-kill (SALLOC_NO_KILL or SBATCH_NO_KILL unset): without it Slurm ends the whole allocation when one node fails. Set to false once you allocate with -k"},
		},
	}, query)
}

func query(_ context.Context, q mca.Query) (plm.Module, int, error) {
	if q.Role != mca.RoleHNP {
		return nil, 0, fmt.Errorf("plm/slurm: only gompirun launches daemons: %w", mca.ErrSkip)
	}
	if !slurm.InAllocation(os.Getenv) {
		return nil, 0, fmt.Errorf("plm/slurm: %w: %w", slurm.ErrNotAllocation, mca.ErrSkip)
	}
	m := &module{job: os.Getenv("SLURM_JOB_ID"), args: strings.Fields(q.Values.String(ParamArgs)),
		daemon: q.Values.String(ParamDaemonPath), warnNoKill: q.Values.Bool(ParamWarnNoKill)}
	// Inside an allocation, a missing srun must not let local win the
	// selection and run every node here: the module is selected and its
	// Launch says what is wrong.
	srun := q.Values.String(ParamSrun)
	if m.srun, m.srunErr = exec.LookPath(srun); m.srunErr != nil {
		q.Note(fmt.Sprintf("inside Slurm job %s, but no %s: %v", m.job, srun, m.srunErr))
	} else {
		q.Note(fmt.Sprintf("inside Slurm job %s; daemons started by %s", m.job, m.srun))
	}
	return m, q.Priority, nil
}

type module struct {
	job        string
	srun       string
	srunErr    error
	args       []string
	daemon     string
	warnNoKill bool
	warned     sync.Once // the --no-kill warning, once per gompirun, not per launch
}

func (m *module) Network() string { return "tcp" }

// nodeScript runs as each task of the step: it puts the node's name,
// which only Slurm knows per task, where gompid's command line has it
// (after --job JOB, as plm.DaemonArgs orders them) and becomes gompid.
const nodeScript = `j=$1 k=$2; shift 2; exec "$0" "$j" "$k" --node "$SLURMD_NODENAME" "$@"`

// Launch starts one srun step whose tasks are the daemons of spec.Nodes.
func (m *module) Launch(ctx context.Context, spec plm.Spec) ([]plm.Daemon, error) {
	if m.srunErr != nil {
		return nil, fmt.Errorf("plm/slurm: %w: inside Slurm job %s but cannot run srun (install Slurm's client commands, set %s, or choose another launcher with --mca plm local|ssh): %w",
			plm.ErrLaunch, m.job, ParamSrun, m.srunErr)
	}
	remote := m.daemon
	if remote == "" {
		local, err := plm.FindDaemon("")
		if err != nil {
			return nil, fmt.Errorf("plm/slurm: %w: %w; or set %s to gompid's path on the nodes", plm.ErrLaunch, err, ParamDaemonPath)
		}
		remote = local
	}
	if m.warnNoKill && spec.Stderr != nil {
		m.warned.Do(func() {
			if a, err := slurm.ReadAllocation(os.Getenv); err == nil {
				if w := a.NoKillWarning(); w != "" {
					fmt.Fprintf(spec.Stderr, "gompirun: warning: %s; %s=false silences this warning\n", w, ParamWarnNoKill)
				}
			}
		})
	}
	args, err := daemonArgs(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(m.srun, append(append(SrunArgs(m.args, spec.Nodes), "sh", "-c", nodeScript, remote), args...)...)
	p, err := plm.StartProcess(strings.Join(spec.Nodes, ","), "srun", cmd, spec.Handshake, spec.Stderr)
	if err != nil {
		return nil, fmt.Errorf("plm/slurm: %w", err)
	}
	st := &step{p: p, live: len(spec.Nodes), srun: m.srun, job: m.job, stderr: spec.Stderr}
	out := make([]plm.Daemon, len(spec.Nodes))
	for i, n := range spec.Nodes {
		out[i] = &daemon{node: n, step: st}
	}
	return out, nil
}

// SrunArgs is srun's command line (without srun and the program) for a
// step of one task on each of nodes, extra first so gompi's own win.
func SrunArgs(extra []string, nodes []string) []string {
	n := fmt.Sprint(len(nodes))
	return append(append([]string(nil), extra...),
		"--nodes="+n, "--ntasks="+n, "--ntasks-per-node=1", "--nodelist="+strings.Join(nodes, ","),
		// A lost node or a failed daemon must not end the step or the job.
		"--no-kill", "--kill-on-bad-exit=0",
		// The handshake reaches every task; its end tells them gompirun is gone.
		"--input=all",
		// The daemon forks the node's ranks: they get the whole node, not
		// the one CPU a task would be bound to, and later steps (a
		// recovery's, the user's) may share the nodes.
		"--whole", "--overlap", "--cpu-bind=none", "--mpi=none",
		"--job-name=gompid")
}

// daemonArgs is gompid's command line without the node (nodeScript adds it).
func daemonArgs(spec plm.Spec) ([]string, error) {
	a := plm.DaemonArgs(spec, "")
	if len(a) < 4 || a[0] != "--job" || a[2] != "--node" {
		return nil, fmt.Errorf("plm/slurm: %w: gompid's command line %q does not start with --job JOB --node NODE", plm.ErrLaunch, a)
	}
	return append(a[:2:2], a[4:]...), nil
}

// step is the srun process all of a launch's daemons share.
type step struct {
	p         *plm.Process
	srun, job string
	stderr    io.Writer
	mu        sync.Mutex
	live      int // daemons not yet asked to end
}

// daemon is one node's task of the step.
type daemon struct {
	node string
	step *step
	once sync.Once
}

func (d *daemon) Node() string { return d.node }

// PID is srun's: the step's local process.
func (d *daemon) PID() int { return d.step.p.PID() }

// Wait returns when the step has ended. A failed step is reported for
// every node, as this node's error, with what srun said (srun names the
// nodes whose tasks failed).
func (d *daemon) Wait() error {
	err := d.step.p.Wait()
	var ee *plm.ExitError
	if errors.As(err, &ee) {
		e := *ee
		e.Node = d.node
		return &e
	}
	return err
}

// Kill ends the step once every node's daemon has been asked to end (one
// node's daemon alone: KillOnNode).
func (d *daemon) Kill() error {
	var err error
	d.once.Do(func() {
		d.step.mu.Lock()
		d.step.live--
		last := d.step.live == 0
		d.step.mu.Unlock()
		if last {
			err = d.step.p.Kill()
		}
	})
	return err
}

// killBound bounds the srun that ends one node's daemon: a node whose
// slurmd is gone does not answer, and its daemon is then beyond reach
// anyway (it ends when its link to gompirun does).
const killBound = 30 * time.Second

// KillOnNode ends this node's gompid alone: SIGTERM (and SIGCONT, for a
// stopped one) by an srun --overlap step of one task on the node, run in
// the background; the rest of the daemons' step runs on. A failure is
// said on the launch's stderr.
func (d *daemon) KillOnNode(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("plm/slurm: node %s: no pid of its daemon to end", d.node)
	}
	_ = d.Kill() // the step's count of daemons asked to end
	ctx, cancel := context.WithTimeout(context.Background(), killBound)
	cmd := exec.CommandContext(ctx, d.step.srun, KillArgs(d.step.job, d.node, pid)...)
	if err := cmd.Start(); err != nil {
		cancel()
		return fmt.Errorf("plm/slurm: end the daemon of node %s: %w", d.node, err)
	}
	go func() {
		defer cancel()
		if err := cmd.Wait(); err != nil && d.step.stderr != nil {
			fmt.Fprintf(d.step.stderr, "gompirun: could not end the daemon of node %s (pid %d) through srun: %v\n", d.node, pid, err)
		}
	}()
	return nil
}

// KillArgs is srun's command line (without srun) that signals pid on
// node inside job: one task sharing the node with the daemons' step.
func KillArgs(job, node string, pid int) []string {
	p := fmt.Sprint(pid)
	return []string{"--jobid=" + job, "--overlap", "--nodes=1", "--ntasks=1", "--nodelist=" + node, "--kill-on-bad-exit=0",
		"--job-name=gompid-end", "--input=none", "sh", "-c", `kill -TERM "$1" 2>/dev/null; kill -CONT "$1" 2>/dev/null; true`, "sh", p}
}

var (
	_ plm.Module     = (*module)(nil)
	_ plm.Daemon     = (*daemon)(nil)
	_ plm.NodeKiller = (*daemon)(nil)
)
