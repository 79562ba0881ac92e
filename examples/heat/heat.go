package main

import (
	"context"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"time"

	"gompi/cr"
	"gompi/mpi"
)

type options struct {
	size, steps int
	sleep       time.Duration
	every       int
	migrateAt   int
}

func parse(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("heat", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&o.size, "size", 256, "interior grid size N (an N×N grid)")
	fs.IntVar(&o.steps, "steps", 500, "Jacobi iterations")
	fs.DurationVar(&o.sleep, "sleep", 0, "pause after each step (to slow a demo down)")
	fs.IntVar(&o.every, "every", 0, "print the residual every this many steps (0: only at the end)")
	fs.IntVar(&o.migrateAt, "migrate-at", 0, "after this step the last rank asks to move off its node (cr.Migrate; 0: never)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.size < 1 || o.steps < 0 || o.every < 0 || o.migrateAt < 0 {
		return o, fmt.Errorf("-size must be >= 1, -steps, -every and -migrate-at >= 0")
	}
	return o, nil
}

// The boundary: the top edge is held at hot, the other edges at 0.
const hot = 100.0

// run computes the heat diffusion on p's world and returns the checksum
// rank 0 prints (the empty string on other ranks).
func run(p *mpi.Proc, args []string, out io.Writer) (string, error) {
	o, err := parse(args, out)
	if err != nil {
		return "", err
	}
	w := p.World()
	if o.size < w.Size() {
		return "", fmt.Errorf("-size %d is smaller than the %d ranks: every rank needs a row", o.size, w.Size())
	}
	s := newSlab(o.size, w.Size(), w.Rank())
	// Checkpoint/restart: the grid and the step describe the progress at
	// the top of the loop (next is rebuilt from cur every step; its fixed
	// edges are set in newSlab). On a restart Protect fills them from the
	// snapshot and the loop goes on from the saved step.
	step := 1
	var residual float64
	c, err := cr.For(p)
	if err != nil {
		return "", err
	}
	for _, v := range []struct {
		name string
		ptr  any
	}{{"grid", &s.cur}, {"step", &step}, {"residual", &residual}} {
		if err := c.Protect(v.name, v.ptr); err != nil {
			return "", err
		}
	}
	if len(s.cur) != len(s.next) {
		return "", fmt.Errorf("restart: the saved grid has %d values, this rank's share of a %dx%d grid on %d ranks has %d: restart with the -size and rank count of the checkpointed run", len(s.cur), s.N, s.N, s.n, len(s.next))
	}
	for ; step <= o.steps; step++ {
		if err := c.SafePoint(); err != nil {
			return "", err
		}
		if residual, err = s.step(w); err != nil {
			return "", fmt.Errorf("step %d: %w", step, err)
		}
		if s.r == 0 && o.every > 0 && step%o.every == 0 {
			fmt.Fprintf(out, "step %d: residual %.6e\n", step, residual)
		}
		if step == o.migrateAt {
			if err := migrateLast(c, w); err != nil {
				return "", fmt.Errorf("step %d: %w", step, err)
			}
		}
		if o.sleep > 0 {
			time.Sleep(o.sleep)
		}
	}
	grid, err := s.gather(w)
	if err != nil || s.r != 0 {
		return "", err
	}
	sum := checksum(grid)
	fmt.Fprintf(out, "heat: %dx%d grid, %d steps, ranks: %d, residual %.6e\n", s.N, s.N, o.steps, s.n, residual)
	fmt.Fprintf(out, "checksum: %s\n", sum)
	return sum, nil
}

// slab is one rank's share of the N×N grid: rows lo..hi-1 of the interior.
// Local rows 1..rows are those global interior rows; rows 0 and rows+1 are
// halos (or the fixed boundary at the grid's edges). Each row has the two
// boundary columns too.
type slab struct {
	N, n, r    int // grid size, ranks, this rank
	rows, cols int
	cur, next  []float64
}

func newSlab(N, n, r int) *slab {
	lo, hi := r*N/n, (r+1)*N/n
	s := &slab{N: N, n: n, r: r, rows: hi - lo, cols: N + 2}
	s.cur, s.next = make([]float64, (s.rows+2)*s.cols), make([]float64, (s.rows+2)*s.cols)
	if r == 0 {
		for j := 0; j < s.cols; j++ {
			s.cur[j], s.next[j] = hot, hot
		}
	}
	return s
}

