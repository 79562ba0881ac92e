package crsim

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"

	"gompi/cr"
	"gompi/mpi"
)

// The program the simulated job runs: a 1-D diffusion on a ring of ranks,
// each holding Cells values, with a halo exchange between neighbours
// pipelined across steps: at each step a rank takes the edges its
// neighbours sent at the step before, updates its cells, and sends its
// new edges. So at every safe point (the top of a step) the halos of the
// step before are in flight, and the checkpoint must drain them. Its
// registered state is the step and the cells: a few bytes, so a
// checkpoint costs its coordination, not its writes.

// haloState is a rank's registered state.
type haloState struct {
	Step  int
	Cells []float64
}

// initial is rank r's cells before step 1.
func initial(r, cells int) []float64 {
	c := make([]float64, cells)
	for i := range c {
		c[i] = float64((r*cells+i)%97) + 1
	}
	return c
}

// relax updates cells from the halos: a three-point average with a
// weight of its own, the same on every run.
func relax(cells []float64, left, right float64) []float64 {
	out := make([]float64, len(cells))
	for i, v := range cells {
		l, r := left, right
		if i > 0 {
			l = cells[i-1]
		}
		if i < len(cells)-1 {
			r = cells[i+1]
		}
		out[i] = 0.25*l + 0.5*v + 0.25*r
	}
	return out
}

// digest is the hash of a rank's final cells.
func digest(cells []float64) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for _, v := range cells {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
		h.Write(b[:])
	}
	return h.Sum64()
}

// Expected is what every rank of the program computes, without MPI: the
// digest of its final cells, by rank. A run checkpointed, continued or
// restarted must end with these.
func Expected(cfg Config) []uint64 {
	cfg = cfg.withDefaults()
	n := cfg.Ranks
	cells := make([][]float64, n)
	for r := range cells {
		cells[r] = initial(r, cfg.Cells)
	}
	for step := 1; step <= cfg.Steps; step++ {
		next := make([][]float64, n)
		for r := range cells {
			var l, rt float64 // step 1: nothing received yet
			if step > 1 {
				l, rt = cells[(r+n-1)%n][cfg.Cells-1], cells[(r+1)%n][0]
			}
			next[r] = relax(cells[r], l, rt)
		}
		cells = next
	}
	out := make([]uint64, n)
	for r := range cells {
		out[r] = digest(cells[r])
	}
	return out
}

// Halo tags: the edge a rank sends its right neighbour is that one's left
// halo; two tags per step, so a ring of two keeps the two apart.
func tagFromLeft(step int) int  { return 2 * step }
func tagFromRight(step int) int { return 2*step + 1 }

// halo runs one rank of the program; hold is the step at whose top the
// rank waits (0: none), until released or a checkpoint wants it at its
// next safe point.
func (j *job) halo(c *cr.Coordinator) error {
	w := c.Proc().World()
	r, n := w.Rank(), w.Size()
	left, right := (r+n-1)%n, (r+1)%n
	st := haloState{Step: 1, Cells: initial(r, j.cfg.Cells)}
	if err := c.Protect("halo", &st); err != nil {
		return err
	}
	for ; st.Step <= j.cfg.Steps; st.Step++ {
		if err := j.wait(c, st.Step); err != nil {
			return err
		}
		if err := c.SafePoint(); err != nil {
			return err
		}
		var lh, rh [1]float64
		if st.Step > 1 {
			if err := recvHalos(w, left, right, st.Step-1, lh[:], rh[:]); err != nil {
				return fmt.Errorf("rank %d, step %d: %w", r, st.Step, err)
			}
		}
		st.Cells = relax(st.Cells, lh[0], rh[0])
		s1, err := mpi.IsendT(w, st.Cells[len(st.Cells)-1:], right, tagFromLeft(st.Step))
		if err != nil {
			return err
		}
		s2, err := mpi.IsendT(w, st.Cells[:1], left, tagFromRight(st.Step))
		if err != nil {
			return err
		}
		if _, err := mpi.Waitall([]*mpi.Request{s1, s2}); err != nil {
			return err
		}
	}
	// The last step's halos: taken, so nothing is left unreceived.
	var lh, rh [1]float64
	if err := recvHalos(w, left, right, j.cfg.Steps, lh[:], rh[:]); err != nil {
		return fmt.Errorf("rank %d, after the last step: %w", r, err)
	}
	j.digests[r] = digest(st.Cells)
	return nil
}

func recvHalos(w *mpi.Comm, left, right, step int, lh, rh []float64) error {
	if _, err := mpi.RecvT(w, lh, left, tagFromLeft(step)); err != nil {
		return err
	}
	_, err := mpi.RecvT(w, rh, right, tagFromRight(step))
	return err
}
