// Package proc starts and ends the runtime's child processes (daemons,
// ssh clients, ranks) so that none outlives its parent: every child gets
// its own process group (so a signal reaches everything it started) and a
// parent-death signal, and every child is started from one OS thread that
// lives as long as the process.
//
// It belongs to the plm framework (whose base starts the daemons' launch
// processes with it) and is shared with the runtime that starts ranks
// (rte/daemon) and reads their exit status (rte/hnp): frameworks never
// import the runtime, the runtime may use a framework's base.
//
// Linux delivers the parent-death signal when the *thread* that forked the
// child exits, not the process. Go moves goroutines between threads and
// may end idle threads, so Pdeathsig set from an arbitrary goroutine can
// fire while the parent is still alive, or be lost. Start therefore forks
// from a goroutine that locked its thread and never unlocks it.
package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

type startReq struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	once sync.Once
	reqs chan startReq
)

// launcher runs on its own locked thread for the life of the process.
func launcher() {
	runtime.LockOSThread() // never unlocked: the thread must outlive every child
	for r := range reqs {
		r.done <- r.cmd.Start()
	}
}

// Start starts cmd in a new process group with deathSig as its
// parent-death signal. Any SysProcAttr already set on cmd is kept, with
// Setpgid and Pdeathsig added; Setpgid only when Setsid is not set, since
// a session's leader leads a process group of its own already (and
// setpgid fails for it).
func Start(cmd *exec.Cmd, deathSig syscall.Signal) error {
	once.Do(func() {
		reqs = make(chan startReq)
		go launcher()
	})
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = !cmd.SysProcAttr.Setsid
	cmd.SysProcAttr.Pdeathsig = deathSig
	r := startReq{cmd: cmd, done: make(chan error, 1)}
	reqs <- r
	return <-r.done
}

// WaitExited blocks until the process pid has exited, without reaping it:
// its process group can still be signalled safely (the group id cannot be
// reused while the leader is an unreaped zombie).
func WaitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("proc: wait for %d: %w", pid, err)
		}
		return nil
	}
}

// SignalGroup sends sig to the process group led by pid. A group that no
// longer exists is no error.
func SignalGroup(pid int, sig syscall.Signal) error {
	if pid <= 0 {
		return fmt.Errorf("proc: signal group %d: not a process id", pid)
	}
	err := syscall.Kill(-pid, sig)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("proc: signal group %d with %v: %w", pid, sig, err)
	}
	return nil
}

// Status splits a finished process's state into an exit code and, when it
// was killed by a signal, the signal (code is then 0).
func Status(st *os.ProcessState) (code int, sig syscall.Signal) {
	if st == nil {
		return -1, 0
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 0, ws.Signal()
	}
	return st.ExitCode(), 0
}

// ShellStatus is the status a shell reports for a process: the exit code,
// or 128 plus the number of the signal that killed it.
func ShellStatus(code int, sig syscall.Signal) int {
	if sig != 0 {
		return 128 + int(sig)
	}
	return code
}

// Alive reports whether a process with this pid exists (a zombie counts).
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// WaitAdopted waits for the end of pid, a child of this process that it
// did not start (one reparented to it as a child subreaper, such as a
// process CRIU restored), reaps it, and returns how it ended as Status
// does: os/exec cannot wait for such a child, wait4 on its PID can. It
// never reaps another child. ctx's end stops the wait, not the goroutine
// that waits: that one ends when the process does.
func WaitAdopted(ctx context.Context, pid int) (code int, sig syscall.Signal, err error) {
	type result struct {
		ws  unix.WaitStatus
		err error
	}
	done := make(chan result, 1)
	go func() {
		for {
			var ws unix.WaitStatus
			_, err := unix.Wait4(pid, &ws, 0, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			done <- result{ws, err}
			return
		}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return -1, 0, fmt.Errorf("proc: wait for adopted process %d: %w", pid, r.err)
		}
		if r.ws.Signaled() {
			return 0, r.ws.Signal(), nil
		}
		return r.ws.ExitStatus(), 0, nil
	case <-ctx.Done():
		return -1, 0, ctx.Err()
	}
}
