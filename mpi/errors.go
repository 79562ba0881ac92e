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

// ErrRevoked is wrapped by operations on a communicator that was revoked
// (Comm.Revoke, by this process or any other member): every pending and
// later operation on it fails, except Shrink, Agree and the failure
// queries, so every member reaches its recovery code.
var ErrRevoked = errors.New("communicator revoked")

// ErrProcFailedPending is wrapped by Wait and Test of a non-blocking
// AnySource receive while a member of its communicator has failed and the
// application has not acknowledged it (Comm.AckFailed): the receive stays
// active and may still complete (ULFM's MPI_ERR_PROC_FAILED_PENDING).
var ErrProcFailedPending = errors.New("process failed, receive pending")

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

// ErrRolledBack is wrapped by every operation a rollback interrupted or
// refused (Proc.RollBack): the job is going back to a committed sequence,
// and the program must return to its re-entry point (package cr's Run).
var ErrRolledBack = errors.New("rolled back: return to the re-entry point")
