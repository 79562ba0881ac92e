package filemtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"gompi/frameworks/filem"
)

// OnHost runs the kit's transfers through a remote host that shares this
// machine's file system (such as an SSHD): every Remote without a Host gets
// host. In the errors it returns, the transfer errors name paths as the kit
// gave them (without "host:"), so the kit's checks apply unchanged; the
// module's own message, inside, still names the host.
func OnHost(m filem.Module, host string) filem.Module { return onHost{m, host} }

type onHost struct {
	m    filem.Module
	host string
}

func (o onHost) remote(r filem.Remote) filem.Remote {
	if r.Host == "" {
		r.Host = o.host
	}
	return r
}

func (o onHost) transfers(ts []filem.Transfer) []filem.Transfer {
	out := make([]filem.Transfer, len(ts))
	for i, t := range ts {
		out[i] = t
		out[i].Remote = o.remote(t.Remote)
	}
	return out
}

func (o onHost) Put(ctx context.Context, ts []filem.Transfer) error {
	return o.local(o.m.Put(ctx, o.transfers(ts)))
}

func (o onHost) Get(ctx context.Context, ts []filem.Transfer) error {
	return o.local(o.m.Get(ctx, o.transfers(ts)))
}

func (o onHost) Remove(ctx context.Context, rs []filem.Remote) error {
	out := make([]filem.Remote, len(rs))
	for i, r := range rs {
		out[i] = o.remote(r)
	}
	return o.local(o.m.Remove(ctx, out))
}

// local rewrites the batch error (an errors.Join of transfer errors, as
// the framework prescribes) with the host taken off the names.
func (o onHost) local(err error) error {
	strip := func(s string) string { return strings.TrimPrefix(s, o.host+":") }
	switch e := err.(type) {
	case nil:
		return nil
	case *filem.TransferError:
		return &filem.TransferError{Op: e.Op, Src: strip(e.Src), Dst: strip(e.Dst), Err: e.Err}
	case interface{ Unwrap() []error }:
		var out []error
		for _, x := range e.Unwrap() {
			out = append(out, o.local(x))
		}
		return errors.Join(out...)
	}
	return err
}

// WaitWrite blocks until a file in dir whose name holds marker has at
// least min bytes, and returns its path. It watches dir with inotify, so
// it reacts to the write that crosses min, not to a timer.
func WaitWrite(ctx context.Context, dir, marker string, min int64) (string, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return "", fmt.Errorf("inotify: %w", err)
	}
	f := os.NewFile(uintptr(fd), "inotify") // closing f releases fd
	defer f.Close()
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MODIFY|unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO); err != nil {
		return "", fmt.Errorf("watch %s: %w", dir, err)
	}
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	check := func() string {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if !strings.Contains(e.Name(), marker) {
				continue
			}
			if fi, err := e.Info(); err == nil && fi.Size() >= min {
				return filepath.Join(dir, e.Name())
			}
		}
		return ""
	}
	buf := make([]byte, 64<<10)
	for {
		if p := check(); p != "" {
			return p, nil
		}
		// Read blocks (the runtime poller) until dir changes.
		if _, err := f.Read(buf); err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", fmt.Errorf("read inotify: %w", err)
		}
	}
}

// Tmpfs mounts a tmpfs of size bytes for the test (a disk that fills
// up), unmounted at the end. Without mount privileges it skips, or fails
// in CI.
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0755", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		unavailable(t, fmt.Sprintf("mount a tmpfs (to fill a disk): %v: %s; run the test as root on a machine that allows mounts", err, out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}
