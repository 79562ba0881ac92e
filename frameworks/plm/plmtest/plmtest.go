// Package plmtest is the conformance kit every PLM component must pass. It
// launches real processes on this machine: the component is set up to run
// the kit's daemon (a shell script standing in for gompid, installed by the
// kit) on its nodes, and the kit checks what a launcher promises: each
// daemon gets gompid's command line for its node and the handshake on its
// standard input (never on a command line), Wait reports status 0 as nil
// and anything else as an error wrapping plm.ErrLaunch that names the node
// and says what the daemon wrote, and Kill ends a running or stopped
// daemon so that Wait returns.
package plmtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"gompi/frameworks"
	"gompi/frameworks/plm"
	"gompi/mca"
)

// Options describe the component under test.
type Options struct {
	// NewModule returns a module that runs daemon (an executable path,
	// the same on every node) as gompid.
	NewModule func(t *testing.T, daemon string) plm.Module
	// Nodes are two node names the module can launch on.
	Nodes []string
	// Network is what the module's Network must say.
	Network string
	// Parent returns the PID whose children the launch processes must be:
	// nil for this process; the plugin's when the component runs in a
	// plugin (package mca/plugin), whose daemons are its children.
	Parent func() int
}

func (o Options) parent() int {
	if o.Parent != nil {
		return o.Parent()
	}
	return os.Getpid()
}

// bound is how long the kit waits for an event before it fails instead of
// hanging. Over ssh an event waits on connection set-up, which took up to
// 12 s on a loaded 2-core machine under -race (and once more than 30 s with
// eight handshakes in flight), so the bound leaves ample headroom; a
// passing run never waits for it.
const bound = 2 * time.Minute

// script stands in for gompid: it reads the handshake line, saves it and
// its arguments in <dir>/<job>.<pid>, and then acts as its job name says:
// "ok..." exits 0, "fail..." says why on stderr and exits 3, "run..."
// says it is ready and runs until its standard input closes.
const script = `#!/bin/sh
IFS= read -r hs
f=%s/$2.$$
{ printf '%%s\n' "$hs"; printf '%%s\n' "$@"; } > "$f.tmp" && mv "$f.tmp" "$f"
case "$2" in
fail*) echo "plmtest: refusing to start on purpose" >&2; exit 3;;
run*) echo "plmtest: ready $4"; exec cat >/dev/null;;
esac
exit 0
`

// Select registers c in a fresh set of frameworks, resolves settings and
// returns the module selection picks for gompirun: how a component's test
// makes the module it hands the kit.
func Select(t *testing.T, c mca.Component[plm.Module], settings ...mca.Setting) plm.Module {
	t.Helper()
	params := mca.NewParams()
	set := frameworks.New(params)
	set.PLM.Register(c)
	vals, err := params.ResolveSettings(settings)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := set.PLM.SelectOne(t.Context(), vals, mca.RoleHNP, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Module
}

// Run runs the kit.
func Run(t *testing.T, opts Options) {
	t.Helper()
	if len(opts.Nodes) != 2 {
		t.Fatalf("plmtest: want two nodes, have %q", opts.Nodes)
	}
	dir := t.TempDir()
	daemon := filepath.Join(dir, "gompid")
	if err := os.WriteFile(daemon, fmt.Appendf(nil, script, dir), 0o755); err != nil {
		t.Fatal(err)
	}
	k := &kit{opts: opts, dir: dir, daemon: daemon}
	t.Run("network", func(t *testing.T) {
		if got := opts.NewModule(t, daemon).Network(); got != opts.Network {
			t.Errorf("Network() = %q, want %q", got, opts.Network)
		}
	})
	// The launches are independent (each job its own name) and a remote
	// launch spends most of its time in connection set-up: they run in
	// parallel.
	parallel := func(f func(t *testing.T)) func(t *testing.T) {
		return func(t *testing.T) { t.Parallel(); f(t) }
	}
	t.Run("launch-and-exit-0", parallel(k.testExit0))
	t.Run("exit-status", parallel(k.testFail))
	t.Run("kill-running", parallel(func(t *testing.T) { k.testKill(t, false) }))
	t.Run("kill-stopped", parallel(func(t *testing.T) { k.testKill(t, true) }))
}

type kit struct {
	opts   Options
	dir    string
	daemon string
}

func (k *kit) spec(t *testing.T, job string, out *Output) plm.Spec {
	return plm.Spec{
		Job:        job,
		Nodes:      k.opts.Nodes,
		Contact:    []string{"unix:/nonexistent/hnp.sock", "tcp:127.0.0.1:9"},
		Handshake:  []byte("secret-" + job),
		SessionDir: filepath.Join(k.dir, "session dir"),
		Verbose:    2,
		Stderr:     out,
	}
}

func (k *kit) launch(t *testing.T, spec plm.Spec) []plm.Daemon {
	t.Helper()
	ds, err := k.opts.NewModule(t, k.daemon).Launch(t.Context(), spec)
	if err != nil {
		t.Fatalf("launch %q: %v", spec.Nodes, err)
	}
	t.Cleanup(func() {
		for _, d := range ds {
			_ = d.Kill()
		}
		for _, d := range ds {
			// A component whose Kill failed must not hang the kit:
			// its launch process group is killed outright.
			done := make(chan error, 1)
			go func() { done <- d.Wait() }()
			select {
			case <-done:
			case <-time.After(bound):
				_ = unix.Kill(-d.PID(), unix.SIGKILL)
				<-done
			}
		}
	})
	if len(ds) != len(spec.Nodes) {
		t.Fatalf("launch gave %d daemons for nodes %q", len(ds), spec.Nodes)
	}
	for i, d := range ds {
		if d.Node() != spec.Nodes[i] {
			t.Errorf("daemon %d is for node %q, want %q", i, d.Node(), spec.Nodes[i])
		}
	}
	return ds
}

// wait waits for d's launch process, failing after bound.
func wait(t *testing.T, d plm.Daemon) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- d.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(bound):
		t.Fatalf("node %s: Wait has not returned after %v", d.Node(), bound)
		return nil
	}
}

