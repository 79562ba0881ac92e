// Package rankinit is the small init a rank runs under when its job's CRS
// checkpoints processes from outside (criu): gompid starts the init as PID
// 1 of a PID namespace of its own and as its session's leader (no new
// mount namespace), and the init starts the rank program as its only
// child. CRIU needs that shape (../shared/reference/criu-debian.md): a
// restore then never collides with a PID still in use, and a dumped tree
// must hold its session's leader. The init is dumped and restored with the
// rank.
//
// The init is not a binary of its own: a binary whose main calls Main
// first (gompid; the tests' binaries) becomes the init when its first
// argument is Arg, so gompid starts ranks by re-executing itself (Wrap).
//
// What the init does:
//   - starts the rank with the init's own standard descriptors, the n
//     extra descriptors it was given (from 3, as exec.Cmd.ExtraFiles) and
//     its environment and directory, in a process group of its own;
//   - keeps its copies of those n descriptors open for its life: a dump
//     records the pipes the root of the tree holds, at their numbers, and
//     a restore puts the daemon's new pipes in their place (crs criu's
//     Meta, CRIU's inherit-fd), for the rank too, which holds the same
//     pipes. A pipe the rank shares with gompid (its lifeline) must be one
//     of them, or the restored rank would hold a pipe with no other end;
//     and its end of file reaches gompid once the whole tree is gone;
//   - forwards every signal it catches to the rank's process group
//     (gompid signals the init's group, which holds the init alone). SIGKILL
//     and SIGSTOP cannot be caught: SIGKILL of the init (from gompid, which
//     is in the parent namespace) ends the whole namespace, since the
//     kernel kills every process of a PID namespace when its PID 1 dies;
//     SIGSTOP stops the init alone;
//   - reaps every child, as PID 1 must: the rank's orphans are reparented
//     to it;
//   - exits as the rank did. A rank that exited with a code makes the init
//     exit with it. A rank killed by a signal cannot be mirrored by the
//     init's own death: the kernel does not deliver to a namespace's PID 1
//     any signal it has no handler for, not even one the init raises on
//     itself, and SIGKILL only from an ancestor namespace. So the init
//     reports how the rank ended on its status descriptor (the one after
//     the rank's), which gompid reads (ReadStatus), and exits with 128 +
//     the signal, as a shell would.
//
// The status descriptor carries lines: "started" once the rank runs, or
// "error <why>" when it could not be started (the init then exits with
// 127); then, once the rank ended, "exit <code>" or "signal <number>". A
// status that ends without its last line means the init was killed (its
// own exit status then says how).
package rankinit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"gompi/frameworks/crs"
)

// Arg is the first argument that makes a binary calling Main the init.
const Arg = "--gompi-rank-init"

// Main runs the init and exits with its status when the process's first
// argument is Arg, and returns at once otherwise. A binary that can be a
// rank's init (gompid) calls it first thing in main.
func Main() {
	if len(os.Args) > 1 && os.Args[1] == Arg {
		os.Exit(Run(os.Args[2:]))
	}
}

// Wrap turns cmd, a rank's command whose Path, Args, ExtraFiles, Env, Dir
// and standard descriptors are set, into the command that starts the init
// self (the path of a binary whose main calls Main) which then starts that
// rank: in a new PID namespace, as its session's leader, with status (the
// write end of a pipe the caller reads with ReadStatus) as the init's
// descriptor after the rank's. A cmd that already failed (cmd.Err, the
// program not found) is left as it is, to fail the same way on Start.
func Wrap(cmd *exec.Cmd, self string, status *os.File) {
	if cmd.Err != nil {
		return
	}
	args := []string{self, Arg, strconv.Itoa(len(cmd.ExtraFiles)), cmd.Path}
	cmd.Path = self
	cmd.Args = append(args, cmd.Args...)
	cmd.ExtraFiles = append(cmd.ExtraFiles[:len(cmd.ExtraFiles):len(cmd.ExtraFiles)], status)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWPID
	cmd.SysProcAttr.Setsid = true
}

