package btl

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// PeerError is a peer of another user, or one whose credentials could not
// be read: the components that talk over Unix sockets (uds, sm) refuse it.
type PeerError struct {
	Pid, Uid int
	Err      error
}

func (e *PeerError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("peer credentials: %v", e.Err)
	}
	return fmt.Sprintf("peer process %d runs as user %d, not this user", e.Pid, e.Uid)
}

func (e *PeerError) Unwrap() error { return e.Err }

// PeerName names a refused peer by its user, for Refusals.Log.
func PeerName(err error) string {
	var pe *PeerError
	if errors.As(err, &pe) && pe.Err == nil {
		return fmt.Sprintf("uid %d", pe.Uid)
	}
	return "unknown user"
}

// CheckPeer reads the credentials the kernel recorded for the other end
// of a Unix socket when it connected or listened (SO_PEERCRED) and
// refuses (*PeerError) a process that does not run as uid. It returns the
// peer's PID, 0 when the peer runs in a PID namespace this process cannot
// see.
func CheckPeer(c *net.UnixConn, uid int) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, &PeerError{Err: err}
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return 0, &PeerError{Err: err}
	}
	if cerr != nil {
		return 0, &PeerError{Err: cerr}
	}
	if int(cred.Uid) != uid {
		return 0, &PeerError{Pid: int(cred.Pid), Uid: int(cred.Uid)}
	}
	return int(cred.Pid), nil
}
