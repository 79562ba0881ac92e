package cr_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"gompi/cr"
	"gompi/cr/crtest"
	"gompi/mpi/mpitest/membtl"
)

// oneWayState is the registered state of the one-way program.
type oneWayState struct {
	Step int
	Got  []string
}

// oneWay: a channel used in one direction only, and never before the
// checkpoint by its receiver. At each step rank 3 sends rank 1 two
// messages; rank 1 receives them one step later, and never sends to rank
// 3. No collective runs between the safe points, so at the checkpoint at
// safe point 2 rank 1 has received nothing from rank 3 and has no other
// reason to know of it: only the bookmark exchange tells it what rank 3
// sent. Ranks 0 and 2 only reach their safe points. hold, when set, runs
// on rank 3 when it saved and on rank 1 when it saves (OnCheckpoint).
func oneWay(steps int, out []oneWayState, hold func(c *cr.Coordinator) error) rankFunc {
	big := bytes.Repeat([]byte{'x'}, 200<<10)
	return func(c *cr.Coordinator) error {
		w := c.Proc().World()
		r := w.Rank()
		st := oneWayState{Step: 1}
		if err := c.Protect("state", &st); err != nil {
			return err
		}
		if hold != nil && (r == 1 || r == 3) {
			if err := c.OnCheckpoint(func(string) error { return hold(c) }); err != nil {
				return err
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		recv := func(step int) error {
			buf := make([]byte, len(big)+16)
			for k := range 2 {
				s, err := w.RecvCtx(ctx, buf, 3, step)
				if err != nil {
					return err
				}
				if k == 1 && !bytes.Equal(buf[:s.Count], big) {
					return errorf(r, "step %d: the large message came as %d bytes", step, s.Count)
				}
				st.Got = append(st.Got, fmt.Sprintf("%d.%d.%d", step, k, s.Count))
			}
			return nil
		}
		for ; st.Step <= steps; st.Step++ {
			if err := c.SafePoint(); err != nil {
				return err
			}
			switch {
			case r == 3:
				if err := w.Send(big[:5000], 1, st.Step); err != nil {
					return err
				}
				rq, err := w.Isend(big, 1, st.Step)
				if err != nil {
					return err
				}
				if _, err := rq.Wait(); err != nil {
					return err
				}
			case r == 1 && st.Step > 1:
				if err := recv(st.Step - 1); err != nil {
					return err
				}
			}
		}
		if r == 1 {
			if err := recv(steps); err != nil {
				return err
			}
		}
		out[r] = st
		return nil
	}
}

// TestOneWayInFlight checkpoints the one-way program while rank 3's
// messages of step 1 are held in flight (btl mem) toward rank 1, which has
// never heard from it: rank 1 must drain them before it saves. They are
// released a while after rank 3 saved; rank 1's save finds them in its
// library, and they are delivered exactly once and in order after the
// checkpoint, and again after a restart from it (a checkpoint that lost
// them would leave the restarted rank 1 waiting for messages rank 3 sent
// before its own save).
func TestOneWayInFlight(t *testing.T) {
	const steps = 4
	var want []string
	for s := 1; s <= steps; s++ {
		want = append(want, fmt.Sprintf("%d.0.5000", s), fmt.Sprintf("%d.1.%d", s, 200<<10))
	}
	j := crtest.NewJob(4, t.TempDir(), "oneway")
	cfg := j.Config(membtl.Name)
	cfg.Net = membtl.NewNetwork()
	release := cfg.Net.Hold(3, 1, 1000)
	var released atomic.Bool
	hold := func(c *cr.Coordinator) error {
		if c.Proc().Rank() == 3 {
			// Rank 1 waits in its drain meanwhile, unless it does not
			// know it must: then it saves first.
			time.AfterFunc(200*time.Millisecond, func() {
				released.Store(true)
				release()
			})
			return nil
		}
		if !released.Load() {
			return errors.New("rank 1 saves while rank 3's messages are still held: it did not drain them")
		}
		if _, ok, err := c.Proc().World().Iprobe(3, 1); err != nil || !ok {
			return fmt.Errorf("rank 1 saves without rank 3's message of step 1 in its library (%v)", err)
		}
		return nil
	}
	out := make([]oneWayState, 4)
	wait := checkpointAt(j, 2, cr.Options{})
	errs, _ := start(cfg, oneWay(steps, out, hold))
	for _, err := range errs {
		t.Error(err)
	}
	must(wait())(t)
	if !reflect.DeepEqual(out[1].Got, want) {
		t.Fatalf("after continue rank 1 got %v, want %v", out[1].Got, want)
	}
	nj := must(j.Restart(0))(t)
	out2 := make([]oneWayState, 4)
	errs, _ = start(nj.Config(membtl.Name), oneWay(steps, out2, nil))
	for _, err := range errs {
		t.Error(err)
	}
	if !reflect.DeepEqual(out2[1].Got, want) {
		t.Fatalf("after restart rank 1 got %v, want %v", out2[1].Got, want)
	}
}
