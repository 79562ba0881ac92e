package capi

import (
	"strings"
	"testing"

	"gompi/mpi"
)

// A restarted program's handles are checked against the snapshot's
// table: the same handles naming the same kind of object pass; one
// missing, or naming a datatype of another size or extent (made in
// another order), is an error naming it.
func TestVerifyHandles(t *testing.T) {
	two, err := mpi.TypeContiguous(2, predefined[0x214].t) // 2 doubles
	if err != nil {
		t.Fatal(err)
	}
	h := uintptr(newType(&ctype{t: two}))
	defer func() {
		types.mu.Lock()
		delete(types.m, h)
		types.mu.Unlock()
	}()
	now := currentHandles()
	for _, tt := range []struct {
		name  string
		saved handleTable
		want  string // "" for no error
	}{
		{"nothing saved", handleTable{}, ""},
		{"the same", now, ""},
		{"a datatype of another size", handleTable{Types: []handleRec{{H: uint64(h), A: 8, B: 16}}}, "datatype handle"},
		{"a datatype not made again", handleTable{Types: []handleRec{{H: uint64(h) + 16, A: 16, B: 16}}}, "datatype handle"},
		{"a communicator not made again", handleTable{Comms: []handleRec{{H: 0x7777771, A: 4, B: 0}}}, "communicator handle 0x7777771"},
	} {
		err := verifyHandles(tt.saved)
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
