package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"

	"gompi/mpi"
)

type config struct {
	points, iters, every int
	crashRank, crashAt   int
}

func parse(args []string, out io.Writer) (config, error) {
	fs := flag.NewFlagSet("resilient", flag.ContinueOnError)
	fs.SetOutput(out)
	var c config
	fs.IntVar(&c.points, "points", 4096, "points of the field")
	fs.IntVar(&c.iters, "iters", 400, "Jacobi iterations")
	fs.IntVar(&c.every, "every", 10, "save the field every this many iterations")
	fs.IntVar(&c.crashRank, "crash-rank", -1, "world rank that kills itself (with -crash-at)")
	fs.IntVar(&c.crashAt, "crash-at", -1, "iteration at which -crash-rank kills itself")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.points < 3:
		return c, fmt.Errorf("-points %d: need at least 3 (two are the fixed ends)", c.points)
	case c.iters < 0 || c.every < 1:
		return c, fmt.Errorf("-iters %d -every %d: need iters >= 0 and every >= 1", c.iters, c.every)
	case (c.crashRank < 0) != (c.crashAt < 0):
		return c, errors.New("-crash-rank and -crash-at go together")
	}
	return c, nil
}

// run solves, recovering from failures, and prints the result from the
// first surviving rank. crash is how the rank asked to crash does so.
func run(p *mpi.Proc, args []string, out io.Writer, crash func()) error {
	cfg, err := parse(args, out)
	if err != nil {
		return err
	}
	s := &solver{cfg: cfg, comm: p.World(), world: p.World(), saved: initial(cfg.points)}
	s.spread()
	for s.it < cfg.iters {
		if s.it == cfg.crashAt && p.Rank() == cfg.crashRank {
			crash()
		}
		s.agreed = false
		if err := s.step(); err != nil {
			if err := s.recover(err, out); err != nil {
				return err
			}
		}
	}
	if s.comm.Rank() == 0 {
		fmt.Fprintf(out, "resilient: done: %d points, %d iterations, checksum %016x\n", cfg.points, cfg.iters, checksum(s.saved))
	}
	return nil
}

// solver is one rank's part of the solve.
type solver struct {
	cfg         config
	comm, world *mpi.Comm
	// saved is the whole field at iteration savedAt, the same at every
	// rank: where a recovery starts again.
	saved   []float64
	savedAt int
	it      int
	lo, hi  int       // this rank's points [lo, hi)
	u, next []float64 // its points, with a ghost point each side
	// agreed is set when the failure being handled came out of the
	// agreement of a save, which every survivor has taken part in.
	agreed bool
}

// initial is the field at iteration 0: ends fixed at 1 and 0, a bump
// inside.
func initial(n int) []float64 {
	f := make([]float64, n)
	for i := range f {
		f[i] = math.Sin(math.Pi * float64(i) / float64(n-1))
	}
	f[0], f[n-1] = 1, 0
	return f
}

// spread gives this rank its block of the saved field and goes back to
// the iteration it was saved at.
func (s *solver) spread() {
	n, size, r := s.cfg.points, s.comm.Size(), s.comm.Rank()
	s.lo, s.hi = r*n/size, (r+1)*n/size
	s.u = make([]float64, s.hi-s.lo+2)
	s.next = make([]float64, len(s.u))
	copy(s.u[1:], s.saved[s.lo:s.hi])
	s.it = s.savedAt
}

// step runs one iteration and saves the field when it is time to.
func (s *solver) step() error {
	if err := s.exchange(); err != nil {
		return err
	}
	m := s.hi - s.lo
	for i := 1; i <= m; i++ {
		if g := s.lo + i - 1; g == 0 || g == s.cfg.points-1 {
			s.next[i] = s.u[i] // the fixed ends
		} else {
			s.next[i] = 0.5 * (s.u[i-1] + s.u[i+1])
		}
	}
	s.u, s.next = s.next, s.u
	s.it++
	if s.it%s.cfg.every == 0 || s.it == s.cfg.iters {
		return s.save()
	}
	return nil
}

