// Command resilient is an iterative solver that loses ranks and goes on,
// the way programs written for ULFM do: Jacobi relaxation of a 1-D field
// (-points, -iters), the points spread over the ranks in blocks, the
// whole field saved in every rank's memory every -every iterations.
// When an operation fails because a rank died, the rank that saw it
// revokes the communicator (Comm.Revoke), so every survivor, whatever it
// was waiting for, reaches the recovery too; the survivors shrink the
// communicator (Comm.Shrink), spread the points over those left, and go on
// from the last saved field. A save counts only when every survivor has
// it: the ranks agree on that (Comm.Agree) after each save. It ends by
// printing, from the first surviving rank,
//
//	resilient: done: <points> points, <iters> iterations, checksum <16 hex digits>
//
// the same for any number of ranks and failures, as long as one rank
// survives. -crash-rank R -crash-at K makes world rank R kill itself
// (SIGKILL) when it starts iteration K.
//
// Run it under gompirun with the sustain error manager, which keeps the
// job alive after a failure:
//
//	gompirun --mca errmgr sustain,default -np 4 resilient -points 4096 -iters 400 -crash-rank 2 -crash-at 150
//
// Without sustain, the first failure aborts the job as usual.
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
		fmt.Fprintln(os.Stderr, "resilient:", err)
		os.Exit(1)
	}
	p := mpi.Default()
	err := run(p, os.Args[1:], os.Stdout, func() {
		fmt.Printf("resilient: rank %d crashing (-crash-at)\n", p.Rank())
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	})
	if ferr := mpi.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "resilient:", err)
		os.Exit(1)
	}
}
