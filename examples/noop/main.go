// Command noop holds N MiB of state, random or compressible, and idles
// until told to stop (SIGTERM or SIGINT) or until -seconds pass: a rank
// whose checkpoint size and cost are known, for checkpoint demos and
// measurements. Its state is registered with package cr, and it comes to
// a safe point whenever a checkpoint asks (cr.Requested), so it can be
// checkpointed and restarted with its state while it idles.
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
	// The library lives until Finalize; only the idling ends on a signal.
	if err := mpi.Init(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "noop:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	_, err := run(ctx, mpi.Default(), os.Args[1:], os.Stdout)
	if ferr := mpi.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "noop:", err)
		os.Exit(1)
	}
}
