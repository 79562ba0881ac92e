// Package slurmtest runs a private Slurm cluster on this machine for tests:
// munged with its own socket and key, slurmctld and three slurmd (nodes n1,
// n2, n3, all this host, each on its own port) in one scratch folder, with
// free ports, so that two test runs side by side do not collide with each
// other or with a real cluster. Slurm commands reach it through the
// environment Env returns (SLURM_CONF). It needs root and Debian's
// slurm-wlm and munge packages (InstallHint); Need skips a test without
// them outside CI and fails it in CI, where .ci/run installs them.
package slurmtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// InstallHint is how to get what the cluster needs.
const InstallHint = "apt-get install -y --no-install-recommends slurm-wlm munge"

// Nodes are the cluster's node names.
var Nodes = []string{"n1", "n2", "n3"}

// startBound bounds the cluster's start: a failure bound, not a wait (a
// start polls sinfo and returns as soon as every node is idle).
const startBound = 2 * time.Minute

var programs = []string{"munged", "slurmctld", "slurmd", "sinfo", "srun", "salloc", "sbatch", "squeue", "scancel"}

// Need skips t (fails it in CI) when this machine cannot run the cluster.
func Need(t testing.TB) {
	t.Helper()
	if msg := Unavailable(); msg != "" {
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// Unavailable says why the cluster cannot run here, or "".
func Unavailable() string {
	var missing []string
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	switch {
	case len(missing) > 0:
		return fmt.Sprintf("no %s: install with `%s`", strings.Join(missing, ", "), InstallHint)
	case os.Getuid() != 0:
		return "the Slurm tests run slurmctld, slurmd and munged, which need root"
	}
	return ""
}

// Cluster is a running private cluster.
type Cluster struct {
	Dir  string // the scratch folder: slurm.conf, state, logs
	Conf string // slurm.conf's path
	pids []pidFile
}

type pidFile struct{ what, path string }

// Start starts a cluster in dir (which must exist and be empty) and waits
// until sinfo shows every node idle. On error, whatever was started is
// stopped.
func Start(ctx context.Context, dir string) (*Cluster, error) {
	if msg := Unavailable(); msg != "" {
		return nil, errors.New("slurmtest: " + msg)
	}
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf")}
	if err := c.start(ctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("slurmtest: %w%s", err, c.logTail())
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	for _, d := range []string{"state", "spool", "log", "munge"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o700); err != nil {
			return err
		}
	}
	ports, err := freePorts(1 + len(Nodes))
	if err != nil {
		return err
	}
	if err := c.writeConfig(ports); err != nil {
		return err
	}
	m := filepath.Join(c.Dir, "munge")
	c.pids = append(c.pids, pidFile{"munged", filepath.Join(m, "pid")})
	if err := c.run(ctx, "munged", "--force", "--socket="+filepath.Join(m, "sock"), "--key-file="+filepath.Join(m, "key"),
		"--pid-file="+filepath.Join(m, "pid"), "--log-file="+filepath.Join(c.Dir, "log", "munged.log"), "--seed-file="+filepath.Join(m, "seed")); err != nil {
		return err
	}
	c.pids = append(c.pids, pidFile{"slurmctld", filepath.Join(c.Dir, "ctld.pid")})
	if err := c.run(ctx, "slurmctld", "-f", c.Conf); err != nil {
		return err
	}
	for _, n := range Nodes {
		c.pids = append(c.pids, pidFile{"slurmd " + n, filepath.Join(c.Dir, "slurmd-"+n+".pid")})
		if err := c.run(ctx, "slurmd", "-f", c.Conf, "-N", n); err != nil {
			return err
		}
	}
	return c.waitIdle(ctx)
}

// writeConfig writes the munge key and slurm.conf: one NodeName line per
// node, since each has its own free port.
func (c *Cluster) writeConfig(ports []int) error {
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "munge", "key"), key, 0o400); err != nil {
		return err
	}
	host, err := shortHostname()
	if err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "ClusterName=gompitest\nSlurmctldHost=%s\nSlurmctldPort=%d\n", host, ports[0])
	fmt.Fprintf(&b, "AuthType=auth/munge\nAuthInfo=socket=%s\nCredType=cred/munge\n", filepath.Join(c.Dir, "munge", "sock"))
	b.WriteString("ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSchedulerType=sched/backfill\n")
	b.WriteString("SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\nSlurmUser=root\nReturnToService=2\nKillWait=10\nMpiDefault=none\n")
	for k, v := range map[string]string{"StateSaveLocation": "state", "SlurmdSpoolDir": "spool/%n", "SlurmctldPidFile": "ctld.pid",
		"SlurmdPidFile": "slurmd-%n.pid", "SlurmctldLogFile": "log/ctld.log", "SlurmdLogFile": "log/slurmd-%n.log"} {
		fmt.Fprintf(&b, "%s=%s\n", k, filepath.Join(c.Dir, v))
	}
	for i, n := range Nodes {
		fmt.Fprintf(&b, "NodeName=%s NodeHostname=%s Port=%d CPUs=2 State=UNKNOWN\n", n, host, ports[1+i])
	}
	fmt.Fprintf(&b, "PartitionName=p Nodes=%s Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4\n", strings.Join(Nodes, ","))
	return os.WriteFile(c.Conf, b.Bytes(), 0o644)
}

