package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"

	"gompi/cr"
	"gompi/mpi"
)

// Fill returns rows [row0, row0+rows) of the side×side field at step 0:
// around 300 with a few smooth waves over it, never zero.
func Fill(side, row0, rows int) []float64 {
	f := make([]float64, side*rows)
	for r := range rows {
		y := float64(row0+r) / float64(side)
		for x := range side {
			u := float64(x) / float64(side)
			f[r*side+x] = 300 + 20*math.Sin(2*math.Pi*u) + 8*math.Sin(2*math.Pi*3*y+1) +
				3*math.Sin(2*math.Pi*(5*u+2*y)) + 0.5*math.Cos(2*math.Pi*11*u*y)
		}
	}
	return f
}

// Step advances the field by one step: each cell relaxes slowly toward
// a wave that drifts with the step, so the field stays smooth and every
// value changes.
func Step(f []float64, side, row0, step int) {
	phase := float64(step) / 40
	for i := range f {
		x := float64(i%side) / float64(side)
		y := float64(row0+i/side) / float64(side)
		target := 300 + 20*math.Sin(2*math.Pi*x+phase) + 8*math.Sin(2*math.Pi*3*y+1-phase)
		f[i] += 0.01 * (target - f[i])
	}
}

// Checksum hashes the field's bytes.
func Checksum(f []float64) string {
	h := fnv.New64a()
	var b [8]byte
	for _, v := range f {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
		h.Write(b[:])
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// rowsOf is the first row and row count of rank's part of side rows
// split over size ranks.
func rowsOf(side, size, rank int) (int, int) {
	base, extra := side/size, side%size
	row0 := rank*base + min(rank, extra)
	rows := base
	if rank < extra {
		rows++
	}
	return row0, rows
}

// run computes the field on p's world and returns this rank's checksum.
func run(p *mpi.Proc, args []string, out io.Writer) (string, error) {
	fs := flag.NewFlagSet("field", flag.ContinueOnError)
	fs.SetOutput(out)
	side := fs.Int("side", 2048, "the grid is side×side float64 cells (2048: 32 MiB)")
	steps := fs.Int("steps", 10, "steps to compute")
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	w := p.World()
	if *side < w.Size() || *steps < 0 {
		return "", fmt.Errorf("-side must be at least the number of ranks (%d) and -steps >= 0", w.Size())
	}
	row0, rows := rowsOf(*side, w.Size(), w.Rank())
	field := Fill(*side, row0, rows)
	step := 1
	c, err := cr.For(p)
	if err != nil {
		return "", err
	}
	if err := c.Protect("field", &field); err != nil {
		return "", err
	}
	if err := c.Protect("step", &step); err != nil {
		return "", err
	}
	if len(field) != *side*rows {
		return "", fmt.Errorf("restored field holds %d cells, this run's part has %d: restart with the -side and rank count of the checkpointed run", len(field), *side*rows)
	}
	for ; step <= *steps; step++ {
		if err := c.SafePoint(); err != nil {
			return "", err
		}
		Step(field, *side, row0, step)
	}
	sum := Checksum(field)
	fmt.Fprintf(out, "field: rank %d of %d checksum %s\n", w.Rank(), w.Size(), sum)
	return sum, nil
}
