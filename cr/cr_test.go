package cr_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"gompi/cr"
	"gompi/cr/crtest"
	"gompi/frameworks/inc"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// pipeState is the registered state of the pipeline program.
type pipeState struct {
	Step int
	Got  []string
}

// pipeline: at each step rank 0 sends three messages to rank 1, which
// receives them one step later (with a specific source and tag, with
// both wildcards, with AnyTag), so at every safe point three messages are
// in flight; rank 0 decides when to stop (stop, broadcast every step).
// Rank 1's log must read s1.0 s1.1 s1.2 s2.0 ... whatever happens in
// between.
func pipeline(stop func(step int) bool, out []pipeState) rankFunc {
	return func(c *cr.Coordinator) error {
		w := c.Proc().World()
		r := w.Rank()
		st := pipeState{Step: 1}
		if err := c.Protect("state", &st); err != nil {
			return err
		}
		recv := func(step int) error {
			for k, src := range []struct{ src, tag int }{{0, step % 4}, {mpi.AnySource, mpi.AnyTag}, {0, mpi.AnyTag}} {
				buf := make([]byte, 16)
				s, err := w.Recv(buf, src.src, src.tag)
				if err != nil {
					return err
				}
				if s.Tag != step%4 {
					return errorf(r, "step %d receive %d: tag %d, want %d", step, k, s.Tag, step%4)
				}
				st.Got = append(st.Got, string(buf[:s.Count]))
			}
			return nil
		}
		for ; ; st.Step++ {
			if err := c.SafePoint(); err != nil {
				return err
			}
			if r == 0 {
				for k := range 3 {
					if err := w.Send(fmt.Appendf(nil, "s%d.%d", st.Step, k), 1, st.Step%4); err != nil {
						return err
					}
				}
			}
			if r == 1 && st.Step > 1 {
				if err := recv(st.Step - 1); err != nil {
					return err
				}
			}
			flag := []byte{0}
			if r == 0 && stop(st.Step) {
				flag[0] = 1
			}
			if err := w.Bcast(flag, 0); err != nil {
				return err
			}
			if flag[0] == 1 {
				if r == 1 {
					if err := recv(st.Step); err != nil {
						return err
					}
				}
				break
			}
		}
		out[r] = st
		return nil
	}
}

func after(steps int) func(int) bool { return func(s int) bool { return s >= steps } }

func wantPipeline(steps int) []string {
	var want []string
	for s := 1; s <= steps; s++ {
		for k := range 3 {
			want = append(want, fmt.Sprintf("s%d.%d", s, k))
		}
	}
	return want
}

// TestInFlightContinueAndRestart checkpoints the pipeline with messages in
// flight: they are drained into the library, delivered once and in order
// after the checkpoint, and again after a restart from it.
func TestInFlightContinueAndRestart(t *testing.T) {
	const steps = 6
	want := wantPipeline(steps)
	for _, target := range []uint64{1, 3, steps} {
		t.Run(fmt.Sprintf("safepoint=%d", target), func(t *testing.T) {
			j := crtest.NewJob(2, t.TempDir(), "pipe")
			out := make([]pipeState, 2)
			wait := checkpointAt(j, target, cr.Options{})
			run(t, j, pipeline(after(steps), out))
			res := must(wait())(t)
			if res.Seq != 0 || res.Ref != j.Ref().Name {
				t.Fatalf("result %+v", res)
			}
			if !reflect.DeepEqual(out[1].Got, want) {
				t.Fatalf("after continue rank 1 got %v, want %v", out[1].Got, want)
			}
			meta := must(snapshot.ReadLocal(j.Ref().LocalPath(0, 1)))(t)
			if meta.CRS != "self" || meta.CRSMeta["cr_safepoint"] != fmt.Sprint(target) {
				t.Fatalf("snapshot_meta %+v", meta)
			}
			nj := must(j.Restart(0))(t)
			out2 := make([]pipeState, 2)
			run(t, nj, pipeline(after(steps), out2))
			if !reflect.DeepEqual(out2[1].Got, want) {
				t.Fatalf("after restart rank 1 got %v, want %v", out2[1].Got, want)
			}
		})
	}
}

