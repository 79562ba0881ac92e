// Command ckpt is a test program of package cr under a real job: every
// rank sums a ring of messages step by step (one message in flight at
// each safe point) and calls cr.Checkpoint, the collective form, at the
// steps -at names. It prints, for tests:
//
//	checkpoint rank=R step=S ref=NAME seq=Q restart=BOOL
//	done rank=R steps=N sum=X
//
// The sum does not depend on checkpoints or restarts.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"gompi/cr"
	"gompi/mpi"
)

func main() {
	steps := flag.Int("steps", 50, "steps")
	at := flag.String("at", "", "comma-separated steps at which every rank calls cr.Checkpoint")
	term := flag.Bool("term", false, "checkpoint with Term (the job ends at the first)")
	every := flag.Int("every", 0, "also call cr.Checkpoint every this many steps (0: never)")
	sleep := flag.Duration("sleep", 0, "pause after each step (so a checkpoint from outside finds the job running)")
	flag.Parse()
	if err := run(*steps, *at, *every, *sleep, *term); err != nil {
		fmt.Fprintln(os.Stderr, "ckpt:", err)
		os.Exit(1)
	}
}

func run(steps int, at string, every int, sleep time.Duration, term bool) error {
	ctx := context.Background()
	if err := mpi.Init(ctx); err != nil {
		return err
	}
	w := mpi.World()
	r, n := w.Rank(), w.Size()
	points := map[int]bool{}
	for _, s := range strings.Split(at, ",") {
		if s == "" {
			continue
		}
		v, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("-at %q: %w", at, err)
		}
		points[v] = true
	}
	type state struct {
		Step int
		Sum  int64
	}
	st := state{Step: 1}
	if err := cr.Protect("state", &st); err != nil {
		return err
	}
	next, prev := (r+1)%n, (r-1+n)%n
	for ; st.Step <= steps; st.Step++ {
		if points[st.Step] || every > 0 && st.Step%every == 0 {
			res, err := cr.Checkpoint(ctx, cr.Options{Term: term})
			if err != nil {
				return err
			}
			fmt.Printf("checkpoint rank=%d step=%d ref=%s seq=%d restart=%v\n", r, st.Step, res.Ref, res.Seq, cr.IsRestart())
		} else if err := cr.SafePoint(); err != nil {
			return err
		}
		// The message sent now is received at the next step: in flight at
		// the safe point.
		if err := mpi.SendT(w, []int64{int64(st.Step*100 + r)}, next, 0); err != nil {
			return err
		}
		if st.Step > 1 {
			v := []int64{0}
			if _, err := mpi.RecvT(w, v, prev, 0); err != nil {
				return err
			}
			st.Sum += v[0]
		}
		time.Sleep(sleep)
	}
	v := []int64{0}
	if _, err := mpi.RecvT(w, v, prev, 0); err != nil {
		return err
	}
	st.Sum += v[0]
	fmt.Printf("done rank=%d steps=%d sum=%d\n", r, steps, st.Sum)
	return mpi.Finalize()
}