// run runs a daemon's start command, which forks the daemon and returns.
func (c *Cluster) run(ctx context.Context, prog string, args ...string) error {
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = c.Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// waitIdle polls sinfo until every node is idle.
func (c *Cluster) waitIdle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startBound)
	defer cancel()
	want := fmt.Sprintf("idle %d", len(Nodes))
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		out, err := c.Command(ctx, "sinfo", "-h", "-o", "%t %D").CombinedOutput()
		last = strings.TrimSpace(string(out))
		if err == nil && strings.Contains("\n"+last+"\n", "\n"+want+"\n") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the nodes are not idle after %v: sinfo says %q: %w", startBound, last, ctx.Err())
		case <-tick.C:
		}
	}
}

// Env is this process's environment with SLURM_CONF pointing at the
// cluster and no variable of an enclosing allocation.
func (c *Cluster) Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLURM_") && !strings.HasPrefix(kv, "SALLOC_") && !strings.HasPrefix(kv, "SBATCH_") {
			env = append(env, kv)
		}
	}
	return append(env, "SLURM_CONF="+c.Conf)
}

// Command is a Slurm command run against the cluster.
func (c *Cluster) Command(ctx context.Context, prog string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = c.Env()
	return cmd
}

// Stop cancels the cluster's jobs and ends every daemon by the PID in its
// pid file, waiting (within a bound) until each has exited.
func (c *Cluster) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), startBound)
	defer cancel()
	if len(c.pids) > 1 {
		_ = c.Command(ctx, "scancel", "--full", "--user=root").Run()
		_ = c.waitNoJobs(ctx)
	}
	for i := len(c.pids) - 1; i >= 0; i-- {
		b, err := os.ReadFile(c.pids[i].path)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGTERM)
		waitGone(ctx, pid)
	}
}

// waitNoJobs polls squeue until the cluster has no job.
func (c *Cluster) waitNoJobs(ctx context.Context) error {
	for {
		out, err := c.Command(ctx, "squeue", "-h").Output()
		if err == nil && len(bytes.TrimSpace(out)) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitGone polls until pid no longer exists (the daemons are not our
// children: they daemonized).
func waitGone(ctx context.Context, pid int) {
	for syscall.Kill(pid, 0) == nil {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logTail is the end of the cluster's logs, for a start that failed.
func (c *Cluster) logTail() string {
	files, _ := filepath.Glob(filepath.Join(c.Dir, "log", "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if len(data) > 1500 {
			data = data[len(data)-1500:]
		}
		fmt.Fprintf(&b, "\n--- %s:\n%s", filepath.Base(f), data)
	}
	return b.String()
}

// freePorts finds n ports nothing listens on, by listening on them all at
// once and closing them: another process may take one before the daemon
// binds it, which fails the start with the daemon's own message.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func shortHostname() (string, error) {
	h, err := os.Hostname()
	if err != nil {
		return "", err
	}
	h, _, _ = strings.Cut(h, ".")
	return h, nil
}

// KillNode kills node's slurmd with SIGKILL, as a node failure would end
// it (the processes of its steps live on, as on a node cut off).
func (c *Cluster) KillNode(node string) error {
	b, err := os.ReadFile(filepath.Join(c.Dir, "slurmd-"+node+".pid"))
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("slurmtest: slurmd of %s: bad pid file %q", node, b)
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// StartNode starts node's slurmd again and waits until every node is idle.
func (c *Cluster) StartNode(ctx context.Context, node string) error {
	if err := c.run(ctx, "slurmd", "-f", c.Conf, "-N", node); err != nil {
		return err
	}
	return c.waitIdle(ctx)
}