// records returns what the daemons of job saved, by node: the handshake
// line, then their arguments.
func (k *kit) records(t *testing.T, job string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(k.dir, job+".*"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range files {
		if strings.HasSuffix(f, ".tmp") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(lines) < 5 {
			t.Fatalf("daemon record %s: %q", f, lines)
		}
		out[lines[4]] = lines // handshake, --job, job, --node, node, ...
	}
	return out
}

// checkRecords: one daemon per node, each with gompid's command line for
// its node and the job's handshake.
func (k *kit) checkRecords(t *testing.T, spec plm.Spec) {
	t.Helper()
	recs := k.records(t, spec.Job)
	if len(recs) != len(spec.Nodes) {
		t.Errorf("%d daemons ran for nodes %q: %q", len(recs), spec.Nodes, recs)
	}
	for _, node := range spec.Nodes {
		rec, ok := recs[node]
		if !ok {
			t.Errorf("no daemon ran for node %s", node)
			continue
		}
		if rec[0] != string(spec.Handshake) {
			t.Errorf("node %s: daemon read the handshake %q, want %q", node, rec[0], spec.Handshake)
		}
		if want := plm.DaemonArgs(spec, node); !slices.Equal(rec[1:], want) {
			t.Errorf("node %s: daemon ran with %q, want %q", node, rec[1:], want)
		}
	}
}

func (k *kit) testExit0(t *testing.T) {
	spec := k.spec(t, "ok-"+strconv.Itoa(os.Getpid()), &Output{})
	for _, d := range k.launch(t, spec) {
		if err := wait(t, d); err != nil {
			t.Errorf("node %s: daemon exited 0, Wait: %v", d.Node(), err)
		}
		if err := d.Kill(); err != nil {
			t.Errorf("node %s: Kill after the daemon ended: %v", d.Node(), err)
		}
	}
	k.checkRecords(t, spec)
}

func (k *kit) testFail(t *testing.T) {
	out := &Output{}
	spec := k.spec(t, "fail-"+strconv.Itoa(os.Getpid()), out)
	for _, d := range k.launch(t, spec) {
		err := wait(t, d)
		if !errors.Is(err, plm.ErrLaunch) {
			t.Errorf("node %s: daemon exited 3, Wait: %v, want an error wrapping plm.ErrLaunch", d.Node(), err)
			continue
		}
		var ee *plm.ExitError
		if errors.As(err, &ee) && ee.Code != 3 {
			t.Errorf("node %s: exit code %d, want 3", d.Node(), ee.Code)
		}
		for _, want := range []string{d.Node(), "status 3", "refusing to start on purpose"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("node %s: Wait error %q does not say %q", d.Node(), err, want)
			}
		}
	}
	if !strings.Contains(out.String(), "refusing to start on purpose") {
		t.Errorf("the daemons' stderr did not reach Spec.Stderr: %q", out.String())
	}
	k.checkRecords(t, spec)
}