// TestAsyncCheckpoint takes checkpoints the way gompi-checkpoint does,
// while the job runs, and restarts from each.
func TestAsyncCheckpoint(t *testing.T) {
	j := crtest.NewJob(2, t.TempDir(), "async")
	out := make([]pipeState, 2)
	var done atomic.Bool
	ready := make(chan struct{})
	wait := background(func() ([]cr.Result, error) {
		defer done.Store(true) // the job runs until the checkpoints are taken
		<-ready
		var results []cr.Result
		for range 3 {
			res, err := j.Checkpoint(context.Background(), cr.Options{})
			if err != nil {
				return results, err
			}
			results = append(results, res)
		}
		return results, nil
	})
	var final int
	run(t, j, attached(2, ready, pipeline(func(s int) bool {
		if done.Load() {
			final = s
			return true
		}
		return false
	}, out)))
	results := must(wait())(t)
	if want := wantPipeline(final); !reflect.DeepEqual(out[1].Got, want) {
		t.Fatalf("rank 1 got %v, want %v", out[1].Got, want)
	}
	for _, res := range results {
		nj := must(j.Restart(res.Seq))(t)
		out2 := make([]pipeState, 2)
		run(t, nj, pipeline(after(final), out2))
		if want := wantPipeline(final); !reflect.DeepEqual(out2[1].Got, want) {
			t.Fatalf("restart from %d: rank 1 got %v, want %v", res.Seq, out2[1].Got, want)
		}
	}
}

// TestCollectiveCheckpoint: cr.Checkpoint called by every rank at the same
// point returns the committed snapshot, and on a restart from it, the
// snapshot restarted from.
func TestCollectiveCheckpoint(t *testing.T) {
	j := crtest.NewJob(3, t.TempDir(), "coll")
	prog := func(out []string) rankFunc {
		return func(c *cr.Coordinator) error {
			w := c.Proc().World()
			x := 0
			if err := c.Protect("x", &x); err != nil {
				return err
			}
			for ; x < 5; x++ {
				if x == 2 {
					res, err := c.Checkpoint(context.Background(), cr.Options{})
					if err != nil {
						return err
					}
					out[w.Rank()] = fmt.Sprintf("%s/%d restart=%v", res.Ref, res.Seq, c.IsRestart())
				} else if err := c.SafePoint(); err != nil {
					return err
				}
				v := []int64{int64(x)}
				if err := mpi.Allreduce(w, v, v, mpi.Sum); err != nil {
					return err
				}
				if v[0] != int64(3*x) {
					return errorf(w.Rank(), "allreduce %d, want %d", v[0], 3*x)
				}
			}
			return nil
		}
	}
	out := make([]string, 3)
	run(t, j, prog(out))
	want := j.Ref().Name + "/0 restart=false"
	for r, s := range out {
		if s != want {
			t.Fatalf("rank %d: checkpoint gave %q, want %q", r, s, want)
		}
	}
	nj := must(j.Restart(0))(t)
	run(t, nj, prog(out))
	want = j.Ref().Name + "/0 restart=true"
	for r, s := range out {
		if s != want {
			t.Fatalf("restarted rank %d: checkpoint gave %q, want %q", r, s, want)
		}
	}
}

