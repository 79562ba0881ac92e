package crscriu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	criu "github.com/checkpoint-restore/go-criu/v8"
	"github.com/checkpoint-restore/go-criu/v8/rpc"
	"golang.org/x/sys/unix"

	"gompi/frameworks/crs"
)

// Restore restores the process tree saved in req.Dir as a child of this
// process, with req's files in place of the root's pipes.
func (m *Module) Restore(ctx context.Context, req crs.RestoreRequest) (crs.Process, error) {
	fail := func(err error) (crs.Process, error) {
		return nil, fmt.Errorf("crs/criu: restore rank %d from %s: %w", req.Rank, req.Dir, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := hasImages(req.Dir); err != nil {
		return fail(err)
	}
	inherit, stray, err := inheritFiles(req)
	if err != nil {
		return fail(err)
	}
	if len(stray) > 0 {
		m.logger().Warn("crs/criu: restoring pipes the daemon gave no replacement for, with no other end", "rank", req.Rank, "descriptors", stray)
	}
	if err := checkExes(req.Meta); err != nil {
		return fail(err)
	}
	// Before CRIU opens them: it checks their size against the images.
	if err := putBack(req.Dir, req.Meta); err != nil {
		return fail(err)
	}
	unlock, err := hostLock(ctx)
	if err != nil {
		return fail(err)
	}
	start := time.Now()
	pid, err := m.restore(req.Dir, inherit)
	unlock()
	if err != nil {
		return fail(err)
	}
	p, err := newProcess(pid)
	if err != nil {
		return fail(err)
	}
	m.logger().Debug("crs/criu: restored", "rank", req.Rank, "pid", pid, "took", time.Since(start))
	return p, nil
}

// inheritFiles maps each pipe the dumped root held (Meta's criu_fd_N) to
// the file req gives for descriptor N: CRIU's inherit-fd keys. Several
// descriptors on one pipe (2>&1) take the lowest one's file. A pipe at a
// descriptor req gives a place for (0, 1, 2 and 3 up to its last Files)
// must be given one; a pipe beyond those (one the rank inherited from
// elsewhere, unknown to the daemon) is restored by CRIU with no other end,
// and listed in stray.
func inheritFiles(req crs.RestoreRequest) (out map[string]*os.File, stray []int, err error) {
	given := []*os.File{req.Stdin, req.Stdout, req.Stderr}
	given = append(given, req.Files...)
	out = map[string]*os.File{}
	for _, n := range pipeFDs(req.Meta) {
		key := req.Meta[metaFD(n)]
		if _, done := out[key]; done {
			continue
		}
		switch {
		case n >= len(given):
			stray = append(stray, n)
		case given[n] == nil:
			return nil, nil, fmt.Errorf("the dumped process had a pipe (%s) as descriptor %d and the request gives nothing in its place: the restored process would use a pipe nobody holds the other end of", key, n)
		default:
			out[key] = given[n]
		}
	}
	return out, stray, nil
}

// pipeFDs are the descriptors Meta records as pipes, in order.
func pipeFDs(meta map[string]string) []int {
	var fds []int
	for k := range meta {
		if s, ok := strings.CutPrefix(k, metaFDPrefix); ok {
			if n, err := strconv.Atoi(s); err == nil && n >= 0 {
				fds = append(fds, n)
			}
		}
	}
	sort.Ints(fds)
	return fds
}

// restore runs CRIU's restore and returns the restored root's PID.
func (m *Module) restore(dir string, inherit map[string]*os.File) (int, error) {
	images, err := os.Open(dir)
	if err != nil {
		return 0, fmt.Errorf("open the snapshot folder: %w", err)
	}
	defer images.Close()
	work, cleanup, err := workDir("restore")
	if err != nil {
		return 0, err
	}
	defer cleanup()
	c := criu.MakeCriu()
	c.SetCriuPath(m.path)
	for key, f := range inherit {
		c.AddInheritFd(key, f)
	}
	// go-criu passes the inherited files to `criu swrk` as its
	// descriptors 3 on, and the swrk socket under the number it has here:
	// that number must not be one of those, or the socket is lost.
	release, err := reserveFDs(3 + len(inherit))
	if err != nil {
		return 0, err
	}
	defer release()
	nfy := &restored{}
	opts := &rpc.CriuOpts{
		ImagesDirFd: ptr(int32(images.Fd())),
		WorkDirFd:   ptr(int32(work.Fd())),
		LogFile:     ptr("restore.log"),
		ShellJob:    ptr(true),
		RstSibling:  ptr(true),
	}
	if rerr := c.Restore(opts, nfy); rerr != nil {
		return 0, fmt.Errorf("CRIU's restore failed: %w%s", rerr, logTail(work.Name(), "restore.log"))
	}
	if nfy.pid <= 0 {
		return 0, errors.New("CRIU's restore reported no process")
	}
	// Done, even if ctx ended meanwhile: the restored tree runs and is
	// the caller's to wait on.
	return nfy.pid, nil
}

// restored takes the restored root's PID from CRIU's post-restore
// notification.
type restored struct {
	criu.NoNotify
	pid int
}

func (r *restored) PostRestore(pid int32) error {
	r.pid = int(pid)
	return nil
}

// reserveFDs occupies every free descriptor number below n, so that the
// next ones this process opens are numbered n or more; release frees them.
func reserveFDs(n int) (release func(), err error) {
	var held []*os.File
	release = func() {
		for _, f := range held {
			f.Close()
		}
	}
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			release()
			return nil, fmt.Errorf("reserve descriptors: %w", err)
		}
		if int(f.Fd()) >= n {
			f.Close()
			return release, nil
		}
		held = append(held, f)
	}
}

// process is a restored root, this process's child.
type process struct {
	pid  int
	done chan struct{} // closed once reaped
	exit crs.Exit
	err  error
}

// newProcess starts reaping pid. The reaping goroutine is owned by the
// process: it ends when the process does.
func newProcess(pid int) (*process, error) {
	p := &process{pid: pid, done: make(chan struct{})}
	go p.reap()
	return p, nil
}

func (p *process) reap() {
	defer close(p.done)
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(p.pid, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			p.err = fmt.Errorf("wait for restored pid %d: %w", p.pid, err)
			return
		}
		break
	}
	switch {
	case ws.Signaled():
		p.exit = crs.Exit{Signal: ws.Signal()}
	default:
		p.exit = crs.Exit{Code: ws.ExitStatus()}
	}
}

func (p *process) PID() int { return p.pid }

// Wait returns how the process ended, once it has.
func (p *process) Wait(ctx context.Context) (crs.Exit, error) {
	select {
	case <-p.done:
		return p.exit, p.err
	case <-ctx.Done():
		return crs.Exit{}, ctx.Err()
	}
}
