package cr_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gompi/cr"
	"gompi/cr/crtest"
	"gompi/frameworks/crs"
	"gompi/mpi"
)

// TestRunRollsBack: 3 ranks accumulate a ring's values step by step under
// cr.Run, are checkpointed at safe point 20, and at step 60 are rolled
// back in place to that sequence: the call after the rollback returns
// ErrRolledBack, Run calls the function again with the protected values
// of safe point 20 (its Dup made again), and the job ends with the sums
// of a run that never rolled back.
func TestRunRollsBack(t *testing.T) {
	const n, steps, stopAt = 3, 100, 60
	j := crtest.NewJob(n, t.TempDir(), "")
	saved := j.StartAt(20, crs.Options{})
	var arrived sync.WaitGroup
	arrived.Add(n)
	rolled := make(chan struct{})
	go func() {
		arrived.Wait()
		j.RollBack(1, 0)
		close(rolled)
	}()
	var passes [n]atomic.Int32
	var sums [n]int
	run(t, j, func(c *cr.Coordinator) error {
		w := c.Proc().World()
		return c.Run(t.Context(), func() error {
			pass := passes[w.Rank()].Add(1)
			step, acc := 1, 0
			if err := c.Protect("step", &step); err != nil {
				return err
			}
			if err := c.Protect("acc", &acc); err != nil {
				return err
			}
			ring, err := w.Dup()
			if err != nil {
				return err
			}
			for ; step <= steps; step++ {
				if err := c.SafePoint(); err != nil {
					return err
				}
				if step == stopAt && pass == 1 {
					arrived.Done()
					<-rolled
					if err := waitRolling(c.Proc()); err != nil {
						return err
					}
				}
				got := make([]int, 1)
				if err := mpi.Allreduce(ring, []int{step * (w.Rank() + 1)}, got, mpi.Sum); err != nil {
					return fmt.Errorf("step %d (pass %d): %w", step, pass, err)
				}
				acc += got[0]
			}
			sums[w.Rank()] = acc
			return nil
		})
	})
	if res, err := saved(); err != nil || res.Seq != 0 {
		t.Fatalf("checkpoint at safe point 20: %+v, %v", res, err)
	}
	want := 0
	for s := 1; s <= steps; s++ {
		want += s * (1 + 2 + 3)
	}
	for r := range n {
		if sums[r] != want || passes[r].Load() != 2 {
			t.Errorf("rank %d: sum %d after %d passes, want %d after 2", r, sums[r], passes[r].Load(), want)
		}
	}
}

// waitRolling waits until the runtime's rollback request reached p (its
// library then refuses every call).
func waitRolling(p *mpi.Proc) error {
	deadline := time.Now().Add(time.Minute)
	for !p.RollingBack() {
		if time.Now().After(deadline) {
			return errors.New("the rollback request never arrived")
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}