// Run is the init: args are the number of extra descriptors the rank
// inherits, the rank program's path, then its argv (argv[0] first). It
// returns the init's exit status.
func Run(args []string) int {
	n, path, argv, err := parse(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompi rank init: %v\n", err)
		return 127
	}
	status := os.NewFile(uintptr(3+n), "rankinit-status")
	// The status is the init's: the rank must not inherit it.
	unix.CloseOnExec(3 + n)
	if os.Getpid() != 1 {
		// Outside a PID namespace (not how gompid starts it) the rank's
		// orphans still come to the init.
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs) // before the rank starts: nothing sent meanwhile is lost
	defer signal.Stop(sigs)
	files := make([]*os.File, n)
	for i := range files {
		files[i] = os.NewFile(uintptr(3+i), fmt.Sprintf("fd%d", 3+i))
	}
	rank := &exec.Cmd{Path: path, Args: argv, Env: os.Environ(), Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		ExtraFiles: files, SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	if err := rank.Start(); err != nil {
		fmt.Fprintf(status, "error %s\n", oneLine(err.Error()))
		return 127
	}
	// The files stay open for the init's life (see the package's doc):
	// their finalizers must not close them.
	defer runtime.KeepAlive(files)
	fmt.Fprintln(status, "started")
	done := make(chan struct{})
	forwarded := make(chan struct{})
	// Owned by Run: it forwards until the rank is reaped, then ends.
	go func() {
		defer close(forwarded)
		forward(sigs, rank.Process.Pid, done)
	}()
	ex := reap(rank.Process.Pid)
	close(done)
	<-forwarded
	if ex.Signal != 0 {
		fmt.Fprintf(status, "signal %d\n", int(ex.Signal))
		return 128 + int(ex.Signal)
	}
	fmt.Fprintf(status, "exit %d\n", ex.Code)
	return ex.Code
}

func parse(args []string) (n int, path string, argv []string, err error) {
	if len(args) < 3 {
		return 0, "", nil, fmt.Errorf("want <descriptors> <path> <argv0> [args...], got %q", args)
	}
	n, err = strconv.Atoi(args[0])
	if err != nil || n < 0 {
		return 0, "", nil, fmt.Errorf("descriptor count %q", args[0])
	}
	return n, args[1], args[2:], nil
}

// forward sends the init's signals to the rank's process group (to the
// rank alone once it left that group) until done is closed. SIGCHLD and
// SIGPIPE (a write to a status pipe nobody reads) are the init's own
// business, SIGURG the Go runtime's.
func forward(sigs <-chan os.Signal, pid int, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case s := <-sigs:
			sig, ok := s.(syscall.Signal)
			if !ok || sig == syscall.SIGCHLD || sig == syscall.SIGPIPE || sig == syscall.SIGURG {
				continue
			}
			if err := unix.Kill(-pid, sig); errors.Is(err, unix.ESRCH) {
				_ = unix.Kill(pid, sig)
			}
		}
	}
}

// reap waits for every child until the rank has ended, and returns how
// it ended. The init's children besides the rank are orphans the kernel
// gave it; they are reaped and forgotten.
func reap(rank int) crs.Exit {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// ECHILD with the rank unreaped cannot happen; say so rather
			// than spin.
			fmt.Fprintf(os.Stderr, "gompi rank init: wait: %v\n", err)
			return crs.Exit{Code: 127}
		}
		if pid != rank {
			continue
		}
		if ws.Signaled() {
			return crs.Exit{Signal: ws.Signal()}
		}
		return crs.Exit{Code: ws.ExitStatus()}
	}
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// ErrNotStarted is wrapped by Started's error when the init could not
// start the rank, or ended before it said.
var ErrNotStarted = errors.New("the rank init did not start the rank")

// Status reads an init's status descriptor (the read end of the pipe
// given to Wrap).
type Status struct{ r *bufio.Reader }

// NewStatus reads the status from r.
func NewStatus(r io.Reader) *Status { return &Status{r: bufio.NewReader(r)} }

// Started reads the init's first line: nil once the rank runs.
func (s *Status) Started() error {
	line, err := s.r.ReadString('\n')
	line = strings.TrimSuffix(line, "\n")
	switch {
	case line == "started":
		return nil
	case strings.HasPrefix(line, "error "):
		return fmt.Errorf("%w: %s", ErrNotStarted, strings.TrimPrefix(line, "error "))
	case err != nil:
		return fmt.Errorf("%w: it ended first (%w)", ErrNotStarted, err)
	default:
		return fmt.Errorf("%w: it said %q", ErrNotStarted, line)
	}
}

// Exit reads how the rank ended, once the init has: ok is false when the
// init did not say (it was killed; its own status is then the rank's).
func (s *Status) Exit() (ex crs.Exit, ok bool) {
	line, _ := s.r.ReadString('\n')
	word, num, found := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	v, err := strconv.Atoi(num)
	if !found || err != nil {
		return crs.Exit{}, false
	}
	switch word {
	case "exit":
		return crs.Exit{Code: v}, true
	case "signal":
		return crs.Exit{Signal: syscall.Signal(v)}, true
	}
	return crs.Exit{}, false
}
