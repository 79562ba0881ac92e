// Command ring passes a message (8 KiB by default) around the ring of
// ranks, 0 → 1 → … → 0, and prints how long each lap took. Alone it sends
// to itself. Under `gompirun -am ft-enable-cr` it can be checkpointed at
// the start of a lap and restarted from there.
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
		fmt.Fprintln(os.Stderr, "ring:", err)
		os.Exit(1)
	}
	err := run(mpi.Default(), os.Args[1:], os.Stdout)
	if ferr := mpi.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ring:", err)
		os.Exit(1)
	}
}
