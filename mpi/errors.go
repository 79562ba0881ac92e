package mpi

import (
	"errors"
	"fmt"
)

// ErrProcFailed is wrapped by errors of operations that involve a process
// that failed: its connection broke without a goodbye, it could not be
// dialed, or the runtime reported it lost (Proc.MarkFailed). The error
// names the rank; RankOf recovers it.
var ErrProcFailed = errors.New("process failed")

// ErrTruncate is wrapped when a message is longer than the receive buffer;
// the buffer holds the first bytes, Status.Count the message's length.
var ErrTruncate = errors.New("message truncated")

// ErrStopped is wrapped by operations on a Proc that was finalized, aborted,
// or whose Init context ended.
var ErrStopped = errors.New("process stopped")

// ErrArg is wrapped by calls with an invalid argument (rank, tag, buffer
// size, root, communicator).
var ErrArg = errors.New("invalid argument")

// ErrBusy is wrapped by SaveState when the library has operations in
// flight that its state cannot hold (posted receives, queued sends,
// non-blocking collectives): save at a safe point.
var ErrBusy = errors.New("operations in flight")

// ProcFailedError reports the failed rank (a world rank).
type ProcFailedError struct {
	Rank  int
	Cause error
}

func (e *ProcFailedError) Error() string {
	if e.Cause == nil {
		return fmt.Sprintf("rank %d: %v", e.Rank, ErrProcFailed)
	}
	return fmt.Sprintf("rank %d: %v: %v", e.Rank, ErrProcFailed, e.Cause)
}

func (e *ProcFailedError) Unwrap() []error {
	if e.Cause == nil {
		return []error{ErrProcFailed}
	}
	return []error{ErrProcFailed, e.Cause}
}

// RankOf returns the world rank named by an error wrapping ErrProcFailed.
func RankOf(err error) (int, bool) {
	var pf *ProcFailedError
	if errors.As(err, &pf) {
		return pf.Rank, true
	}
	return 0, false
}
