package uds

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"gompi/frameworks/btl"
	"gompi/frameworks/btl/btltest"
	"gompi/mca"
)

// nobody is the user the cross-user tests act as.
const nobody = 65534

// asUser runs f on a thread of its own whose effective user is uid, so the
// sockets f makes carry uid's credentials; the rest of the test process
// keeps its own. The thread is thrown away afterwards (its goroutine ends
// still locked to it). Only root can do this.
func asUser(t *testing.T, uid int, f func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		keep := ^uintptr(0)    // -1: leave that id as it is
		if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, keep, uintptr(uid), keep); errno != 0 {
			done <- errno
			return
		}
		f()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// openTempDir returns a test folder that other users can enter (t.TempDir
// and its parent are closed to them), with mode perm.
func openTempDir(t *testing.T, perm os.FileMode) string {
	t.Helper()
	dir := t.TempDir()
	if err := errors.Join(os.Chmod(filepath.Dir(dir), 0o711), os.Chmod(dir, perm)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// listenOpen starts a module listening for rank 0 of job in a base folder
// of its own, with the socket folder and socket opened to every user (as
// a careless administrator or a hostile copy might leave them), and
// reports every connection the module hands on.
func listenOpen(t *testing.T, job string) (sock string, accepted chan btl.Conn) {
	t.Helper()
	base := openTempDir(t, 0o755)
	m := btltest.Module(t, New(), mca.Setting{Name: paramDir, Value: base})
	accepted = make(chan btl.Conn, 4)
	sock, err := m.Listen(t.Context(), btl.Endpoint{Job: job}, func(c btl.Conn) { accepted <- c })
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(os.Chmod(filepath.Dir(sock), 0o711), os.Chmod(sock, 0o777)); err != nil {
		t.Fatal(err)
	}
	return sock, accepted
}

// TestRefusesOtherUser: a process of another user that reaches a rank's
// socket (the folder opened to others) is refused by its credentials: the
// module closes the connection and hands nothing to package mpi.
func TestRefusesOtherUser(t *testing.T) {
	sock, accepted := listenOpen(t, "other-user")
	var c net.Conn
	var err error
	asUser(t, nobody, func() { c, err = net.Dial("unix", sock) })
	if err != nil {
		t.Fatalf("the other user could not even connect (the test's premise): %v", err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("read on the refused connection: %v, want EOF (closed by the rank)", err)
	}
	select {
	case got := <-accepted:
		got.Close()
		t.Error("a connection from another user was handed on")
	default:
	}
	// Our own connections still go through.
	own, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	select {
	case got := <-accepted:
		got.Close()
	case <-time.After(time.Minute):
		t.Error("the user's own connection was not handed on")
	}
}

// TestDialRefusesOtherUsersListener: a socket another user listens on at
// a rank's address is not dialed into.
func TestDialRefusesOtherUsersListener(t *testing.T) {
	dir := openTempDir(t, 0o777)
	sock := filepath.Join(dir, "1.sock")
	var ln net.Listener
	var err error
	asUser(t, nobody, func() { ln, err = net.Listen("unix", sock) })
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		// Owned by the test: ends when ln closes.
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	m := btltest.Module(t, New())
	c, err := m.Dial(t.Context(), btl.Endpoint{}, btl.Endpoint{Rank: 1, Addr: sock})
	var pe *btl.PeerError
	if !errors.As(err, &pe) || pe.Uid != nobody {
		if c != nil {
			c.Close()
		}
		t.Errorf("Dial = %v, want a refusal naming user %d", err, nobody)
	}
}

// TestCheckPeer: a peer whose user is not the one the module expects is
// refused, its process and user named; this needs no second user.
func TestCheckPeer(t *testing.T) {
	a, b, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	if err := (&module{uid: os.Getuid()}).checkPeer(a); err != nil {
		t.Errorf("own user refused: %v", err)
	}
	err = (&module{uid: os.Getuid() + 1}).checkPeer(a)
	var pe *btl.PeerError
	if !errors.As(err, &pe) || pe.Uid != os.Getuid() || pe.Pid != os.Getpid() {
		t.Errorf("checkPeer = %v, want a refusal naming this process and user", err)
	}
}

func socketPair() (*net.UnixConn, *net.UnixConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return nil, nil, err
	}
	conn := func(fd int) (*net.UnixConn, error) {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			return nil, err
		}
		return c.(*net.UnixConn), nil
	}
	a, err1 := conn(fds[0])
	b, err2 := conn(fds[1])
	return a, b, errors.Join(err1, err2)
}
