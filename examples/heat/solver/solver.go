// Package solver is the numerical core of the heat examples: 2-D heat
// diffusion with Jacobi iterations on an N×N grid split by rows across the
// ranks. examples/heat wraps it with checkpoint/restart through package cr
// (its grid and step registered, a safe point every step); examples/plainheat
// runs the same loop with no C/R code at all, for transparent checkpoints.
// Both print the same checksum for the same -size and -steps.
package solver

import (
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"time"

	"gompi/mpi"
)

// Hot is the boundary: the top edge is held at Hot, the other edges at 0.
const Hot = 100.0

// Options are the flags both programs take.
type Options struct {
	Size, Steps int
	Sleep       time.Duration
	Every       int
}

// Register adds the options' flags to fs.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.IntVar(&o.Size, "size", 256, "interior grid size N (an N×N grid)")
	fs.IntVar(&o.Steps, "steps", 500, "Jacobi iterations")
	fs.DurationVar(&o.Sleep, "sleep", 0, "pause after each step (to slow a demo down)")
	fs.IntVar(&o.Every, "every", 0, "print the residual every this many steps (0: only at the end)")
}

// Check rejects values no run can use.
func (o Options) Check() error {
	if o.Size < 1 || o.Steps < 0 || o.Every < 0 {
		return fmt.Errorf("-size must be >= 1, -steps and -every >= 0")
	}
	return nil
}

// Slab is one rank's share of the N×N grid: rows lo..hi-1 of the interior.
// Local rows 1..rows are those global interior rows; rows 0 and rows+1 are
// halos (or the fixed boundary at the grid's edges). Each row has the two
// boundary columns too.
type Slab struct {
	N, n, r    int // grid size, ranks, this rank
	rows, cols int
	// Cur is the grid now: the state a checkpoint must keep (next is
	// rebuilt from it every step; its fixed edges are set by New).
	Cur, next []float64
}

// New is rank r's share of an N×N grid split over n ranks; an error when
// some rank would get no row.
func New(N, n, r int) (*Slab, error) {
	if N < n {
		return nil, fmt.Errorf("-size %d is smaller than the %d ranks: every rank needs a row", N, n)
	}
	lo, hi := r*N/n, (r+1)*N/n
	s := &Slab{N: N, n: n, r: r, rows: hi - lo, cols: N + 2}
	s.Cur, s.next = make([]float64, (s.rows+2)*s.cols), make([]float64, (s.rows+2)*s.cols)
	if r == 0 {
		for j := 0; j < s.cols; j++ {
			s.Cur[j], s.next[j] = Hot, Hot
		}
	}
	return s, nil
}

// CheckRestored reports whether Cur, filled from a snapshot, is this
// rank's share of the grid.
func (s *Slab) CheckRestored() error {
	if len(s.Cur) != len(s.next) {
		return fmt.Errorf("restart: the saved grid has %d values, this rank's share of a %dx%d grid on %d ranks has %d: restart with the -size and rank count of the checkpointed run", len(s.Cur), s.N, s.N, s.n, len(s.next))
	}
	return nil
}

// Rows places the rank's interior rows in the grid: the global index of
// its first, the grid's interior row count, and the bytes of a row (its
// boundary columns included). Cur holds one halo row before and after
// them.
func (s *Slab) Rows() (lo, global, rowBytes int) { return s.r * s.N / s.n, s.N, s.cols * 8 }

func (s *Slab) row(g []float64, i int) []float64 { return g[i*s.cols : (i+1)*s.cols] }

// Step does one Jacobi iteration: the halo exchange with the neighbours,
// the update, and the Allreduce of the largest change, which it returns.
func (s *Slab) Step(w *mpi.Comm) (float64, error) {
	if err := s.exchangeHalos(w); err != nil {
		return 0, fmt.Errorf("halo exchange: %w", err)
	}
	res := []float64{s.relax()}
	if err := mpi.Allreduce(w, res, res, mpi.Max); err != nil {
		return 0, fmt.Errorf("residual: %w", err)
	}
	return res[0], nil
}

// Iterate does step number step as o says: Step, then rank 0's progress
// line every o.Every steps, then o.Sleep.
func (s *Slab) Iterate(w *mpi.Comm, o Options, step int, out io.Writer) (float64, error) {
	residual, err := s.Step(w)
	if err != nil {
		return 0, fmt.Errorf("step %d: %w", step, err)
	}
	if s.r == 0 && o.Every > 0 && step%o.Every == 0 {
		fmt.Fprintf(out, "step %d: residual %.6e\n", step, residual)
	}
	if o.Sleep > 0 {
		time.Sleep(o.Sleep)
	}
	return residual, nil
}

// exchangeHalos sends the first and last own rows to the ranks above and
// below and receives theirs into the halo rows.
func (s *Slab) exchangeHalos(w *mpi.Comm) error {
	up, down := s.r-1, s.r+1
	var reqs []*mpi.Request
	if up >= 0 {
		rq1, err := mpi.IrecvT(w, s.row(s.Cur, 0), up, 0)
		if err != nil {
			return err
		}
		rq2, err := mpi.IsendT(w, s.row(s.Cur, 1), up, 1)
		if err != nil {
			return err
		}
		reqs = append(reqs, rq1, rq2)
	}
	if down < s.n {
		rq1, err := mpi.IrecvT(w, s.row(s.Cur, s.rows+1), down, 1)
		if err != nil {
			return err
		}
		rq2, err := mpi.IsendT(w, s.row(s.Cur, s.rows), down, 0)
		if err != nil {
			return err
		}
		reqs = append(reqs, rq1, rq2)
	}
	_, err := mpi.Waitall(reqs)
	return err
}

// relax computes next from Cur, swaps them, and returns this rank's
// largest change.
func (s *Slab) relax() float64 {
	cur, next, cols := s.Cur, s.next, s.cols
	local := 0.0
	for i := 1; i <= s.rows; i++ {
		for j := 1; j <= s.N; j++ {
			v := 0.25 * (cur[(i-1)*cols+j] + cur[(i+1)*cols+j] + cur[i*cols+j-1] + cur[i*cols+j+1])
			local = math.Max(local, math.Abs(v-cur[i*cols+j]))
			next[i*cols+j] = v
		}
	}
	s.Cur, s.next = next, cur
	return local
}

// Finish gathers the interior on rank 0 in row-major order, so the
// checksum does not depend on how the rows were split, and there prints
// the summary and the checksum line
//
//	checksum: <16 hex digits>
//
// to out, under name. It returns the checksum on rank 0, "" elsewhere.
func (s *Slab) Finish(w *mpi.Comm, out io.Writer, name string, steps int, residual float64) (string, error) {
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
		interior = append(interior, s.Cur[i*s.cols+1:i*s.cols+1+s.N]...)
	}
	if err := mpi.GathervT(w, interior, grid, counts, displs, 0); err != nil {
		return "", fmt.Errorf("gather the grid: %w", err)
	}
	if s.r != 0 {
		return "", nil
	}
	sum := checksum(grid)
	fmt.Fprintf(out, "%s: %dx%d grid, %d steps, ranks: %d, residual %.6e\n", name, s.N, s.N, steps, s.n, residual)
	fmt.Fprintf(out, "checksum: %s\n", sum)
	return sum, nil
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
