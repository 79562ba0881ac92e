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
	migrateAt       int
	checkpointEvery int
}

func parse(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("heat", flag.ContinueOnError)
	fs.SetOutput(out)
	o.Register(fs)
	fs.IntVar(&o.migrateAt, "migrate-at", 0, "after this step the last rank asks to move off its node (cr.Migrate; 0: never)")
	fs.IntVar(&o.checkpointEvery, "checkpoint-every", 0, "at every this many steps the ranks checkpoint together (cr.Checkpoint, under gompirun -am ft-enable-cr); a restarted run takes none, so each snapshot restarts to the end alone (0: never)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := o.Check(); err != nil {
		return o, err
	}
	if o.migrateAt < 0 || o.checkpointEvery < 0 {
		return o, fmt.Errorf("-migrate-at and -checkpoint-every must be >= 0")
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
	c, err := cr.For(p)
	if err != nil {
		return "", err
	}
	// cr.Run is the re-entry point of an in-job rollback (errmgr
	// rollback): a call the rollback interrupts returns cr.ErrRolledBack,
	// and Run calls the function again once the rank is restored, where
	// Protect fills the grid and step from the sequence returned to.
	var sum string
	err = c.Run(context.Background(), func() error {
		var err error
		sum, err = solve(c, w, o, out)
		return err
	})
	return sum, err
}

// solve runs the iterations from the registered state: on a restart or a
// rollback, Protect fills the grid and the step from the snapshot and the
// loop goes on from the saved step.
func solve(c *cr.Coordinator, w *mpi.Comm, o options, out io.Writer) (string, error) {
	s, err := solver.New(o.Size, w.Size(), w.Rank())
	if err != nil {
		return "", err
	}
	step := 1
	var residual float64
	if err := protect(c, s, &step, &residual); err != nil {
		return "", err
	}
	if err := s.CheckRestored(); err != nil {
		return "", err
	}
	for ; step <= o.Steps; step++ {
		if err := point(c, o, step); err != nil {
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

// point is the safe point at the top of step: a checkpoint of the whole
// job at every -checkpoint-every steps of a run that was not restarted.
// A restart from one of them meets it as a safe point (the count is the
// same), which is where the rank resumes.
func point(c *cr.Coordinator, o options, step int) error {
	if o.checkpointEvery > 0 && step%o.checkpointEvery == 0 && !c.IsRestart() {
		_, err := c.Checkpoint(context.Background(), cr.Options{})
		return err
	}
	return c.SafePoint()
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
