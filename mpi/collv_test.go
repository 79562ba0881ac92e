package mpi_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// vblocks gives rank i a block of i+1 bytes (i%3 for sizes that may be
// 0), laid out back to back with a gap of one byte.
func vblocks(n int, size func(int) int) (counts, displs []int, total int) {
	counts, displs = make([]int, n), make([]int, n)
	for i := range counts {
		counts[i], displs[i] = size(i), total
		total += counts[i] + 1
	}
	return counts, displs, total
}

func fill(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seed*31 + i)
	}
	return b
}

func TestAllgathervAlltoallv(t *testing.T) {
	every(t, func(p *mpi.Proc) error {
		w := p.World()
		n, r := w.Size(), w.Rank()
		counts, displs, total := vblocks(n, func(i int) int { return i % 3 })
		recv := make([]byte, total)
		if err := w.Allgatherv(fill(counts[r], r), recv, counts, displs); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if got := recv[displs[i] : displs[i]+counts[i]]; !bytes.Equal(got, fill(counts[i], i)) {
				return fmt.Errorf("allgatherv: block %d is % x", i, got)
			}
		}
		// Alltoallv: rank r sends r+i+1 bytes to i (seeded by 10r+i).
		sc, sd, stotal := vblocks(n, func(i int) int { return r + i + 1 })
		rc, rd, rtotal := vblocks(n, func(i int) int { return i + r + 1 })
		send := make([]byte, stotal)
		for i := 0; i < n; i++ {
			copy(send[sd[i]:], fill(sc[i], 10*r+i))
		}
		got := make([]byte, rtotal)
		if err := w.Alltoallv(send, sc, sd, got, rc, rd); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if b := got[rd[i] : rd[i]+rc[i]]; !bytes.Equal(b, fill(rc[i], 10*i+r)) {
				return fmt.Errorf("alltoallv: from %d got % x", i, b)
			}
		}
		// Alltoall in place: recv is send.
		buf := make([]byte, 3*n)
		for i := 0; i < n; i++ {
			copy(buf[3*i:], fill(3, 10*r+i))
		}
		if err := w.Alltoall(buf, buf); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if !bytes.Equal(buf[3*i:3*i+3], fill(3, 10*i+r)) {
				return fmt.Errorf("alltoall in place: block %d is % x", i, buf[3*i:3*i+3])
			}
		}
		return nil
	})
}

// TestAlltoallw sends each peer a column of a 3-column int32 matrix
// (a vector type) and receives rows, the datatypes differing per peer.
func TestAlltoallw(t *testing.T) {
	every(t, func(p *mpi.Proc) error {
		w := p.World()
		n, r := w.Size(), w.Rank()
		col, err := mpi.TypeVector(n, 1, 3, mpi.TypeInt32)
		if err != nil {
			return err
		}
		mat := make([]int32, 3*n) // n rows of 3
		for i := range mat {
			mat[i] = int32(1000*r + i)
		}
		got := make([]int32, n*n)
		send, recv := make([]mpi.Buf, n), make([]mpi.Buf, n)
		for i := 0; i < n; i++ {
			send[i] = mpi.Buf{Mem: bytesOfInts(mat), Base: 4 * (i % 3), Count: 1, Type: col}
			recv[i] = mpi.Buf{Mem: bytesOfInts(got), Base: 4 * n * i, Count: n, Type: mpi.TypeInt32}
		}
		if err := w.Alltoallw(send, recv); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			for k := 0; k < n; k++ {
				if want := int32(1000*i + 3*k + r%3); got[n*i+k] != want {
					return fmt.Errorf("alltoallw: from %d got %v", i, got[n*i:n*i+n])
				}
			}
		}
		return nil
	})
}

func sumInt32(t testing.TB) mpi.Reduction {
	red, err := mpi.OpReduction(mpi.Sum, mpi.TypeInt32)
	if err != nil {
		t.Fatal(err)
	}
	return red
}

// TestReduceScatterScan checks ReduceScatter(Block), Scan and Exscan
// with Sum and with a non-commutative concatenation at 1 to 8 ranks.
func TestReduceScatterScan(t *testing.T) {
	sum := sumInt32(t)
	for n := 1; n <= 8; n++ {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			mpitest.Run(t, n, "tcp", func(p *mpi.Proc) error { return reduceScatterScan(p.World(), sum) })
		})
	}
}

func reduceScatterScan(w *mpi.Comm, sum mpi.Reduction) error {
	n, r := w.Size(), w.Rank()
	// Element j of every rank's send is r*100+j: the sums are 100*n(n-1)/2 + n*j.
	send := make([]int32, 2*n)
	for j := range send {
		send[j] = int32(100*r + j)
	}
	sumAt := func(j int) int32 { return int32(100*n*(n-1)/2 + n*j) }
	blk := make([]int32, 2)
	if err := w.ReduceScatterBlock(bytesOfInts(send), bytesOfInts(blk), sum); err != nil {
		return err
	}
	if blk[0] != sumAt(2*r) || blk[1] != sumAt(2*r+1) {
		return fmt.Errorf("reduce_scatter_block: %v", blk)
	}
	// Rank i gets i%2+1 elements.
	counts, off := make([]int, n), 0
	for i := range counts {
		counts[i] = 4 * (i%2 + 1)
		if i < r {
			off += i%2 + 1
		}
	}
	part := make([]int32, 2)
	if err := w.ReduceScatter(bytesOfInts(send), bytesOfInts(part), counts, sum); err != nil {
		return err
	}
	for k := 0; k < r%2+1; k++ {
		if part[k] != sumAt(off+k) {
			return fmt.Errorf("reduce_scatter: %v at %d", part, off)
		}
	}
	return scans(w)
}

