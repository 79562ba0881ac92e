package mpi

import (
	"errors"
	"slices"
	"testing"
)

// TestSummarizeLibraryState: what a restart on another rank count reads
// of a saved library state: drained messages, and the program-made
// communicators still live (a freed one is not).
func TestSummarizeLibraryState(t *testing.T) {
	split := LogEntry{Op: OpSplit, Parent: ctxWorld, Handle: 4, Members: []int{0, 1}}
	dup := LogEntry{Op: OpDup, Parent: ctxWorld, Handle: 6, Members: []int{0, 1}}
	none := LogEntry{Op: OpSplit, Parent: ctxWorld} // a Split that gave this rank no communicator
	tests := []struct {
		name    string
		st      savedState
		drained int
		comms   []uint64
	}{
		{"nothing", savedState{}, 0, nil},
		{"two drained messages", savedState{msgs: []savedMsg{{ctx: ctxWorld, src: 1, tag: 3, seq: 1}, {ctx: ctxWorld, src: 1, tag: 3, seq: 2}}}, 2, nil},
		{"a live split", savedState{log: []LogEntry{split}}, 0, []uint64{4}},
		{"split freed, dup live", savedState{log: []LogEntry{split, dup, {Op: OpFree, Parent: 4}}}, 0, []uint64{6}},
		{"a split giving none", savedState{log: []LogEntry{none}}, 0, nil},
	}
	for _, tt := range tests {
		tt.st.rank, tt.st.size = 1, 2
		tt.st.sent, tt.st.recvd = make([]uint64, 2), make([]uint64, 2)
		s, err := SummarizeLibraryState(tt.st.encode())
		if err != nil || s.Rank != 1 || s.Size != 2 || s.Drained != tt.drained || !slices.Equal(s.Communicators, tt.comms) {
			t.Errorf("%s: %+v, %v; want %d drained, communicators %v", tt.name, s, err, tt.drained, tt.comms)
		}
	}
	if _, err := SummarizeLibraryState([]byte("not a state")); !errors.Is(err, ErrState) {
		t.Errorf("garbage: %v", err)
	}
}

// TestFreshLibraryState: a fresh state of each rank of a world decodes as
// that rank's, holding nothing.
func TestFreshLibraryState(t *testing.T) {
	for size := 1; size <= 8; size++ {
		for rank := range size {
			b, err := FreshLibraryState(rank, size)
			if err != nil {
				t.Fatal(err)
			}
			st, err := decodeState(b)
			if err != nil || st.rank != rank || st.size != size || len(st.log)+len(st.msgs)+len(st.seqs) != 0 || len(st.sent) != size {
				t.Fatalf("rank %d of %d: %+v, %v", rank, size, st, err)
			}
		}
	}
	for _, bad := range [][2]int{{0, 0}, {2, 2}, {-1, 3}} {
		if _, err := FreshLibraryState(bad[0], bad[1]); err == nil {
			t.Errorf("rank %d of %d accepted", bad[0], bad[1])
		}
	}
}