// TestCancelWhenRankCannotReach: rank 1 ends its loop before the target;
// it answers with an error when it finalizes, the coordinator cancels, and
// rank 0, waiting for its peers inside the checkpoint, runs on unsaved.
func TestCancelWhenRankCannotReach(t *testing.T) {
	j := crtest.NewJob(2, t.TempDir(), "cancel")
	wait := checkpointAt(j, 5, cr.Options{})
	var events []string
	var mu sync.Mutex
	inside := make(chan struct{})
	run(t, j, func(c *cr.Coordinator) error {
		r := c.Proc().Rank()
		if r == 0 {
			if _, err := c.RegisterINC("watch", func(_ context.Context, ev inc.Event, st inc.AppState) error {
				mu.Lock()
				events = append(events, fmt.Sprintf("%v/%v", ev, st))
				mu.Unlock()
				if ev == inc.PreCRSPreMPI {
					close(inside)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		n := 10
		if r == 1 {
			n = 4 // never reaches safe point 5
		}
		for range n {
			if err := c.SafePoint(); err != nil {
				return err
			}
		}
		if r == 1 {
			<-inside // finalize once rank 0 waits inside the checkpoint
		}
		return nil
	})
	_, err := wait()
	if err == nil || !strings.Contains(err.Error(), "rank 1 finished before safe point 5") {
		t.Fatalf("checkpoint: %v, want rank 1's refusal", err)
	}
	want := []string{"PRE_CRS_PRE_MPI/PREPARE", "POST_CRS_PRE_MPI/ERROR", "POST_CRS_POST_MPI/ERROR"}
	if !reflect.DeepEqual(events, want) {
		t.Fatalf("rank 0 INC events %v, want %v", events, want)
	}
	if _, err := snapshot.ReadGlobal(j.Ref()); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Restart(0); !errors.Is(err, snapshot.ErrNotCommitted) {
		t.Fatalf("restart from the cancelled sequence: %v, want ErrNotCommitted", err)
	}
}

// TestCRSNoneRefuses: without C/R (crs=none, crcp=none) every rank says
// why it cannot be saved, and the checkpoint fails with those reasons.
func TestCRSNoneRefuses(t *testing.T) {
	j := crtest.NewJob(2, t.TempDir(), "none")
	cfg := j.Config("tcp")
	cfg.Settings = nil // ft_cr_enabled = 0
	ready := make(chan struct{}, 2)
	var ckErr error
	errs, _ := start(cfg, func(c *cr.Coordinator) error {
		ready <- struct{}{}
		if c.Proc().Rank() == 0 {
			<-ready
			<-ready
			_, ckErr = j.Checkpoint(context.Background(), cr.Options{})
		}
		for range 3 {
			if err := c.SafePoint(); err != nil {
				return err
			}
		}
		return c.Proc().World().Barrier()
	})
	for _, err := range errs {
		t.Error(err)
	}
	if !errors.Is(ckErr, crtest.ErrRefused) || !strings.Contains(ckErr.Error(), "crs=none") || !strings.Contains(ckErr.Error(), "-am ft-enable-cr") {
		t.Fatalf("checkpoint without C/R: %v", ckErr)
	}
}

// TestNoSafePoints: a program that never uses package cr is refused by
// the library itself, for every rank, with the reason.
func TestNoSafePoints(t *testing.T) {
	j := crtest.NewJob(2, t.TempDir(), "plain")
	var ckErr error
	cfg := j.Config("tcp")
	errs := mpitest.Start(cfg, func(p *mpi.Proc) error {
		if p.Rank() == 0 {
			_, ckErr = j.Checkpoint(context.Background(), cr.Options{})
		}
		return p.World().Barrier()
	})
	for _, err := range errs {
		t.Error(err)
	}
	if !errors.Is(ckErr, crtest.ErrRefused) || strings.Count(ckErr.Error(), "the program has no safe points (crs=self needs cr.SafePoint or cr.Checkpoint)") != 2 {
		t.Fatalf("checkpoint of a program without cr: %v", ckErr)
	}
}

// TestTerm: a checkpoint with --term ends every rank after saving, and
// the job restarts from it.
func TestTerm(t *testing.T) {
	const steps = 6
	j := crtest.NewJob(2, t.TempDir(), "term")
	out := make([]pipeState, 2)
	wait := checkpointAt(j, 4, cr.Options{Term: true})
	errs, term := start(j.Config("uds"), pipeline(after(steps), out))
	if len(errs) != 0 || term != 2 {
		t.Fatalf("%d ranks terminated, errors %v", term, errs)
	}
	if out[0].Step != 0 || out[1].Step != 0 {
		t.Fatalf("ranks ran on after the checkpoint with --term: %+v", out)
	}
	must(wait())(t)
	nj := must(j.Restart(-1))(t)
	run(t, nj, pipeline(after(steps), out))
	if want := wantPipeline(steps); !reflect.DeepEqual(out[1].Got, want) {
		t.Fatalf("after restart rank 1 got %v, want %v", out[1].Got, want)
	}
}

// TestStopRefused: crs=self cannot stop a process.
func TestStopRefused(t *testing.T) {
	j := crtest.NewJob(2, t.TempDir(), "stop")
	wait := checkpointAt(j, 2, cr.Options{Stop: true})
	run(t, j, pipeline(after(3), make([]pipeState, 2)))
	if _, err := wait(); err == nil || !strings.Contains(err.Error(), "--stop") {
		t.Fatalf("checkpoint with stop: %v", err)
	}
}

// TestCorruptLibraryState: a restart refuses a library.state whose bytes
// do not match snapshot_meta, naming the file.
func TestCorruptLibraryState(t *testing.T) {
	j := crtest.NewJob(2, t.TempDir(), "corrupt")
	wait := checkpointAt(j, 2, cr.Options{})
	run(t, j, pipeline(after(3), make([]pipeState, 2)))
	must(wait())(t)
	nj := must(j.Restart(0))(t) // verified now; damaged after
	path := filepath.Join(j.Ref().LocalPath(0, 1), snapc.LibraryStateFile)
	b := must(os.ReadFile(path))(t)
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	errs, _ := start(nj.Config("tcp"), pipeline(after(3), make([]pipeState, 2)))
	var found bool
	for _, err := range errs {
		if errors.Is(err, snapshot.ErrCorrupt) && strings.Contains(err.Error(), path) {
			found = true
		}
	}
	if !found {
		t.Fatalf("restart from a damaged %s: %v", path, errs)
	}
}

// TestSavedAgainAtCollectivePoint: an asynchronous checkpoint takes the
// point where the ranks wait in cr.Checkpoint; their own request, run
// after it by a coordinator that does not merge the two, saves them there
// again. Both snapshots restart to the same end.
func TestSavedAgainAtCollectivePoint(t *testing.T) {
	const steps, at = 6, 3
	prog := func(sums []int64, seqs []int) rankFunc {
		return func(c *cr.Coordinator) error {
			w := c.Proc().World()
			r, n := w.Rank(), w.Size()
			st := struct {
				Step int
				Sum  int64
			}{Step: 1}
			if err := c.Protect("st", &st); err != nil {
				return err
			}
			recv := func() error {
				v := []int64{0}
				if _, err := mpi.RecvT(w, v, (r-1+n)%n, 0); err != nil {
					return err
				}
				st.Sum += v[0]
				return nil
			}
			for ; st.Step <= steps; st.Step++ {
				if st.Step == at {
					res, err := c.Checkpoint(context.Background(), cr.Options{})
					if err != nil {
						return err
					}
					seqs[r] = res.Seq
				} else if err := c.SafePoint(); err != nil {
					return err
				}
				if err := mpi.SendT(w, []int64{int64(100*st.Step + r)}, (r+1)%n, 0); err != nil {
					return err
				}
				if st.Step > 1 {
					if err := recv(); err != nil {
						return err
					}
				}
			}
			if err := recv(); err != nil {
				return err
			}
			sums[r] = st.Sum
			return nil
		}
	}
	j := crtest.NewJob(3, t.TempDir(), "again")
	j.NoJoin = true
	wait := checkpointAt(j, at, cr.Options{})
	want, seqs := make([]int64, 3), make([]int, 3)
	run(t, j, prog(want, seqs))
	if res := must(wait())(t); res.Seq != 0 {
		t.Fatalf("the asynchronous checkpoint is sequence %d", res.Seq)
	}
	if !reflect.DeepEqual(seqs, []int{1, 1, 1}) {
		t.Fatalf("cr.Checkpoint returned sequences %v, want 1 (saved again)", seqs)
	}
	for seq := range 2 {
		got := make([]int64, 3)
		run(t, must(j.Restart(seq))(t), prog(got, make([]int, 3)))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("restart from %d: sums %v, want %v", seq, got, want)
		}
	}
}

// ringProg passes a message around the ring at every step (one message in
// flight at each safe point); at step at it calls point instead of
// SafePoint. sums gets each rank's total.
func ringProg(steps, at int, point func(c *cr.Coordinator) error, sums []int64) rankFunc {
	return func(c *cr.Coordinator) error {
		w := c.Proc().World()
		r, n := w.Rank(), w.Size()
		st := struct {
			Step int
			Sum  int64
		}{Step: 1}
		if err := c.Protect("st", &st); err != nil {
			return err
		}
		recv := func() error {
			v := []int64{0}
			if _, err := mpi.RecvT(w, v, (r-1+n)%n, 0); err != nil {
				return err
			}
			st.Sum += v[0]
			return nil
		}
		for ; st.Step <= steps; st.Step++ {
			if st.Step == at && point != nil {
				if err := point(c); err != nil {
					return err
				}
			} else if err := c.SafePoint(); err != nil {
				return err
			}
			if err := mpi.SendT(w, []int64{int64(100*st.Step + r)}, (r+1)%n, 0); err != nil {
				return err
			}
			if st.Step > 1 {
				if err := recv(); err != nil {
					return err
				}
			}
		}
		if err := recv(); err != nil {
			return err
		}
		sums[r] = st.Sum
		return nil
	}
}

// TestCheckpointWhileQuiesced: an asynchronous checkpoint asked for while
// the job is quiesced (the program does not call QuiesceCheckpoint) is
// taken at the quiesced point, when the ranks end the quiesce.
func TestCheckpointWhileQuiesced(t *testing.T) {
	const steps, at = 6, 3
	want := make([]int64, 3)
	run(t, crtest.NewJob(3, t.TempDir(), "plain"), ringProg(steps, 0, nil, want))

	j := crtest.NewJob(3, t.TempDir(), "quiesced")
	quiesced := make(chan struct{})
	var mu sync.Mutex
	count := 0
	wait := background(func() (cr.Result, error) {
		<-quiesced
		return j.Checkpoint(context.Background(), cr.Options{})
	})
	got := make([]int64, 3)
	run(t, j, ringProg(steps, at, func(c *cr.Coordinator) error {
		ctx := context.Background()
		if err := c.QuiesceStart(ctx); err != nil {
			return err
		}
		if err := c.SafePoint(); err == nil {
			return errors.New("a safe point while quiesced")
		}
		mu.Lock()
		if count++; count == 3 {
			close(quiesced)
		}
		mu.Unlock()
		<-c.Requested() // the query arrived
		return c.QuiesceEnd(ctx)
	}, got))
	res := must(wait())(t)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sums %v, want %v", got, want)
	}
	meta := must(snapshot.ReadLocal(j.Ref().LocalPath(res.Seq, 0)))(t)
	if meta.CRSMeta["cr_safepoint"] != fmt.Sprint(at) {
		t.Fatalf("saved at safe point %s, want the quiesced point %d", meta.CRSMeta["cr_safepoint"], at)
	}
	got = make([]int64, 3)
	run(t, must(j.Restart(res.Seq))(t), ringProg(steps, 0, nil, got))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("restarted sums %v, want %v", got, want)
	}
}
