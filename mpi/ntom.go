package mpi

import (
	"fmt"
	"slices"
)

// What a restart on another rank count (gompi-restart -np M) needs of the
// library state: whether a saved state can be left behind, and a fresh
// state for a rank of the new job. The library's state is the world's:
// its sequence numbers, totals and drained messages are per peer of N
// ranks and mean nothing to a world of M. A sequence can be restarted on
// M ranks only when nothing of it must be carried over.

// LibrarySummary is what a saved library state holds that a restart on
// another rank count cannot carry over.
type LibrarySummary struct {
	Rank, Size int
	// Drained counts the messages the checkpoint found in flight (drained
	// into the library, delivered after the restart).
	Drained int
	// Communicators are the handles of the program-made communicators
	// (Dup, Split, ...) still live at the checkpoint.
	Communicators []uint64
}

// SummarizeLibraryState decodes a saved library state (SaveState's bytes)
// and says what it holds. Requests are never in it: SaveState refuses a
// state with a receive posted or a send queued (ErrBusy).
func SummarizeLibraryState(b []byte) (LibrarySummary, error) {
	st, err := decodeState(b)
	if err != nil {
		return LibrarySummary{}, err
	}
	s := LibrarySummary{Rank: st.rank, Size: st.size, Drained: len(st.msgs)}
	for _, e := range st.log {
		switch {
		case e.Op == OpFree:
			s.Communicators = slices.DeleteFunc(s.Communicators, func(h uint64) bool { return h == e.Parent })
		case e.Handle != 0:
			s.Communicators = append(s.Communicators, e.Handle)
		}
	}
	return s, nil
}

// FreshLibraryState is the library state of rank of a world of size that
// has sent and received nothing and made no communicator: what a rank of
// a job restarted on another rank count starts from.
func FreshLibraryState(rank, size int) ([]byte, error) {
	if size < 1 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("mpi: fresh library state: rank %d of %d", rank, size)
	}
	st := savedState{rank: rank, size: size, sent: make([]uint64, size), recvd: make([]uint64, size)}
	return st.encode(), nil
}
