// Package plm is the Process Lifecycle Management framework: how gompirun
// (the HNP) starts one gompid daemon per node of a job. A PLM only starts
// daemons and reports when their launch processes end; everything after
// that (jobs, ranks, output, faults) runs over the control plane the
// daemons dial back to.
//
// Components: local (every node name is a simulated node on this machine:
// one gompid process each, with its own node-local directory), ssh
// (OpenSSH: `ssh <node> gompid ...`) and slurm (inside a Slurm allocation:
// one `srun` step whose tasks are the daemons). local is the default
// outside an allocation, slurm inside one; ssh is chosen with
// `--mca plm ssh`. Package slurm below reads a Slurm allocation.
//
// The framework also registers the runtime's own parameters that belong
// to no component: where node-local directories live, launch and kill
// timeouts, and the heartbeat parameters the HNP's failure detection uses
// (named errmgr_base_heartbeat_*, owned by "errmgr", since they say when
// a node counts as lost).
package plm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	"gompi/frameworks/plm/proc"
	"gompi/mca"
)

// Name of the framework, and of its selection parameter.
const Name = "plm"

// ErrLaunch is wrapped by errors about a daemon that could not be started
// or whose launch process ended before it reached the HNP.
var ErrLaunch = errors.New("daemon launch failed")

// Parameters registered by NewFramework.
const (
	ParamSessionDir    = "plm_base_session_dir"
	ParamHNPAddress    = "plm_base_hnp_address"
	ParamLaunchTimeout = "plm_base_launch_timeout"
	ParamKillGrace     = "plm_base_kill_grace"
	ParamGOMAXPROCS    = "plm_base_gomaxprocs"
	ParamHBPeriod      = "errmgr_base_heartbeat_period"
	ParamHBTimeout     = "errmgr_base_heartbeat_timeout"
	// The unresponsive-rank detector's: a rank beats to its gompid, which
	// kills a silent one and reports it failed (rte/daemon, liveness.go).
	ParamRankHBPeriod  = "errmgr_base_rank_heartbeat_period"
	ParamRankHBTimeout = "errmgr_base_rank_heartbeat_timeout"
	// ParamRadix is the radix of the daemon tree (package rte/routed);
	// ParamTreeStats names a file for its traffic counts.
	ParamRadix     = "routed_radix"
	ParamTreeStats = "routed_stats"
)

// NewFramework creates the plm registry and registers its parameters and
// the runtime's heartbeat parameters in params.
func NewFramework(params *mca.Params) *mca.Framework[Module] {
	f := mca.NewFramework[Module](params, Name, "Process Lifecycle Management: starting one gompid daemon per node",
		mca.WithParams(
			mca.ParamSpec{Name: ParamSessionDir, Type: mca.String, Level: mca.LevelTuner,
				Help: "Folder under which each daemon keeps its node-local directory <dir>/<job>/<node>; empty = $TMPDIR/gompi-<uid> on each node"},
			mca.ParamSpec{Name: ParamHNPAddress, Type: mca.String, Level: mca.LevelTuner,
				Help: "host[:port] gompirun listens on for daemons on other machines (plm ssh); empty = every interface on a free port, daemons trying each address"},
			mca.ParamSpec{Name: ParamLaunchTimeout, Type: mca.Duration, Default: "60s", Level: mca.LevelTuner,
				Help: "How long gompirun waits for every daemon to start and connect back before giving up"},
			mca.ParamSpec{Name: ParamKillGrace, Type: mca.Duration, Default: "2s", Level: mca.LevelTuner,
				Help: "How long a rank has to exit after SIGTERM when a job is aborted, before it is killed with SIGKILL"},
			mca.ParamSpec{Name: ParamGOMAXPROCS, Type: mca.Int, Default: "0", Level: mca.LevelTuner,
				Help: "GOMAXPROCS of each rank: 0 shares the node's processors out, max(1, cores / ranks on the node), as Open MPI binds one rank per core; n > 0 sets n; < 0 leaves the Go runtime's default (every core). A GOMAXPROCS in the ranks' environment (-x, or gompirun's own) wins"},
		))
	params.Register("routed",
		mca.ParamSpec{Name: ParamRadix, Type: mca.Int, Default: "32", Level: mca.LevelTuner,
			Help: "Radix of the daemon tree: gompirun is linked to at most this many daemons, each daemon to its parent and at most this many children, and the launch, output, fences, heartbeats and checkpoint messages of deeper daemons are relayed by their ancestors. 0 links every daemon to gompirun (a star). A job of at most this many nodes is a star"},
		mca.ParamSpec{Name: ParamTreeStats, Type: mca.String, Level: mca.LevelDev,
			Help: "File gompirun writes when the job's daemons have left: the daemon tree (each daemon's parent) and the control messages and bytes on each link, by kind, as JSON (for tests and measurements); empty = none"})
	params.Register("errmgr",
		mca.ParamSpec{Name: ParamHBPeriod, Type: mca.Duration, Default: "1s", Level: mca.LevelTuner,
			Help: "How often each daemon tells gompirun it is alive"},
		mca.ParamSpec{Name: ParamHBTimeout, Type: mca.Duration, Default: "5s", Level: mca.LevelTuner,
			Help: "Silence after which gompirun declares a daemon's node lost and hands the fault to the ErrMgr stack"},
		mca.ParamSpec{Name: ParamRankHBPeriod, Type: mca.Duration, Default: "1s", Level: mca.LevelTuner,
			Help: "How often each rank tells its gompid it is alive (on the rank's control connection, not the data plane); 0 = no beats, which turns the unresponsive-rank detector off"},
		mca.ParamSpec{Name: ParamRankHBTimeout, Type: mca.Duration, Default: "30s", Level: mca.LevelTuner,
			Help: "Silence after which gompid declares a rank unresponsive (stopped from outside, its process not scheduled), kills it with SIGKILL and reports it failed to the ErrMgr stack; 0 = off. Not counted while the runtime itself has the rank detached: a transparent checkpoint's dump, a checkpoint --stop, a migration"},
	)
	return f
}

