// Command bench measures gompi's message path the way the OSU
// micro-benchmarks do: ping-pong latency between ranks 0 and 1 for sizes
// from 1 B to 4 MiB, streaming bandwidth with a window of non-blocking
// sends, and Allreduce latency over every rank. It prints one table per
// test; -json prints the rows as JSON lines instead.
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
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	_, err := run(mpi.Default(), os.Args[1:], os.Stdout)
	if ferr := mpi.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
