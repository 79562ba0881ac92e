package mpi_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// TestReduceOps runs byte-level reductions through the library at 1 to
// 8 ranks: MAXLOC on double_int (a tie broken by the lower rank),
// BAND on bytes, LOR on a contiguous type of int32, and a
// non-commutative user op (string concatenation of fixed-width cells)
// reduced to the last rank and all-reduced non-blocking.
func TestReduceOps(t *testing.T) {
	for n := 1; n <= 8; n++ {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			mpitest.Run(t, n, "tcp", func(p *mpi.Proc) error { return reduceOps(p.World()) })
		})
	}
}

func reduceOps(w *mpi.Comm) error {
	n, r := w.Size(), w.Rank()
	// MAXLOC: value 7 at ranks 1 and 3 (if present), lower values elsewhere.
	pair := make([]byte, 16)
	v := float64(r % 2 * 7)
	binary.LittleEndian.PutUint64(pair, math.Float64bits(v))
	binary.LittleEndian.PutUint32(pair[8:], uint32(10+r))
	red, err := mpi.OpReduction(mpi.MaxLoc, mpi.TypeDoubleInt)
	if err != nil {
		return err
	}
	out := make([]byte, 16)
	if err := w.AllreduceBytes(pair, out, red); err != nil {
		return err
	}
	wantV, wantI := 0.0, 10
	if n > 1 {
		wantV, wantI = 7, 11
	}
	if gv, gi := math.Float64frombits(binary.LittleEndian.Uint64(out)), int(binary.LittleEndian.Uint32(out[8:])); gv != wantV || gi != wantI {
		return fmt.Errorf("maxloc gave (%v, %d), want (%v, %d)", gv, gi, wantV, wantI)
	}
	// BAND of 0xff with bit r cleared, in place.
	band := []byte{^byte(1 << (r % 8)), 0xf0}
	red, _ = mpi.OpReduction(mpi.Band, mpi.TypeByte)
	if err := w.AllreduceBytes(band, band, red); err != nil {
		return err
	}
	want := byte(0xff)
	for i := 0; i < n; i++ {
		want &^= 1 << (i % 8)
	}
	if band[0] != want || band[1] != 0xf0 {
		return fmt.Errorf("band gave % x, want %x f0", band, want)
	}
	four, err := mpi.TypeContiguous(4, mpi.TypeInt32)
	if err != nil {
		return err
	}
	red, err = mpi.OpReduction(mpi.Lor, four)
	if err != nil {
		return err
	}
	lor := make([]int32, 4)
	lor[r%4] = int32(r + 5)
	if err := w.ReduceBytes(bytesOfInts(lor), bytesOfInts(lor), red, 0); err != nil {
		return err
	}
	if r == 0 {
		for i, x := range lor {
			// One rank's contribution stands as it is, as in MPI.
			if (x != 0) != (i < n) || (n > 1 && i < n && x != 1) {
				return fmt.Errorf("lor gave %v", lor)
			}
		}
	}
	return concatOps(w)
}

// concatOps reduces cells of 8 characters with "keep the earlier rank's
// letters, then append the later's": only rank order gives "abc...".
func concatOps(w *mpi.Comm) error {
	n, r := w.Size(), w.Rank()
	cell := []byte{byte('a' + r), 0, 0, 0, 0, 0, 0, 0}
	concat := func(in, inout []byte) {
		var s []byte
		for _, b := range append(append([]byte{}, in...), inout...) {
			if b != 0 {
				s = append(s, b)
			}
		}
		copy(inout, make([]byte, len(inout)))
		copy(inout, s)
	}
	red := mpi.UserReduction(concat, mpi.TypeInt64, false)
	want := make([]byte, 8)
	for i := 0; i < n; i++ {
		want[i] = byte('a' + i)
	}
	got := make([]byte, 8)
	if err := w.ReduceBytes(cell, got, red, n-1); err != nil {
		return err
	}
	if r == n-1 && string(got) != string(want) {
		return fmt.Errorf("reduce to %d gave %q, want %q", n-1, got, want)
	}
	req, err := w.IallreduceBytes(cell, got, red)
	if err != nil {
		return err
	}
	if _, err := req.Wait(); err != nil {
		return err
	}
	if string(got) != string(want) {
		return fmt.Errorf("allreduce gave %q, want %q", got, want)
	}
	return nil
}
