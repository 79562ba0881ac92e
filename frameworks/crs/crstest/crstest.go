// Package crstest is the conformance kit every CRS component must pass, in
// process and through the plugin bridge. It checkpoints a real child
// process, so it also shows that a component writes only inside the
// directory it is given.
package crstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"gompi/frameworks/crs"
)

// Options describe the component under test.
type Options struct {
	// CanCheckpoint says the component can save an external process by PID.
	// When false the kit expects crs.ErrNotCheckpointable and an empty Dir.
	CanCheckpoint bool
	// Target is the argv of the process to checkpoint; default
	// {"sleep", "1000"}. It must run until it is killed.
	Target []string
	// Isolate starts the target as a transparent CRS needs it, as gompid
	// starts a rank for one: the init of its own PID namespace and its
	// session's leader (StartIsolated).
	Isolate bool
}

// Run runs the kit. newModule returns a fresh module for each subtest.
// A module that is a crs.Restorer is also restored from its checkpoint
// (the restored process must run until killed, and its Wait say so), its
// Restart must refuse a directory that holds a snapshot, and a Counter it
// restores with new pipes must count on into them (restore-with-pipes:
// needs Isolate).
func Run(t *testing.T, newModule func(t *testing.T) crs.Module, opts Options) {
	t.Helper()
	if len(opts.Target) == 0 {
		opts.Target = []string{"sleep", "1000"}
	}
	if opts.CanCheckpoint {
		t.Run("checkpoint-and-restart", func(t *testing.T) { testCheckpoint(t, newModule(t), opts) })
		t.Run("restart-empty-dir", func(t *testing.T) { testRestartEmpty(t, newModule(t)) })
		// Only a Restorer is restored with pipes (the daemon relaunches
		// what the others' Restart returns): the subtest exists for it
		// alone, so no other module's run skips it.
		if _, ok := newModule(t).(crs.Restorer); ok {
			t.Run("restore-with-pipes", func(t *testing.T) {
				m := newModule(t)
				if !opts.Isolate {
					t.Fatal("a crs.Restorer restores process trees as gompid starts them: run the kit with Options.Isolate")
				}
				testRestorePipes(t, m, m.(crs.Restorer))
			})
		}
	} else {
		t.Run("not-checkpointable", func(t *testing.T) { testRefuses(t, newModule(t), opts) })
	}
	t.Run("dead-pid", func(t *testing.T) { testDeadPID(t, newModule(t)) })
	t.Run("cancelled", func(t *testing.T) { testCancelled(t, newModule(t), opts) })
}

// StartTarget starts argv as a child that the test kills and reaps on
// cleanup, and returns it.
func StartTarget(t *testing.T, argv []string) *exec.Cmd {
	t.Helper()
	return start(t, exec.Command(argv[0], argv[1:]...))
}

// StartIsolated starts cmd (unstarted) as StartTarget does, as the init
// of a new PID namespace and its session's leader (as `unshare --pid
// --fork setsid`, without a new mount namespace): how a transparent CRS
// needs a process tree to dump and restore it. It needs root.
func StartIsolated(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWPID
	cmd.SysProcAttr.Setsid = true
	return start(t, cmd)
}

func start(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	argv := cmd.Args
	if cmd.Dir == "" {
		cmd.Dir = t.TempDir()
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start target %v: %v", argv, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Start returns once the exec has begun, before the kernel has set
	// up the new image's arguments: a component that looks at the target
	// at once can find its command line empty, as if it were a zombie
	// (seen on a loaded machine). Wait until the exec is complete.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid)); err == nil && len(b) > 0 {
			return cmd
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("target %v (pid %d): no command line after a minute", argv, cmd.Process.Pid)
		}
	}
}

// DeadPID returns the PID of a process that has exited and been reaped.
func DeadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("run true: %v", err)
	}
	return cmd.Process.Pid
}

// snapDir returns an empty snapshot directory inside a parent that holds
// nothing else, so writes outside Dir can be seen.
func snapDir(t *testing.T) (parent, dir string) {
	t.Helper()
	parent = t.TempDir()
	dir = filepath.Join(parent, "snap")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return parent, dir
}

// onlySnapDir fails if parent holds anything but the snapshot directory.
func onlySnapDir(t *testing.T, parent string) {
	t.Helper()
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "snap" {
			t.Errorf("component wrote %q outside the snapshot directory", filepath.Join(parent, e.Name()))
		}
	}
}

// running reports whether pid is alive and neither a zombie nor stopped.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may
	// itself hold spaces or parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	switch b[i+2] {
	case 'Z', 'X', 'T', 't':
		return false
	}
	return true
}

func emptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("%s holds %q; the component should have written nothing", dir, e.Name())
	}
}

// startTarget starts the kit's target as opts say.
func startTarget(t *testing.T, opts Options) *exec.Cmd {
	t.Helper()
	if opts.Isolate {
		return StartIsolated(t, exec.Command(opts.Target[0], opts.Target[1:]...))
	}
	return StartTarget(t, opts.Target)
}