func (s *slab) row(g []float64, i int) []float64 { return g[i*s.cols : (i+1)*s.cols] }

// step does one Jacobi iteration: the halo exchange with the neighbours,
// the update, and the Allreduce of the largest change, which it returns.
func (s *slab) step(w *mpi.Comm) (float64, error) {
	if err := s.exchangeHalos(w); err != nil {
		return 0, fmt.Errorf("halo exchange: %w", err)
	}
	res := []float64{s.relax()}
	if err := mpi.Allreduce(w, res, res, mpi.Max); err != nil {
		return 0, fmt.Errorf("residual: %w", err)
	}
	return res[0], nil
}

// exchangeHalos sends the first and last own rows to the ranks above and
// below and receives theirs into the halo rows.
func (s *slab) exchangeHalos(w *mpi.Comm) error {
	up, down := s.r-1, s.r+1
	var reqs []*mpi.Request
	if up >= 0 {
		rq1, err := mpi.IrecvT(w, s.row(s.cur, 0), up, 0)
		if err != nil {
			return err
		}
		rq2, err := mpi.IsendT(w, s.row(s.cur, 1), up, 1)
		if err != nil {
			return err
		}
		reqs = append(reqs, rq1, rq2)
	}
	if down < s.n {
		rq1, err := mpi.IrecvT(w, s.row(s.cur, s.rows+1), down, 1)
		if err != nil {
			return err
		}
		rq2, err := mpi.IsendT(w, s.row(s.cur, s.rows), down, 0)
		if err != nil {
			return err
		}
		reqs = append(reqs, rq1, rq2)
	}
	_, err := mpi.Waitall(reqs)
	return err
}

// relax computes next from cur, swaps them, and returns this rank's
// largest change.
func (s *slab) relax() float64 {
	cur, next, cols := s.cur, s.next, s.cols
	local := 0.0
	for i := 1; i <= s.rows; i++ {
		for j := 1; j <= s.N; j++ {
			v := 0.25 * (cur[(i-1)*cols+j] + cur[(i+1)*cols+j] + cur[i*cols+j-1] + cur[i*cols+j+1])
			local = math.Max(local, math.Abs(v-cur[i*cols+j]))
			next[i*cols+j] = v
		}
	}
	s.cur, s.next = next, cur
	return local
}

// gather collects the interior on rank 0 in row-major order (nil on the
// other ranks), so the checksum does not depend on how the rows were split.
func (s *slab) gather(w *mpi.Comm) ([]float64, error) {
	var counts, displs []int
	var grid []float64
	if s.r == 0 {
		grid = make([]float64, s.N*s.N)
		counts, displs = make([]int, s.n), make([]int, s.n)
		for q := 0; q < s.n; q++ {
			qlo, qhi := q*s.N/s.n, (q+1)*s.N/s.n
			counts[q], displs[q] = (qhi-qlo)*s.N, qlo*s.N
		}
	}
	interior := make([]float64, 0, s.rows*s.N)
	for i := 1; i <= s.rows; i++ {
		interior = append(interior, s.cur[i*s.cols+1:i*s.cols+1+s.N]...)
	}
	if err := mpi.GathervT(w, interior, grid, counts, displs, 0); err != nil {
		return nil, fmt.Errorf("gather the grid: %w", err)
	}
	return grid, nil
}

// checksum is the FNV-1a hash of the grid's values, little-endian.
func checksum(grid []float64) string {
	h := fnv.New64a()
	var b [8]byte
	for _, v := range grid {
		u := math.Float64bits(v)
		for k := range b {
			b[k] = byte(u >> (8 * k))
		}
		h.Write(b[:])
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// migrateLast has the last rank ask to move off its node: the ranks
// split the world so that it alone calls cr.Migrate on its communicator.
// It moves at a later safe point.
func migrateLast(c *cr.Coordinator, w *mpi.Comm) error {
	last := w.Rank() == w.Size()-1
	color := 0
	if last {
		color = 1
	}
	sub, err := w.Split(color, 0)
	if err != nil {
		return err
	}
	if !last {
		return nil
	}
	return c.Migrate(context.Background(), sub, "", -1, cr.MigrateOptions{OffNode: true})
}
