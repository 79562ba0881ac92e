package mpi_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// every runs fn for n = 1..5 ranks over tcp.
func every(t *testing.T, fn func(p *mpi.Proc) error) {
	for n := 1; n <= 5; n++ {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) { mpitest.Run(t, n, "tcp", fn) })
	}
}

func roots(n int) []int {
	if n == 1 {
		return []int{0}
	}
	return []int{0, n - 1, n / 2}
}

func TestBarrierAndBcast(t *testing.T) {
	every(t, func(p *mpi.Proc) error {
		w := p.World()
		if err := w.Barrier(); err != nil {
			return err
		}
		for _, root := range roots(w.Size()) {
			for _, size := range []int{0, 1, 1000, 200 << 10} {
				buf := make([]byte, size)
				if w.Rank() == root {
					for i := range buf {
						buf[i] = byte(i + root)
					}
				}
				if err := w.Bcast(buf, root); err != nil {
					return err
				}
				for i := range buf {
					if buf[i] != byte(i+root) {
						return fmt.Errorf("bcast root %d size %d: byte %d is %d", root, size, i, buf[i])
					}
				}
			}
		}
		return nil
	})
}

func TestReduceAllreduce(t *testing.T) {
	every(t, func(p *mpi.Proc) error {
		w := p.World()
		n, r := w.Size(), w.Rank()
		// Integer contributions have exact expected results for every op.
		for _, count := range []int{1, 7, 20000} { // 20000 int64 = 160 KiB: ring allreduce
			in := make([]int64, count)
			for i := range in {
				in[i] = int64((r+1)*(i%5+1)) - 3
			}
			ops := []mpi.Op{mpi.Sum, mpi.Prod, mpi.Min, mpi.Max}
			want := map[mpi.Op][]int64{}
			for _, op := range ops {
				w := make([]int64, count)
				for i := range w {
					for q := 0; q < n; q++ {
						v := int64((q+1)*(i%5+1)) - 3
						switch {
						case q == 0:
							w[i] = v
						case op == mpi.Sum:
							w[i] += v
						case op == mpi.Prod:
							w[i] *= v
						case op == mpi.Min:
							w[i] = min(w[i], v)
						case op == mpi.Max:
							w[i] = max(w[i], v)
						}
					}
				}
				want[op] = w
			}
			for _, op := range ops { // the same order on every rank
				w2 := want[op]
				out := make([]int64, count)
				if err := mpi.Allreduce(w, in, out, op); err != nil {
					return err
				}
				if !slices.Equal(out, w2) {
					return fmt.Errorf("allreduce %v count %d: got %v…, want %v…", op, count, out[:1], w2[:1])
				}
				for _, root := range roots(n) {
					out := make([]int64, count)
					if err := mpi.Reduce(w, in, out, op, root); err != nil {
						return err
					}
					if r == root && !slices.Equal(out, w2) {
						return fmt.Errorf("reduce %v root %d count %d: got %v…, want %v…", op, root, count, out[:1], w2[:1])
					}
				}
			}
		}
		// In place, small types.
		b := []uint8{uint8(r), 1}
		if err := mpi.Allreduce(w, b, b, mpi.Max); err != nil {
			return err
		}
		if b[0] != uint8(n-1) || b[1] != 1 {
			return fmt.Errorf("in-place uint8 max: %v", b)
		}
		f := []float32{float32(r) + 0.25}
		if err := mpi.Allreduce(w, f, f, mpi.Min); err != nil {
			return err
		}
		if f[0] != 0.25 {
			return fmt.Errorf("float32 min: %v", f)
		}
		return nil
	})
}

// TestFloatReductionsDeterministic checks that every rank gets the same
// bits, and that a second run gets the same bits again.
func TestFloatReductionsDeterministic(t *testing.T) {
	for n := 2; n <= 5; n++ {
		for _, count := range []int{3, 30000} {
			var first []float64
			for run := 0; run < 2; run++ {
				results := make([][]float64, n)
				mpitest.Run(t, n, "uds", func(p *mpi.Proc) error {
					rng := rand.New(rand.NewPCG(uint64(p.Rank()), 9))
					in := make([]float64, count)
					for i := range in {
						in[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(12)-6))
					}
					out := make([]float64, count)
					if err := mpi.Allreduce(p.World(), in, out, mpi.Sum); err != nil {
						return err
					}
					results[p.Rank()] = out
					return nil
				})
				for r := 1; r < n; r++ {
					if !slices.Equal(results[r], results[0]) {
						t.Fatalf("n=%d count=%d: rank %d's sum differs from rank 0's", n, count, r)
					}
				}
				if run == 0 {
					first = results[0]
				} else if !slices.Equal(first, results[0]) {
					t.Fatalf("n=%d count=%d: two runs gave different sums", n, count)
				}
			}
		}
	}
}

