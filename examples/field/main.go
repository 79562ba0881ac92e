// Command field holds a smooth float64 field, as a simulation's
// temperature or pressure looks: on each rank's rows of an N×N grid, a
// sum of a few sines around 300 (no zeros, full mantissas) that evolves
// slowly, step by step. It prints each rank's checksum of its rows at the
// end:
//
//	field: rank <r> of <n> checksum <16 hex digits>
//
// The field is what float-aware compression is for: zstd alone barely
// shrinks it, a byte shuffle first makes it compress
// (sstore_stage_compress_shuffle). It is restartable: under `gompirun -am
// ft-enable-cr` its field and step are registered with package cr, it
// comes to a safe point at the top of every step, and gompi-restart
// finishes it with the same checksums.
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
		fmt.Fprintln(os.Stderr, "field:", err)
		os.Exit(1)
	}
	_, err := run(mpi.Default(), os.Args[1:], os.Stdout)
	if ferr := mpi.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "field:", err)
		os.Exit(1)
	}
}
