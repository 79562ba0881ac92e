package mpi_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"gompi/mca"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// hierarchical reports whether members on nodes span several nodes with
// more than one member on some node: where han applies.
func hierarchical(nodes []string) bool {
	distinct := map[string]bool{}
	for _, n := range nodes {
		distinct[n] = true
	}
	return len(distinct) > 1 && len(distinct) < len(nodes)
}

// collRun runs the collective sequence of seed on a job of nodes with
// settings and returns each rank's results, after checking on every
// communicator that the coll components asked are the ones expected
// (han first where it applies, unless excluded).
func collRun(t *testing.T, nodes []string, seed uint64, comps []string, settings ...mca.Setting) [][]byte {
	t.Helper()
	out := make([][]byte, len(nodes))
	var mu sync.Mutex
	cfg := mpitest.Config{N: len(nodes), BTL: "tcp,uds", Nodes: nodes, Settings: settings}
	mpitest.RunWith(t, cfg, func(p *mpi.Proc) error {
		w := p.World()
		dup, err := w.Dup()
		if err != nil {
			return err
		}
		// Members in reverse order, by parity: other members, other roots.
		split, err := w.Split(w.Rank()%2, -w.Rank())
		if err != nil {
			return err
		}
		var res []byte
		for i, c := range []*mpi.Comm{w, dup, split} {
			var members []string
			for r := 0; r < c.Size(); r++ {
				members = append(members, nodes[c.WorldRank(r)])
			}
			var want []string
			for _, comp := range comps {
				if comp != "han" || hierarchical(members) {
					want = append(want, comp)
				}
			}
			for _, op := range []string{"barrier", "bcast", "reduce", "allreduce"} {
				got, err := c.CollComponents(op)
				if err != nil {
					return err
				}
				if !slices.Equal(got, want) {
					return fmt.Errorf("communicator %d on nodes %v: %s runs on %v, want %v", i, members, op, got, want)
				}
			}
			r, err := collSequence(c, seed+uint64(i))
			if err != nil {
				return fmt.Errorf("communicator %d: %w", i, err)
			}
			res = append(res, r...)
		}
		mu.Lock()
		out[w.Rank()] = res
		mu.Unlock()
		return nil
	})
	return out
}

// collSequence runs random collectives (the same on every member, from
// seed) with contributions that differ by member, and returns every
// result this member got, in order.
func collSequence(c *mpi.Comm, seed uint64) ([]byte, error) {
	rng := rand.New(rand.NewPCG(seed, 11))
	mine := rand.New(rand.NewPCG(seed, uint64(100+c.Rank())))
	var res []byte
	for step := 0; step < 12; step++ {
		root := rng.IntN(c.Size())
		count := []int{1, 3, 17, 700, 9000, 40000}[rng.IntN(6)]
		op := mpi.Op(rng.IntN(4))
		var got []byte
		var err error
		switch rng.IntN(7) {
		case 0:
			err = c.Barrier()
		case 1:
			buf := make([]byte, count)
			if c.Rank() == root {
				for i := range buf {
					buf[i] = byte(mine.Uint32())
				}
			}
			err, got = c.Bcast(buf, root), buf
		case 2:
			got, err = allreduce(c, ints[int64](mine, count), op)
		case 3:
			got, err = allreduce(c, ints[uint8](mine, count), op)
		case 4:
			got, err = allreduce(c, floats[float64](mine, count), op)
		case 5:
			got, err = reduce(c, ints[int32](mine, count), op, root)
		case 6:
			got, err = reduce(c, floats[float32](mine, count), op, root)
		}
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", step, err)
		}
		res = append(res, got...)
	}
	// The non-blocking form runs the same selection.
	in := floats[float64](mine, 33)
	out := make([]float64, len(in))
	req, err := mpi.Iallreduce(c, in, out, mpi.Sum)
	if err != nil {
		return nil, err
	}
	if _, err := req.Wait(); err != nil {
		return nil, err
	}
	return append(res, raw(out)...), nil
}

func ints[T int64 | int32 | uint8](rng *rand.Rand, n int) []T {
	v := make([]T, n)
	for i := range v {
		v[i] = T(rng.Int64N(1<<16) - 1<<15)
	}
	return v
}

// floats spans magnitudes far apart, so that the order of a sum shows in
// its bits.
func floats[T float64 | float32](rng *rand.Rand, n int) []T {
	v := make([]T, n)
	for i := range v {
		v[i] = T((rng.Float64() - 0.5) * float64(uint64(1)<<rng.IntN(40)))
	}
	return v
}

func raw[T any](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return bytes.Clone(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(v[0]))))
}

func allreduce[T mpi.Numeric](c *mpi.Comm, in []T, op mpi.Op) ([]byte, error) {
	out := make([]T, len(in))
	err := mpi.Allreduce(c, in, out, op)
	return raw(out), err
}

func reduce[T mpi.Numeric](c *mpi.Comm, in []T, op mpi.Op, root int) ([]byte, error) {
	out := make([]T, len(in))
	err := mpi.Reduce(c, in, out, op, root)
	return raw(out), err
}

// The coll selection gives the flat algorithms' results, integers and
// floating point bit for bit, over random layouts, sizes, roots and
// communicators (World, Dup, Split): han runs where it applies, declines
// floating-point reductions and large allreduces, and changes no result.
func TestCollSelectionMatchesFlat(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 11))
	for i := 0; i < 10; i++ {
		n := 2 + rng.IntN(5)
		nodes := make([]string, n)
		k := 1 + rng.IntN(n)
		for r := range nodes {
			nodes[r] = fmt.Sprintf("node%d", rng.IntN(k))
		}
		switch i { // han on World for sure: in rank order, and interleaved
		case 0:
			nodes = []string{"a", "a", "b", "b", "b"}
		case 1:
			nodes = []string{"a", "b", "a", "b", "c", "a"}
		}
		seed := rng.Uint64()
		t.Run(fmt.Sprintf("%v", nodes), func(t *testing.T) {
			sel := collRun(t, nodes, seed, []string{"han", "basic"})
			flat := collRun(t, nodes, seed, []string{"basic"}, mca.Setting{Name: "coll", Value: "^han"})
			// With no component mpi runs the flat algorithms itself.
			none := collRun(t, nodes, seed, nil, mca.Setting{Name: "coll", Value: "^han,basic"})
			for r := range nodes {
				if !bytes.Equal(sel[r], flat[r]) || !bytes.Equal(none[r], flat[r]) {
					t.Fatalf("rank %d: results differ between han, basic and no component", r)
				}
			}
		})
	}
}
