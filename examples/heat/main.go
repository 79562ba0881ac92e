// Command heat solves 2-D heat diffusion with Jacobi iterations on an
// N×N grid split by rows across the ranks, exchanging halo rows every step
// and reducing the residual with Allreduce. It ends by printing
//
//	checksum: <16 hex digits>
//
// a hash of the final grid gathered on rank 0, identical for any number of
// ranks, node layout or transport. Run it alone (`go run ./examples/heat
// -size 64 -steps 50`) or under gompirun. It is restartable: under
// `gompirun -am ft-enable-cr`, gompi-checkpoint saves it at the top of a
// step (its grid and step are registered with package cr) and
// gompi-restart finishes it with the same checksum. With -checkpoint-every
// K it checkpoints itself every K steps (cr.Checkpoint), at steps a test
// knows, and a restart from any of them takes no more.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"gompi/mpi"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := mpi.Init(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "heat:", err)
		os.Exit(1)
	}
	_, err := run(mpi.Default(), os.Args[1:], os.Stdout)
	if ferr := mpi.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "heat:", err)
		os.Exit(1)
	}
}