// Spec is what a PLM needs to start the daemons of a job.
type Spec struct {
	Job string
	// Nodes names the nodes; one daemon is started per name.
	Nodes []string
	// Contact lists the addresses a daemon dials back, tried in order:
	// "unix:/path" or "tcp:host:port".
	Contact []string
	// Handshake is written as one line on each daemon's standard input:
	// the job secret and what else a daemon must know but no one else
	// may see. It never appears on a command line or in an environment
	// another user could read.
	Handshake []byte
	// SessionDir is the value of plm_base_session_dir ("" lets each
	// daemon choose on its node).
	SessionDir string
	// Verbose is the daemons' log verbosity (plm_base_verbose).
	Verbose int
	// Stderr receives the daemons' own diagnostics (and, for ssh, the
	// ssh client's); nil discards them.
	Stderr io.Writer
}

// Module is a selected PLM.
type Module interface {
	// Network is how this module's daemons reach the HNP: "unix" when they
	// run on this machine, "tcp" when they may run elsewhere.
	Network() string
	// Launch starts one daemon per node and returns once they are started
	// (not once they have connected back). On error, daemons already
	// started are killed.
	Launch(ctx context.Context, spec Spec) ([]Daemon, error)
}

// Daemon is one started daemon as its launcher sees it: the local process
// that is the daemon (local) or carries it (the ssh client).
type Daemon interface {
	Node() string
	// PID is the local process: gompid itself, or the ssh client.
	PID() int
	// Wait blocks until the launch process has exited and says how: nil
	// for status 0, otherwise an error wrapping ErrLaunch naming the node,
	// the status and the last lines the process wrote on stderr.
	Wait() error
	// Kill asks the launch process to end (SIGTERM, then SIGCONT in case
	// it is stopped, to its process group);
	// a daemon whose connection to its launcher drops cleans up its
	// ranks and exits.
	Kill() error
}

// NodeKiller is a Daemon whose launch process carries other nodes'
// daemons too (a Slurm step): KillOnNode ends this node's daemon alone,
// by its pid on its node (the daemon said it in its hello), and returns
// without waiting for it.
type NodeKiller interface {
	Daemon
	KillOnNode(pid int) error
}

// DaemonArgs is the gompid command line (without the program) for node.
func DaemonArgs(spec Spec, node string) []string {
	args := []string{"--job", spec.Job, "--node", node, "--hnp", strings.Join(spec.Contact, ",")}
	if spec.SessionDir != "" {
		args = append(args, "--session-dir", spec.SessionDir)
	}
	if spec.Verbose > 0 {
		args = append(args, "--verbose", fmt.Sprint(spec.Verbose))
	}
	return args
}

// Process is a Daemon over a local *exec.Cmd, shared by the components.
type Process struct {
	node string
	cmd  *exec.Cmd
	what string // "gompid" or "ssh", for messages
	tail *tailBuffer
	done chan struct{}
	err  error
}

