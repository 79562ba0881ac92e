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
	n, r := w.Size(), w.Rank()
	if o.size < n {
		return "", fmt.Errorf("-size %d is smaller than the %d ranks: every rank needs a row", o.size, n)
	}
	N := o.size
	lo, hi := r*N/n, (r+1)*N/n
	rows, cols := hi-lo, N+2
	// Local rows 1..rows are global interior rows lo..hi-1; rows 0 and
	// rows+1 are halos (or the fixed boundary at the grid's edges).
	cur, next := make([]float64, (rows+2)*cols), make([]float64, (rows+2)*cols)
	if r == 0 {
		for j := 0; j < cols; j++ {
			cur[j], next[j] = hot, hot
		}
	}
	up, down := r-1, r+1
	row := func(g []float64, i int) []float64 { return g[i*cols : (i+1)*cols] }
	var residual float64
	// Checkpoint/restart: the grid and the step describe the progress at
	// the top of the loop (next is rebuilt from cur every step; its fixed
	// edges are set above). On a restart Protect fills them from the
	// snapshot and the loop goes on from the saved step.
	step := 1
	c, err := cr.For(p)
	if err != nil {
		return "", err
	}
	for _, v := range []struct {
		name string
		ptr  any
	}{{"grid", &cur}, {"step", &step}, {"residual", &residual}} {
		if err := c.Protect(v.name, v.ptr); err != nil {
			return "", err
		}
	}
	if len(cur) != len(next) {
		return "", fmt.Errorf("restart: the saved grid has %d values, this rank's share of a %dx%d grid on %d ranks has %d: restart with the -size and rank count of the checkpointed run", len(cur), N, N, n, len(next))
	}
	for ; step <= o.steps; step++ {
		if err := c.SafePoint(); err != nil {
			return "", err
		}
		var reqs []*mpi.Request
		if up >= 0 {
			rq1, err := mpi.IrecvT(w, row(cur, 0), up, 0)
			if err != nil {
				return "", err
			}
			rq2, err := mpi.IsendT(w, row(cur, 1), up, 1)
			if err != nil {
				return "", err
			}
			reqs = append(reqs, rq1, rq2)
		}
		if down < n {
			rq1, err := mpi.IrecvT(w, row(cur, rows+1), down, 1)
			if err != nil {
				return "", err
			}
			rq2, err := mpi.IsendT(w, row(cur, rows), down, 0)
			if err != nil {
				return "", err
			}
			reqs = append(reqs, rq1, rq2)
		}
		if _, err := mpi.Waitall(reqs); err != nil {
			return "", fmt.Errorf("step %d: halo exchange: %w", step, err)
		}
		local := 0.0
		for i := 1; i <= rows; i++ {
			for j := 1; j <= N; j++ {
				v := 0.25 * (cur[(i-1)*cols+j] + cur[(i+1)*cols+j] + cur[i*cols+j-1] + cur[i*cols+j+1])
				local = math.Max(local, math.Abs(v-cur[i*cols+j]))
				next[i*cols+j] = v
			}
		}
		cur, next = next, cur
		res := []float64{local}
		if err := mpi.Allreduce(w, res, res, mpi.Max); err != nil {
			return "", fmt.Errorf("step %d: residual: %w", step, err)
		}
		residual = res[0]
		if r == 0 && o.every > 0 && step%o.every == 0 {
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
	// Gather the interior on rank 0 and hash it there in row-major order,
	// so the checksum does not depend on how the rows were split.
	var counts, displs []int
	var grid []float64
	if r == 0 {
		grid = make([]float64, N*N)
		counts, displs = make([]int, n), make([]int, n)
		for q := 0; q < n; q++ {
			qlo, qhi := q*N/n, (q+1)*N/n
			counts[q], displs[q] = (qhi-qlo)*N, qlo*N
		}
	}
	interior := make([]float64, 0, rows*N)
	for i := 1; i <= rows; i++ {
		interior = append(interior, cur[i*cols+1:i*cols+1+N]...)
	}
	if err := mpi.GathervT(w, interior, grid, counts, displs, 0); err != nil {
		return "", fmt.Errorf("gather the grid: %w", err)
	}
	if r != 0 {
		return "", nil
	}
	h := fnv.New64a()
	var b [8]byte
	for _, v := range grid {
		u := math.Float64bits(v)
		for k := range b {
			b[k] = byte(u >> (8 * k))
		}
		h.Write(b[:])
	}
	sum := fmt.Sprintf("%016x", h.Sum64())
	fmt.Fprintf(out, "heat: %dx%d grid, %d steps, ranks: %d, residual %.6e\n", N, N, o.steps, n, residual)
	fmt.Fprintf(out, "checksum: %s\n", sum)
	return sum, nil
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
