// Command plainheat is examples/heat without a line of checkpoint/restart
// code: it never imports package cr, registers no state and has no safe
// point. It solves the same 2-D heat diffusion and prints the same
//
//	checksum: <16 hex digits>
//
// as heat for the same -size and -steps, for any number of ranks, node
// layout or transport. It is the program transparent checkpoints are
// tested on: a CRS that saves a process from outside (crs=criu) must be
// able to stop it anywhere in its loop, inside a halo exchange or an
// Allreduce, and resume or restart it to the same checksum.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"gompi/examples/heat/solver"
	"gompi/mpi"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := mpi.Init(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "plainheat:", err)
		os.Exit(1)
	}
	_, err := run(mpi.Default(), os.Args[1:], os.Stdout)
	if ferr := mpi.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "plainheat:", err)
		os.Exit(1)
	}
}

// run computes the heat diffusion on p's world and returns the checksum
// rank 0 prints (the empty string on other ranks).
func run(p *mpi.Proc, args []string, out io.Writer) (string, error) {
	var o solver.Options
	fs := flag.NewFlagSet("plainheat", flag.ContinueOnError)
	fs.SetOutput(out)
	o.Register(fs)
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if err := o.Check(); err != nil {
		return "", err
	}
	w := p.World()
	s, err := solver.New(o.Size, w.Size(), w.Rank())
	if err != nil {
		return "", err
	}
	var residual float64
	for step := 1; step <= o.Steps; step++ {
		if residual, err = s.Iterate(w, o, step, out); err != nil {
			return "", err
		}
	}
	return s.Finish(w, out, "plainheat", o.Steps, residual)
}