// testKill launches daemons that run until killed, checks them while they
// run (children of this process, no secret on their command lines), then
// kills them, stopped first when stop is set.
func (k *kit) testKill(t *testing.T, stop bool) {
	out := &Output{}
	spec := k.spec(t, fmt.Sprintf("run-%d-%v", os.Getpid(), stop), out)
	ds := k.launch(t, spec)
	// Every daemon is ready before any launch process is stopped: the
	// daemons may share one (plm slurm's srun), which carries their output.
	for _, d := range ds {
		if err := out.WaitFor(t, "plmtest: ready "+d.Node()); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range ds {
		checkLaunchProcess(t, d, spec.Handshake, k.opts.parent())
		if stop {
			if err := stopProcess(d.PID(), k.opts.parent() == os.Getpid()); err != nil {
				t.Fatal(err)
			}
		}
	}
	k.checkRecords(t, spec)
	for _, d := range ds {
		if err := d.Kill(); err != nil {
			t.Errorf("node %s: Kill: %v", d.Node(), err)
		}
	}
	for _, d := range ds {
		if err := wait(t, d); err != nil && !errors.Is(err, plm.ErrLaunch) {
			t.Errorf("node %s: Wait after Kill: %v, want nil or an error wrapping plm.ErrLaunch", d.Node(), err)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", d.PID())); err == nil {
			t.Errorf("node %s: launch process %d still exists after Wait", d.Node(), d.PID())
		}
	}
}

// checkLaunchProcess: the launch process is parent's child (this
// process's, unless the component runs in a plugin) and carries no secret
// in its command line or environment.
func checkLaunchProcess(t *testing.T, d plm.Daemon, secret []byte, parent int) {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.PID()))
	if err != nil {
		t.Fatalf("node %s: launch process %d: %v", d.Node(), d.PID(), err)
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 2 || f[1] != strconv.Itoa(parent) {
		t.Errorf("node %s: launch process %d is not a child of process %d (stat %q)", d.Node(), d.PID(), parent, f)
	}
	for _, what := range []string{"cmdline", "environ"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", d.PID(), what))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, secret) {
			t.Errorf("node %s: the handshake is in the launch process's %s", d.Node(), what)
		}
	}
}

// Output collects what the daemons write and lets a test wait for a line.
type Output struct {
	mu   sync.Mutex
	b    bytes.Buffer
	more chan struct{} // closed and replaced on every write
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b.Write(p)
	if o.more != nil {
		close(o.more)
		o.more = nil
	}
	return len(p), nil
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// WaitFor waits until a line of the output is s, failing after bound.
func (o *Output) WaitFor(t *testing.T, s string) error {
	timeout := time.After(bound)
	for {
		o.mu.Lock()
		if slices.Contains(strings.Split(o.b.String(), "\n"), s) {
			o.mu.Unlock()
			return nil
		}
		if o.more == nil {
			o.more = make(chan struct{})
		}
		more := o.more
		o.mu.Unlock()
		select {
		case <-more:
		case <-timeout:
			return fmt.Errorf("no line %q from the daemons after %v; they wrote %q", s, bound, o.String())
		case <-t.Context().Done():
			return t.Context().Err()
		}
	}
}

// stopProcess stops pid with SIGSTOP and waits until it has stopped. For
// a child, waitid says so (and leaves the stop reported, so the owner's
// Wait is not disturbed); another process's child (a plugin's) is not
// waitable here, and its state in /proc is watched instead.
func stopProcess(pid int, child bool) error {
	if err := unix.Kill(pid, unix.SIGSTOP); err != nil {
		return fmt.Errorf("stop %d: %w", pid, err)
	}
	if !child {
		return watchStopped(pid)
	}
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil); err != nil {
		return fmt.Errorf("wait for %d to stop: %w", pid, err)
	}
	return nil
}

// watchStopped waits until /proc says pid is stopped, failing after bound.
// Nothing announces another process's child stopping, so it looks again
// every few milliseconds.
func watchStopped(pid int) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(bound)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return fmt.Errorf("wait for %d to stop: %w", pid, err)
		}
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "T" {
			return nil
		}
		select {
		case <-tick.C:
		case <-timeout:
			return fmt.Errorf("%d has not stopped after %v", pid, bound)
		}
	}
}
