// Command mgrwork is a manager/worker program that finishes its work when
// workers fail: rank 0 hands out work items (-items) to the other ranks
// one at a time and gathers their results with receives from any source;
// when a worker fails, the manager puts its unfinished item back in the
// queue, the survivors shrink their communicator (-shrink, the default;
// without it the manager waits on each worker's result separately), and
// the work goes on. With no worker left the manager does the rest itself.
// It ends by printing
//
//	mgrwork: done: <items> items, checksum <16 hex digits>
//
// the same for any number of ranks and failures, as long as the manager
// (rank 0) survives. Failures can be asked for: -crash-rank R -crash-at K
// makes worker R kill itself (SIGKILL) when it receives its K-th item, and
// -pause-rank R -pause-at K makes it stop there, printing
//
//	mgrwork: worker R pid P paused at item K
//
// so a test can kill it, or its node, from outside.
//
// Run it under gompirun with the sustain error manager, which keeps the
// job alive after a failure:
//
//	gompirun --mca errmgr sustain,default -np 4 mgrwork -items 200 -crash-rank 2 -crash-at 5
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
		fmt.Fprintln(os.Stderr, "mgrwork:", err)
		os.Exit(1)
	}
	p := mpi.Default()
	err := run(p, os.Args[1:], os.Stdout, hooks{
		crash: func() {
			fmt.Printf("mgrwork: worker %d crashing (-crash-at)\n", p.Rank())
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		},
		pause: func(item int) {
			fmt.Printf("mgrwork: worker %d pid %d paused at item %d\n", p.Rank(), os.Getpid(), item)
			<-ctx.Done()
		},
	})
	if ferr := mpi.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mgrwork:", err)
		os.Exit(1)
	}
}