// exchange fills the ghost points from the neighbours' blocks.
func (s *solver) exchange() error {
	r, size, m := s.comm.Rank(), s.comm.Size(), s.hi-s.lo
	left, right := r-1, r+1
	if left < 0 {
		left = mpi.ProcNull
	}
	if right >= size {
		right = mpi.ProcNull
	}
	if _, err := mpi.SendrecvT(s.comm, s.u[1:2], left, 0, s.u[m+1:m+2], right, 0); err != nil {
		return err
	}
	_, err := mpi.SendrecvT(s.comm, s.u[m:m+1], right, 1, s.u[0:1], left, 1)
	return err
}

// save gathers the field into every rank's memory, then the ranks agree
// whether every one of them has it: only then is it where a recovery
// starts. Every rank takes part in the agreement whatever the gather
// gave it, so none waits in it for a rank gone to recover; a rank whose
// gather failed revokes first, so none is left waiting in the gather.
func (s *solver) save() error {
	n, size := s.cfg.points, s.comm.Size()
	counts, displs := make([]int, size), make([]int, size)
	for j := range size {
		lo, hi := j*n/size, (j+1)*n/size
		counts[j], displs[j] = (hi-lo)*8, lo*8
	}
	send := make([]byte, 0, (s.hi-s.lo)*8)
	for _, v := range s.u[1 : s.hi-s.lo+1] {
		send = binary.LittleEndian.AppendUint64(send, math.Float64bits(v))
	}
	recv := make([]byte, n*8)
	gerr := s.comm.Allgatherv(send, recv, counts, displs)
	ok := 1
	if gerr != nil {
		ok = 0
		s.comm.Revoke()
	}
	all, err := s.comm.Agree(ok)
	s.agreed = true
	switch {
	case err != nil:
		return err
	case all != 1 && gerr == nil:
		return fmt.Errorf("another rank could not save iteration %d: %w", s.it, mpi.ErrRevoked)
	case all != 1:
		return gerr
	}
	for i := range s.saved {
		s.saved[i] = math.Float64frombits(binary.LittleEndian.Uint64(recv[8*i:]))
	}
	s.savedAt = s.it
	return nil
}

// recover handles a failure: revoke (so that every survivor learns of
// it, whatever it waits for), shrink, spread the saved field over the
// survivors and go back to where it was saved.
//
// Before the shrink, a rank that has not yet taken part in this
// iteration's agreement does, voting no: another survivor may be waiting
// in it (it finished its gather before the failure broke this rank's
// exchange), and every survivor has made the same number of agreements
// on the communicator, so they all meet in the same one.
func (s *solver) recover(cause error, out io.Writer) error {
	if !errors.Is(cause, mpi.ErrProcFailed) && !errors.Is(cause, mpi.ErrRevoked) {
		return cause
	}
	old := s.comm
	if err := old.Revoke(); err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	if !s.agreed {
		if _, err := old.Agree(0); err != nil && !errors.Is(err, mpi.ErrProcFailed) {
			return fmt.Errorf("agree after %v: %w", cause, err)
		}
	}
	s.agreed = false
	nc, err := old.Shrink()
	if err != nil {
		return fmt.Errorf("shrink after %v: %w", cause, err)
	}
	lost, err := old.GetFailed()
	if err != nil {
		return err
	}
	if old != s.world {
		if err := old.Free(); err != nil {
			return err
		}
	}
	s.comm = nc
	if nc.Rank() == 0 {
		fmt.Fprintf(out, "resilient: failure at iteration %d (%v): %d ranks left (lost world ranks %v); going on from iteration %d\n",
			s.it, cause, nc.Size(), lost.Members(), s.savedAt)
	}
	s.spread()
	return nil
}

// checksum is FNV-1a over the field's bits: equal fields, equal sums.
func checksum(f []float64) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for _, v := range f {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
		h.Write(b[:])
	}
	return h.Sum64()
}

// reference solves serially: what every run must print.
func reference(cfg config) uint64 {
	u, next := initial(cfg.points), make([]float64, cfg.points)
	for range cfg.iters {
		next[0], next[cfg.points-1] = u[0], u[cfg.points-1]
		for i := 1; i < cfg.points-1; i++ {
			next[i] = 0.5 * (u[i-1] + u[i+1])
		}
		u, next = next, u
	}
	return checksum(u)
}
