package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"gompi/cr"
	"gompi/examples/heat/solver"
	"gompi/mpi"
)

type options struct {
	solver.Options
	migrateAt int
}

func parse(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("heat", flag.ContinueOnError)
	fs.SetOutput(out)
	o.Register(fs)
	fs.IntVar(&o.migrateAt, "migrate-at", 0, "after this step the last rank asks to move off its node (cr.Migrate; 0: never)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := o.Check(); err != nil {
		return o, err
	}
	if o.migrateAt < 0 {
		return o, fmt.Errorf("-migrate-at must be >= 0")
	}
	return o, nil
}

// run computes the heat diffusion on p's world and returns the checksum
// rank 0 prints (the empty string on other ranks).
func run(p *mpi.Proc, args []string, out io.Writer) (string, error) {
	o, err := parse(args, out)
	if err != nil {
		return "", err
	}
	w := p.World()
	s, err := solver.New(o.Size, w.Size(), w.Rank())
	if err != nil {
		return "", err
	}
	// Checkpoint/restart: the grid and the step describe the progress at
	// the top of the loop. On a restart Protect fills them from the
	// snapshot and the loop goes on from the saved step.
	step := 1
	var residual float64
	c, err := cr.For(p)
	if err != nil {
		return "", err
	}
	if err := protect(c, s, &step, &residual); err != nil {
		return "", err
	}
	if err := s.CheckRestored(); err != nil {
		return "", err
	}
	for ; step <= o.Steps; step++ {
		if err := c.SafePoint(); err != nil {
			return "", err
		}
		if residual, err = s.Iterate(w, o.Options, step, out); err != nil {
			return "", err
		}
		if step == o.migrateAt {
			if err := migrateLast(c, w); err != nil {
				return "", fmt.Errorf("step %d: %w", step, err)
			}
		}
	}
	return s.Finish(w, out, "heat", o.Steps, residual)
}

// migrateLast has the last rank ask to move off its node: the ranks
// split the world so that it alone calls cr.Migrate on its communicator.
// It moves at a later safe point.
func migrateLast(c *cr.Coordinator, w *mpi.Comm) error {
	last := w.Rank() == w.Size()-1
	color := 0
	if last {
		color = 1
	}
	sub, err := w.Split(color, 0)
	if err != nil {
		return err
	}
	if !last {
		return nil
	}
	return c.Migrate(context.Background(), sub, "", -1, cr.MigrateOptions{OffNode: true})
}