// StartProcess starts cmd as the launch process of node's daemon: in its
// own process group, with SIGTERM as its parent-death signal (so a
// gompirun killed outright still ends its daemons), the handshake on its
// standard input (kept open: its end tells the daemon gompirun is gone),
// and its output copied to stderr with the last lines kept for errors.
// what names the process in messages ("gompid", "ssh").
func StartProcess(node, what string, cmd *exec.Cmd, handshake []byte, stderr io.Writer) (*Process, error) {
	if stderr == nil {
		stderr = io.Discard
	}
	p := &Process{node: node, cmd: cmd, what: what, tail: &tailBuffer{max: 4096}, done: make(chan struct{})}
	out := io.MultiWriter(stderr, p.tail)
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("plm: node %s: %w: %w", node, ErrLaunch, err)
	}
	if err := proc.Start(cmd, syscall.SIGTERM); err != nil {
		return nil, fmt.Errorf("plm: node %s: %w: start %s: %w", node, ErrLaunch, cmd.Path, err)
	}
	// The pipe is far larger than one handshake line, so this cannot block
	// on a daemon that is slow to read. stdin stays open until the process
	// ends: closing it is how a daemon learns gompirun has gone.
	line := append(bytes.TrimRight(handshake, "\n"), '\n')
	// A process that ended before reading it (EPIPE) says why it ended
	// better than the write does: its status reaches Wait as usual.
	if _, err := stdin.Write(line); err != nil && !errors.Is(err, syscall.EPIPE) {
		_ = proc.SignalGroup(cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return nil, fmt.Errorf("plm: node %s: %w: write handshake to %s: %w", node, ErrLaunch, what, err)
	}
	go func() {
		err := cmd.Wait()
		if err != nil {
			p.err = p.describe(err)
		}
		close(p.done)
	}()
	return p, nil
}

func (p *Process) describe(err error) error {
	e := &ExitError{Node: p.node, What: p.what, PID: p.cmd.Process.Pid, Code: -1, Said: strings.TrimSpace(p.tail.String())}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		e.Code, e.Signal = proc.Status(ee.ProcessState)
	} else {
		e.Err = err
	}
	return e
}

// ExitError says how a daemon's launch process ended badly. It matches
// ErrLaunch with errors.Is.
type ExitError struct {
	Node   string
	What   string // "gompid" or "ssh"
	PID    int
	Code   int            // exit status, when it exited
	Signal syscall.Signal // the signal that killed it, or 0
	Said   string         // the end of what it wrote on stderr
	Err    error          // when waiting for it failed
}

func (e *ExitError) Error() string {
	how := fmt.Sprintf("exited with status %d", e.Code)
	switch {
	case e.Err != nil:
		how = "could not be waited for: " + e.Err.Error()
	case e.Signal != 0:
		how = fmt.Sprintf("was killed by signal %d (%v)", int(e.Signal), e.Signal)
	}
	msg := fmt.Sprintf("%s (pid %d) for node %s %s", e.What, e.PID, e.Node, how)
	if e.Said != "" {
		msg += "; it said: " + e.Said
	}
	return msg
}

// Is makes an ExitError match ErrLaunch.
func (e *ExitError) Is(target error) bool { return target == ErrLaunch }

// Unwrap returns the wait error, if any.
func (e *ExitError) Unwrap() error { return e.Err }

// Node implements Daemon.
func (p *Process) Node() string { return p.node }

// PID implements Daemon.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Wait implements Daemon.
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// Done is closed when the launch process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Kill implements Daemon.
func (p *Process) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	err := proc.SignalGroup(p.cmd.Process.Pid, syscall.SIGTERM)
	// A stopped daemon (SIGSTOP, a debugger) only acts on SIGTERM once continued.
	_ = proc.SignalGroup(p.cmd.Process.Pid, syscall.SIGCONT)
	return err
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// FindDaemon returns the gompid to run: path when set, else gompid beside
// the running executable, else gompid on $PATH.
func FindDaemon(path string) (string, error) {
	if path != "" {
		if _, err := exec.LookPath(path); err != nil {
			return "", fmt.Errorf("plm: daemon %s: %w", path, err)
		}
		return path, nil
	}
	if exe, err := os.Executable(); err == nil {
		cand := exe[:strings.LastIndex(exe, "/")+1] + "gompid"
		if st, err := os.Stat(cand); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return cand, nil
		}
	}
	p, err := exec.LookPath("gompid")
	if err != nil {
		return "", fmt.Errorf("plm: no gompid beside %s or on $PATH: install gompid next to gompirun or set its path with --mca plm_local_daemon_path PATH: %w", os.Args[0], err)
	}
	return p, nil
}

var _ Daemon = (*Process)(nil)