func testCheckpoint(t *testing.T, m crs.Module, opts Options) {
	target := startTarget(t, opts)
	parent, dir := snapDir(t)
	res, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: target.Process.Pid, Dir: dir})
	if err != nil {
		t.Fatalf("checkpoint pid %d: %v", target.Process.Pid, err)
	}
	if res.State != crs.StateContinue {
		t.Errorf("state %v, want %v", res.State, crs.StateContinue)
	}
	if len(res.Files) == 0 {
		t.Fatal("checkpoint reported no files")
	}
	for _, f := range res.Files {
		if !filepath.IsLocal(f) {
			t.Errorf("file %q is not a path inside Dir", f)
			continue
		}
		fi, err := os.Lstat(filepath.Join(dir, f))
		if err != nil || !fi.Mode().IsRegular() {
			t.Errorf("reported file %q: %v (want a regular file inside %s)", f, err, dir)
		}
	}
	onlySnapDir(t, parent)
	if !running(target.Process.Pid) {
		t.Errorf("target pid %d stopped running after a checkpoint without Term or Stop", target.Process.Pid)
	}
	if r, ok := m.(crs.Restorer); ok {
		testRestore(t, m, r, dir, res, target)
		onlySnapDir(t, parent)
		return
	}

	l, err := m.Restart(t.Context(), crs.RestartRequest{Dir: dir, Meta: res.Meta,
		Launch: crs.Launch{Argv: target.Args, Dir: target.Dir}})
	if err != nil {
		t.Fatalf("restart from %s: %v", dir, err)
	}
	if !slices.Equal(l.Argv, target.Args) {
		t.Errorf("restart argv %q, want the target's %q", l.Argv, target.Args)
	}
	onlySnapDir(t, parent)
}

// testRestore restores a Restorer's checkpoint of target (which it then
// kills) and checks the restored process runs until killed.
func testRestore(t *testing.T, m crs.Module, r crs.Restorer, dir string, res crs.CheckpointResult, target *exec.Cmd) {
	launch := crs.Launch{Argv: target.Args, Dir: target.Dir}
	if l, err := m.Restart(t.Context(), crs.RestartRequest{Dir: dir, Meta: res.Meta, Launch: launch}); err == nil {
		t.Errorf("a crs.Restorer's Restart gave launch %q; want a refusal (it restores the process itself)", l.Argv)
	}
	_ = target.Process.Kill()
	_ = target.Wait()
	p, err := r.Restore(t.Context(), crs.RestoreRequest{Dir: dir, Meta: res.Meta, Launch: launch})
	if err != nil {
		t.Fatalf("restore from %s: %v", dir, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if p.PID() <= 0 || !running(p.PID()) {
		t.Errorf("restored pid %d is not running", p.PID())
	}
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Errorf("kill restored pid %d: %v", p.PID(), err)
	}
	exit, err := p.Wait(ctx)
	if err != nil || exit.Signal != syscall.SIGKILL {
		t.Errorf("restored pid %d killed: Wait = %+v, %v; want killed by SIGKILL", p.PID(), exit, err)
	}
}

func testRestartEmpty(t *testing.T, m crs.Module) {
	_, dir := snapDir(t)
	_, err := m.Restart(t.Context(), crs.RestartRequest{Dir: dir, Launch: crs.Launch{Argv: []string{"sleep", "1000"}}})
	if !errors.Is(err, crs.ErrNoSnapshot) {
		t.Fatalf("restart from an empty directory: %v, want crs.ErrNoSnapshot", err)
	}
	if r, ok := m.(crs.Restorer); ok {
		if _, err := r.Restore(t.Context(), crs.RestoreRequest{Dir: dir}); !errors.Is(err, crs.ErrNoSnapshot) {
			t.Errorf("restore from an empty directory: %v, want crs.ErrNoSnapshot", err)
		}
	}
	emptyDir(t, dir)
}

func testRefuses(t *testing.T, m crs.Module, opts Options) {
	target := startTarget(t, opts)
	parent, dir := snapDir(t)
	_, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: target.Process.Pid, Dir: dir})
	if !errors.Is(err, crs.ErrNotCheckpointable) {
		t.Fatalf("checkpoint: %v, want crs.ErrNotCheckpointable", err)
	}
	emptyDir(t, dir)
	onlySnapDir(t, parent)
	_, err = m.Restart(t.Context(), crs.RestartRequest{Dir: dir, Launch: crs.Launch{Argv: target.Args}})
	if !errors.Is(err, crs.ErrNoSnapshot) {
		t.Errorf("restart: %v, want crs.ErrNoSnapshot", err)
	}
}

func testDeadPID(t *testing.T, m crs.Module) {
	pid := DeadPID(t)
	parent, dir := snapDir(t)
	_, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: pid, Dir: dir})
	if !errors.Is(err, crs.ErrNoProcess) {
		t.Fatalf("checkpoint of exited pid %d: %v, want crs.ErrNoProcess", pid, err)
	}
	emptyDir(t, dir)
	onlySnapDir(t, parent)
}

func testCancelled(t *testing.T, m crs.Module, opts Options) {
	target := startTarget(t, opts)
	parent, dir := snapDir(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := m.Checkpoint(ctx, crs.CheckpointRequest{PID: target.Process.Pid, Dir: dir})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("checkpoint with a cancelled context: %v, want context.Canceled", err)
	}
	emptyDir(t, dir)
	onlySnapDir(t, parent)
	_, err = m.Restart(ctx, crs.RestartRequest{Dir: dir, Launch: crs.Launch{Argv: target.Args}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("restart with a cancelled context: %v, want context.Canceled", err)
	}
	if r, ok := m.(crs.Restorer); ok {
		if _, err := r.Restore(ctx, crs.RestoreRequest{Dir: dir}); !errors.Is(err, context.Canceled) {
			t.Errorf("restore with a cancelled context: %v, want context.Canceled", err)
		}
	}
}