// scans runs Scan and Exscan (blocking and not) with a concatenation:
// rank i must see the letters of ranks 0..i (0..i-1) in order.
func scans(w *mpi.Comm) error {
	r := w.Rank()
	concat := mpi.UserReduction(func(in, inout []byte) {
		s := append(bytes.TrimRight(in, "\x00"), bytes.TrimRight(inout, "\x00")...)
		copy(inout, make([]byte, len(inout)))
		copy(inout, s)
	}, mpi.TypeInt64, false)
	cell := []byte{byte('a' + r), 0, 0, 0, 0, 0, 0, 0}
	want := func(k int) string { return string("abcdefgh"[:k]) }
	got := make([]byte, 8)
	if err := w.Scan(cell, got, concat); err != nil {
		return err
	}
	if string(bytes.TrimRight(got, "\x00")) != want(r+1) {
		return fmt.Errorf("scan: %q", got)
	}
	ex := []byte("untouched")[:8]
	req, err := w.Iexscan(cell, ex, concat)
	if err != nil {
		return err
	}
	if _, err := req.Wait(); err != nil {
		return err
	}
	if r == 0 && string(ex) != "untouch"+"e" {
		return fmt.Errorf("exscan changed rank 0's recv: %q", ex)
	}
	if r > 0 && string(bytes.TrimRight(ex, "\x00")) != want(r) {
		return fmt.Errorf("exscan: %q", ex)
	}
	return nil
}

// TestEveryNonBlockingCollective starts one of each non-blocking collective
// at once, on one communicator, and checks them all after Waitall.
func TestEveryNonBlockingCollective(t *testing.T) {
	sum := sumInt32(t)
	every(t, func(p *mpi.Proc) error {
		w := p.World()
		n, r := w.Size(), w.Rank()
		root := n - 1
		gath, scat, all, a2a := make([]byte, 2*n), make([]byte, 2), make([]byte, 2*n), make([]byte, 2*n)
		var src []byte
		if r == root {
			src = fill(2*n, 7)
		}
		counts, displs, total := vblocks(n, func(i int) int { return i%2 + 1 })
		allv := make([]byte, total)
		red, sc, ex := make([]int32, 1), make([]int32, 1), make([]int32, 1)
		one := []int32{int32(r + 1)}
		var reqs []*mpi.Request
		add := func(q *mpi.Request, err error) error { reqs = append(reqs, q); return err }
		for _, err := range []error{
			add(w.Igather(fill(2, r), gath, root)),
			add(w.Iscatter(src, scat, root)),
			add(w.Iallgather(fill(2, r), all)),
			add(w.Ialltoall(fill(2*n, r), a2a)),
			add(w.Iallgatherv(fill(counts[r], r), allv, counts, displs)),
			add(w.IreduceBytes(bytesOfInts(one), bytesOfInts(red), sum, root)),
			add(w.Iscan(bytesOfInts(one), bytesOfInts(sc), sum)),
			add(w.Iexscan(bytesOfInts(one), bytesOfInts(ex), sum)),
		} {
			if err != nil {
				return err
			}
		}
		if _, err := mpi.Waitall(reqs); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if r == root && !bytes.Equal(gath[2*i:2*i+2], fill(2, i)) || !bytes.Equal(all[2*i:2*i+2], fill(2, i)) ||
				!bytes.Equal(a2a[2*i:2*i+2], fill(2*n, i)[2*r:2*r+2]) || !bytes.Equal(allv[displs[i]:displs[i]+counts[i]], fill(counts[i], i)) {
				return fmt.Errorf("block %d: gather % x, allgather % x, alltoall % x, allgatherv % x", i, gath, all, a2a, allv)
			}
		}
		if !bytes.Equal(scat, fill(2*n, 7)[2*r:2*r+2]) || (r == root && int(red[0]) != n*(n+1)/2) ||
			int(sc[0]) != (r+1)*(r+2)/2 || (r > 0 && int(ex[0]) != r*(r+1)/2) {
			return fmt.Errorf("scatter % x, reduce %d, scan %d, exscan %d", scat, red[0], sc[0], ex[0])
		}
		return nil
	})
}

// TestRequestThen: the wrapping request completes after then ran, with
// then's error.
func TestRequestThen(t *testing.T) {
	every(t, func(p *mpi.Proc) error {
		w := p.World()
		recv := make([]int32, 1)
		r, err := mpi.Iallreduce(w, []int32{int32(w.Rank())}, recv, mpi.Sum)
		if err != nil {
			return err
		}
		var seen int32 = -1
		if _, err := r.Then(func() error { seen = recv[0]; return nil }).Wait(); err != nil {
			return err
		}
		if want := int32(w.Size() * (w.Size() - 1) / 2); seen != want {
			return fmt.Errorf("then saw %d, want %d", seen, want)
		}
		r, err = w.Ibarrier()
		if err != nil {
			return err
		}
		if _, err := r.Then(func() error { return mpi.ErrTruncate }).Wait(); !errors.Is(err, mpi.ErrTruncate) {
			return fmt.Errorf("then's error: got %v", err)
		}
		return nil
	})
}
