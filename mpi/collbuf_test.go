package mpi_test

import (
	"fmt"
	"testing"

	"gompi/mpi"
)

// TestCollBufs runs the datatype collectives with a strided type (every
// other int32: a resized int32 of extent 8) against dense int32 buffers.
func TestCollBufs(t *testing.T) {
	every(t, func(p *mpi.Proc) error {
		w := p.World()
		n, r := w.Size(), w.Rank()
		odd, err := mpi.TypeResized(mpi.TypeInt32, 0, 8)
		if err != nil {
			return err
		}
		i32 := mpi.TypeInt32
		strided := func(k int) ([]int32, mpi.Buf) {
			v := make([]int32, 2*k)
			return v, mpi.Buf{Mem: bytesOfInts(v), Count: k, Type: odd}
		}
		// Bcast: root fills the even slots of 3 elements.
		v, b := strided(3)
		if r == n-1 {
			v[0], v[2], v[4] = 7, 8, 9
		}
		if err := w.BcastBuf(b, n-1); err != nil {
			return err
		}
		if fmt.Sprint(v) != "[7 0 8 0 9 0]" {
			return fmt.Errorf("bcast: %v", v)
		}
		// Gatherv into strided slots: rank i sends i+1 ints, placed at
		// displacement 1 + i(i+1)/2 elements.
		counts, displs, total := make([]int, n), make([]int, n), 1
		for i := range counts {
			counts[i], displs[i] = i+1, total
			total += i + 1
		}
		mine := make([]int32, r+1)
		for k := range mine {
			mine[k] = int32(10*r + k)
		}
		sendBuf := mpi.Buf{Mem: bytesOfInts(mine), Count: r + 1, Type: i32}
		all, allBuf := strided(total)
		if err := w.GathervBuf(sendBuf, allBuf, counts, displs, 0); err != nil {
			return err
		}
		want := make([]int32, 2*total)
		for i := 0; i < n; i++ {
			for k := 0; k <= i; k++ {
				want[2*(displs[i]+k)] = int32(10*i + k)
			}
		}
		if r == 0 && fmt.Sprint(all) != fmt.Sprint(want) {
			return fmt.Errorf("gatherv: %v, want %v", all, want)
		}
		all2, allBuf2 := strided(total)
		if err := w.AllgathervBuf(sendBuf, allBuf2, counts, displs); err != nil {
			return err
		}
		if fmt.Sprint(all2) != fmt.Sprint(want) {
			return fmt.Errorf("allgatherv: %v, want %v", all2, want)
		}
		// Scatterv back out of the strided buffer.
		got := make([]int32, r+1)
		if err := w.ScattervBuf(allBuf2, counts, displs, mpi.Buf{Mem: bytesOfInts(got), Count: r + 1, Type: i32}, n-1); err != nil {
			return err
		}
		if fmt.Sprint(got) != fmt.Sprint(mine) {
			return fmt.Errorf("scatterv: %v, want %v", got, mine)
		}
		// Alltoallv: one int to each rank, from strided to dense.
		src, srcBuf := strided(n)
		for i := 0; i < n; i++ {
			src[2*i] = int32(100*r + i)
		}
		dst := make([]int32, n)
		ones, seq := make([]int, n), make([]int, n)
		for i := range ones {
			ones[i], seq[i] = 1, i
		}
		if err := w.AlltoallvBuf(srcBuf, ones, seq, mpi.Buf{Mem: bytesOfInts(dst), Count: n, Type: i32}, ones, seq); err != nil {
			return err
		}
		for i := range dst {
			if dst[i] != int32(100*i+r) {
				return fmt.Errorf("alltoallv: %v", dst)
			}
		}
		return nil
	})
}