func TestGatherScatter(t *testing.T) {
	every(t, func(p *mpi.Proc) error {
		w := p.World()
		n, r := w.Size(), w.Rank()
		for _, root := range roots(n) {
			// Gather / Scatter with equal blocks.
			mine := []int32{int32(r), int32(r * 10)}
			all := make([]int32, 2*n)
			if err := mpi.GatherT(w, mine, all, root); err != nil {
				return err
			}
			if r == root {
				for q := 0; q < n; q++ {
					if all[2*q] != int32(q) || all[2*q+1] != int32(q*10) {
						return fmt.Errorf("gather root %d: %v", root, all)
					}
				}
			}
			got := make([]int32, 2)
			if err := mpi.ScatterT(w, all, got, root); err != nil {
				return err
			}
			if got[0] != int32(r) || got[1] != int32(r*10) {
				return fmt.Errorf("scatter root %d: rank %d got %v", root, r, got)
			}
			// Gatherv / Scatterv: rank q contributes q+1 elements, stored
			// in reverse rank order with gaps.
			counts, displs := make([]int, n), make([]int, n)
			off := 0
			for q := n - 1; q >= 0; q-- {
				counts[q], displs[q] = q+1, off
				off += q + 2
			}
			send := make([]float64, r+1)
			for i := range send {
				send[i] = float64(r*100 + i)
			}
			recv := make([]float64, off)
			if err := mpi.GathervT(w, send, recv, counts, displs, root); err != nil {
				return err
			}
			if r == root {
				for q := 0; q < n; q++ {
					for i := 0; i <= q; i++ {
						if recv[displs[q]+i] != float64(q*100+i) {
							return fmt.Errorf("gatherv root %d: %v", root, recv)
						}
					}
				}
			}
			back := make([]float64, r+1)
			if err := mpi.ScattervT(w, recv, counts, displs, back, root); err != nil {
				return err
			}
			if !slices.Equal(back, send) {
				return fmt.Errorf("scatterv root %d: rank %d got %v, want %v", root, r, back, send)
			}
		}
		return nil
	})
}

func TestAllgatherAlltoall(t *testing.T) {
	every(t, func(p *mpi.Proc) error {
		w := p.World()
		n, r := w.Size(), w.Rank()
		all := make([]uint16, 3*n)
		if err := mpi.AllgatherT(w, []uint16{uint16(r), 7, uint16(r + 1)}, all); err != nil {
			return err
		}
		for q := 0; q < n; q++ {
			if all[3*q] != uint16(q) || all[3*q+1] != 7 || all[3*q+2] != uint16(q+1) {
				return fmt.Errorf("allgather: %v", all)
			}
		}
		send := make([]byte, 4*n)
		for q := 0; q < n; q++ {
			copy(send[4*q:], []byte{byte(r), byte(q), 0xAA, byte(r + q)})
		}
		recv := make([]byte, 4*n)
		if err := w.Alltoall(send, recv); err != nil {
			return err
		}
		for q := 0; q < n; q++ {
			if !bytes.Equal(recv[4*q:4*q+4], []byte{byte(q), byte(r), 0xAA, byte(r + q)}) {
				return fmt.Errorf("alltoall block %d: %v", q, recv[4*q:4*q+4])
			}
		}
		return nil
	})
}

func TestNonBlockingCollectives(t *testing.T) {
	every(t, func(p *mpi.Proc) error {
		w := p.World()
		n, r := w.Size(), w.Rank()
		// Several collectives in flight at once, then waited on in reverse.
		b1, err := w.Ibarrier()
		if err != nil {
			return err
		}
		buf := make([]byte, 5000)
		if r == n-1 {
			for i := range buf {
				buf[i] = byte(i * 3)
			}
		}
		b2, err := w.Ibcast(buf, n-1)
		if err != nil {
			return err
		}
		in, out := []int64{int64(r), 1}, make([]int64, 2)
		b3, err := mpi.Iallreduce(w, in, out, mpi.Sum)
		if err != nil {
			return err
		}
		// A blocking collective between them keeps its own numbering.
		x := []int32{int32(r)}
		if err := mpi.Allreduce(w, x, x, mpi.Max); err != nil {
			return err
		}
		for _, rq := range []*mpi.Request{b3, b2, b1} {
			if _, err := rq.Wait(); err != nil {
				return err
			}
		}
		if out[0] != int64(n*(n-1)/2) || out[1] != int64(n) || x[0] != int32(n-1) {
			return fmt.Errorf("iallreduce %v, allreduce %v", out, x)
		}
		for i := range buf {
			if buf[i] != byte(i*3) {
				return fmt.Errorf("ibcast byte %d: %d", i, buf[i])
			}
		}
		return nil
	})
}

func TestCollectiveArgs(t *testing.T) {
	mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		// Refused before any message moves, on every rank alike.
		for i, err := range []error{
			w.Bcast(nil, 2),
			w.Alltoall(make([]byte, 3), make([]byte, 3)),
			mpi.Allreduce(w, []int32{1}, []int32{}, mpi.Sum),
			mpi.Allreduce(w, []int32{1}, []int32{0}, mpi.Op(9)),
		} {
			if !errors.Is(err, mpi.ErrArg) {
				return fmt.Errorf("bad collective %d: %v, want ErrArg", i, err)
			}
		}
		// Buffers that differ between ranks are reported where noticed.
		want := []error{nil, mpi.ErrTruncate}
		if err := w.Bcast(make([]byte, 4-2*w.Rank()), 0); !errors.Is(err, want[w.Rank()]) {
			return fmt.Errorf("bcast into a smaller buffer: %v, want %v", err, want[w.Rank()])
		}
		want = []error{nil, mpi.ErrArg}
		if err := w.Bcast(make([]byte, 2+2*w.Rank()), 0); !errors.Is(err, want[w.Rank()]) {
			return fmt.Errorf("bcast into a larger buffer: %v, want %v", err, want[w.Rank()])
		}
		return nil
	})
}
