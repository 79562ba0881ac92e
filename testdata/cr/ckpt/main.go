// Command ckpt is a test program of package cr under a real job: every
// rank sums a ring of messages step by step (one message in flight at
// each safe point) and calls cr.Checkpoint, the collective form, at the
// steps -at names. It prints, for tests:
//
//	checkpoint rank=R step=S ref=NAME seq=Q restart=BOOL
//	done rank=R steps=N sum=X
//
// The sum does not depend on checkpoints or restarts. With -coll each step
// also runs Barrier, Bcast, Reduce and Allreduce (integer and floating
// point) on the world, folds their results' bits into a hash, prints at
// start which coll components run World's Allreduce, and ends with the
// hash:
//
//	coll rank=R allreduce=COMPONENTS
//	done rank=R steps=N sum=X coll=HASH
//
// The hash is the same whatever the layout, checkpoints or restarts.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/fnv"
	"math"
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
	flag.BoolVar(&withColl, "coll", false, "also run collectives each step and print their results' hash")
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
		Coll uint64
	}
	st := state{Step: 1}
	if err := cr.Protect("state", &st); err != nil {
		return err
	}
	if withColl {
		comps, err := w.CollComponents("allreduce")
		if err != nil {
			return err
		}
		fmt.Printf("coll rank=%d allreduce=%s\n", r, strings.Join(comps, ","))
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
		if withColl {
			h, err := collStep(w, st.Step)
			if err != nil {
				return err
			}
			st.Coll = st.Coll*31 + h
		}
		time.Sleep(sleep)
	}
	v := []int64{0}
	if _, err := mpi.RecvT(w, v, prev, 0); err != nil {
		return err
	}
	st.Sum += v[0]
	if withColl {
		fmt.Printf("done rank=%d steps=%d sum=%d coll=%016x\n", r, steps, st.Sum, st.Coll)
	} else {
		fmt.Printf("done rank=%d steps=%d sum=%d\n", r, steps, st.Sum)
	}
	return mpi.Finalize()
}

var withColl bool

// collStep runs one step's collectives, with contributions that depend on
// the rank and step only, and hashes every result this rank got.
func collStep(w *mpi.Comm, step int) (uint64, error) {
	r, n := w.Rank(), w.Size()
	h := fnv.New64a()
	put := func(v any) { binary.Write(h, binary.LittleEndian, v) }
	if err := w.Barrier(); err != nil {
		return 0, err
	}
	root := step % n
	b := make([]int64, 5)
	if r == root {
		for i := range b {
			b[i] = int64(step*1000 + i)
		}
	}
	if err := mpi.BcastT(w, b, root); err != nil {
		return 0, err
	}
	put(b)
	ints := []int64{int64(r*step - 7), int64(r + 1), int64(step - r)}
	iout := make([]int64, len(ints))
	for _, op := range []mpi.Op{mpi.Sum, mpi.Prod, mpi.Min, mpi.Max} {
		if err := mpi.Allreduce(w, ints, iout, op); err != nil {
			return 0, err
		}
		put(iout)
	}
	// Magnitudes far apart: the order of the sum shows in its bits.
	floats := []float64{math.Ldexp(float64(r+1)/3, 3*r-step%7), float64(step) / float64(r+3), 1e-9 * float64(r)}
	fout := make([]float64, len(floats))
	if err := mpi.Allreduce(w, floats, fout, mpi.Sum); err != nil {
		return 0, err
	}
	put(fout)
	if err := mpi.Reduce(w, floats, fout, mpi.Sum, root); err != nil {
		return 0, err
	}
	if err := mpi.Reduce(w, ints, iout, mpi.Sum, root); err != nil {
		return 0, err
	}
	if r == root {
		put(fout)
		put(iout)
	}
	return h.Sum64(), nil
}
