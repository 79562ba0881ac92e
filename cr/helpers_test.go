package cr_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"gompi/cr"
	"gompi/cr/crtest"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// rankFunc is a test program: one rank of a job, with its coordinator.
type rankFunc func(c *cr.Coordinator) error

// start runs fn on every rank of a job and returns the ranks' errors.
// terminated counts the ranks that ended with a checkpoint with --term.
func start(cfg mpitest.Config, fn rankFunc) (errs []error, terminated int) {
	var term atomic.Int32
	errs = mpitest.Start(cfg, func(p *mpi.Proc) error {
		c, err := cr.For(p, cr.WithTerminate(func() error { return nil }))
		if err != nil {
			return err
		}
		// A terminated rank ends as the job's process would (Finalize,
		// then exit): the harness finalizes it.
		if err := fn(c); !errors.Is(err, cr.ErrTerminated) {
			return err
		}
		term.Add(1)
		return nil
	})
	return errs, int(term.Load())
}

// run is start that fails t on any rank's error.
func run(t testing.TB, j *crtest.Job, fn rankFunc) {
	t.Helper()
	errs, _ := start(j.Config("tcp"), fn)
	for _, err := range errs {
		t.Error(err)
	}
}

// background runs f on its own goroutine and returns a function that
// waits for it and returns its error.
func background[T any](f func() (T, error)) func() (T, error) {
	done := make(chan struct{})
	var v T
	var err error
	go func() {
		defer close(done)
		v, err = f()
	}()
	return func() (T, error) {
		<-done
		return v, err
	}
}

func checkpointAt(j *crtest.Job, target uint64, opts cr.Options) func() (cr.Result, error) {
	return j.StartAt(target, opts)
}

func must[T any](v T, err error) func(t testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func errorf(rank int, format string, a ...any) error {
	return fmt.Errorf("rank %d: %s", rank, fmt.Sprintf(format, a...))
}

// attached closes ready once n ranks have attached their coordinator,
// then runs fn: a coordinator may query them from then on.
func attached(n int, ready chan struct{}, fn rankFunc) rankFunc {
	var mu sync.Mutex
	count := 0
	return func(c *cr.Coordinator) error {
		mu.Lock()
		count++
		if count == n {
			close(ready)
		}
		mu.Unlock()
		return fn(c)
	}
}
