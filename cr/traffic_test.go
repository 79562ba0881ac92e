package cr_test

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"gompi/cr"
	"gompi/cr/crtest"
	"gompi/mpi"
)

var long = flag.Bool("long", false, "run the randomized checkpoint/restart test with many more seeds")

// The randomized traffic program. Every step, ranks exchange messages
// drawn from a plan that depends only on the seed and the step:
// point-to-point over four communicators (the world with specific source
// and tag; a Dup received with AnySource and the step's tag; a Split
// received with AnyTag from a specific source; a Dup received with both
// wildcards), blocking and non-blocking, sizes from a few bytes to beyond
// the transports' inline and direct thresholds, to itself too; every
// message sent at step s is received at step s+1, so at each safe point
// the messages of a whole step are in flight. Each step also runs
// collectives (Allreduce, Bcast on the Split, Iallreduce, Barrier). A rank
// checks every message's bytes and its order (non-overtaking per sender,
// communicator and tag; per sender on the AnyTag and wildcard
// communicators), and adds its digest to a sum that does not depend on
// arrival order: the final state must equal the uninterrupted run's and
// what the plan says.

const (
	kindWorld  = iota // world: Recv(src, tag)
	kindAnySrc        // dupA: Recv(AnySource, step)
	kindAnyTag        // split: Recv(src, AnyTag)
	kindWild          // dupC: Recv(AnySource, AnyTag)
	numKinds
)

type planMsg struct {
	Src, Dst, Kind, Tag, Size, Idx int
	Blocking, RecvBlocking         bool
}

// plan is the traffic of one step.
func plan(seed uint64, step, n int) []planMsg {
	rng := rand.New(rand.NewPCG(seed, uint64(step)))
	var out []planMsg
	for src := range n {
		for dst := range n {
			k := rng.IntN(3)
			if src == dst && rng.IntN(4) != 0 {
				k = 0
			}
			for range k {
				m := planMsg{Src: src, Dst: dst, Kind: rng.IntN(numKinds), Idx: len(out),
					Blocking: rng.IntN(3) == 0, RecvBlocking: rng.IntN(3) == 0}
				if m.Kind == kindAnyTag && src%2 != dst%2 {
					m.Kind = kindWorld // the Split joins ranks of equal parity
				}
				switch m.Kind {
				case kindAnySrc:
					m.Tag = step
				default:
					m.Tag = rng.IntN(5)
				}
				switch rng.IntN(10) {
				case 0:
					m.Size = 40<<10 + rng.IntN(1000) // read straight into a posted receive
				case 1:
					m.Size = 70<<10 + rng.IntN(1000) // handed to the peer's writer by Isend
				default:
					m.Size = 16 + rng.IntN(200)
				}
				out = append(out, m)
			}
		}
	}
	return out
}

// payload is the message's bytes: its identity, then bytes from its own
// generator.
func payload(seed uint64, step int, m planMsg) []byte {
	b := make([]byte, m.Size)
	binary.LittleEndian.PutUint32(b[0:], uint32(step))
	binary.LittleEndian.PutUint32(b[4:], uint32(m.Idx))
	binary.LittleEndian.PutUint32(b[8:], uint32(m.Src))
	rng := rand.New(rand.NewPCG(seed^uint64(step)<<20, uint64(m.Idx)))
	for i := 12; i < len(b); i++ {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func digest(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// trafficState is what a rank registers with Protect.
type trafficState struct {
	Step  int
	Sum   uint64
	Count int
	Coll  int64
	Last  map[string]uint64 // order check: the last (step, idx) per key
}

type schedule struct {
	collective map[int]bool // steps where every rank calls cr.Checkpoint
	quiesce    map[int]bool // steps where every rank quiesces and checkpoints
	async      map[int]bool // steps where rank 0 asks for an asynchronous checkpoint
}

func newSchedule(seed uint64, steps int) schedule {
	rng := rand.New(rand.NewPCG(seed, 99))
	s := schedule{collective: map[int]bool{}, quiesce: map[int]bool{}, async: map[int]bool{}}
	for range 1 + rng.IntN(2) {
		s.collective[1+rng.IntN(steps)] = true
	}
	if rng.IntN(2) == 0 {
		if q := 1 + rng.IntN(steps); !s.collective[q] {
			s.quiesce[q] = true
		}
	}
	for range 3 + rng.IntN(2) {
		s.async[1+rng.IntN(steps)] = true
	}
	return s
}

type trafficJob struct {
	seed  uint64
	n     int
	steps int
	sched schedule
	// plain runs without checkpoints (C/R off): the reference run.
	plain bool
	// asks receives rank 0's requests for an asynchronous checkpoint
	// (nil: none are taken).
	asks chan struct{}
	// checkpoints collects the committed snapshots (collective and quiesce).
	mu          sync.Mutex
	checkpoints []cr.Result
}

// rank is the program.
func (tj *trafficJob) rank(out []trafficState) rankFunc {
	return func(c *cr.Coordinator) error {
		p := c.Proc()
		w := p.World()
		r, n := w.Rank(), w.Size()
		// Communicators, made before the first safe point: a restart
		// replays these calls.
		dupA, err := w.Dup()
		if err != nil {
			return err
		}
		tmp, err := w.Dup()
		if err != nil {
			return err
		}
		if err := tmp.Free(); err != nil {
			return err
		}
		split, err := w.Split(r%2, -r)
		if err != nil {
			return err
		}
		dupC, err := w.Dup()
		if err != nil {
			return err
		}
		comms := [numKinds]*mpi.Comm{w, dupA, split, dupC}
		// split orders by key -r: translate world ranks.
		splitRank := func(world int) int {
			for i := range split.Size() {
				if split.WorldRank(i) == world {
					return i
				}
			}
			return -1
		}

		st := trafficState{Step: 1, Last: map[string]uint64{}}
		if err := c.Protect("traffic", &st); err != nil {
			return err
		}
		check := func(kind int, buf []byte, s mpi.Status) error {
			b := buf[:s.Count]
			if len(b) < 12 {
				return errorf(r, "a %d-byte message on communicator kind %d", len(b), kind)
			}
			step := int(binary.LittleEndian.Uint32(b[0:]))
			idx := int(binary.LittleEndian.Uint32(b[4:]))
			pl := plan(tj.seed, step, n)
			if idx >= len(pl) {
				return errorf(r, "message %d of step %d does not exist", idx, step)
			}
			m := pl[idx]
			if m.Dst != r || m.Kind != kind || s.Tag != m.Tag {
				return errorf(r, "message %d of step %d (%+v) arrived on kind %d with tag %d", idx, step, m, kind, s.Tag)
			}
			if want := payload(tj.seed, step, m); !reflect.DeepEqual(b, want) {
				return errorf(r, "message %d of step %d: bytes differ", idx, step)
			}
			key := fmt.Sprintf("k%d/s%d/t%d", kind, m.Src, m.Tag)
			if kind == kindAnyTag || kind == kindWild {
				key = fmt.Sprintf("k%d/s%d", kind, m.Src)
			}
			pos := uint64(step)<<20 | uint64(idx)
			if last, ok := st.Last[key]; ok && pos <= last {
				return errorf(r, "%s: message %d of step %d after %d of step %d: reordered or duplicated", key, idx, step, last&(1<<20-1), last>>20)
			}
			st.Last[key] = pos
			st.Sum += digest(b)
			st.Count++
			return nil
		}
		// recvStep receives what the plan sent to this rank at step,
		// checking messages in the order their receives were posted (the
		// order MPI matches them in).
		recvStep := func(step int) error {
			type posted struct {
				kind int
				buf  []byte
				rq   *mpi.Request
				st   mpi.Status
			}
			var all []*posted
			var reqs []*mpi.Request
			for _, m := range plan(tj.seed, step, n) {
				if m.Dst != r {
					continue
				}
				src, tag := m.Src, m.Tag
				switch m.Kind {
				case kindAnySrc:
					src = mpi.AnySource
				case kindAnyTag:
					src, tag = splitRank(m.Src), mpi.AnyTag
				case kindWild:
					src, tag = mpi.AnySource, mpi.AnyTag
				}
				buf := make([]byte, 72<<10)
				cm := comms[m.Kind]
				pr := &posted{kind: m.Kind, buf: buf}
				all = append(all, pr)
				if m.RecvBlocking {
					s, err := cm.Recv(buf, src, tag)
					if err != nil {
						return err
					}
					pr.st = s
					continue
				}
				rq, err := cm.Irecv(buf, src, tag)
				if err != nil {
					return err
				}
				pr.rq = rq
				reqs = append(reqs, rq)
			}
			if _, err := mpi.Waitall(reqs); err != nil {
				return err
			}
			for _, pr := range all {
				if pr.rq != nil {
					pr.st, _, _ = pr.rq.Test()
				}
				if err := check(pr.kind, pr.buf, pr.st); err != nil {
					return err
				}
			}
			return nil
		}

		for ; st.Step <= tj.steps; st.Step++ {
			step := st.Step
			switch {
			case tj.plain:
				if err := c.SafePoint(); err != nil {
					return err
				}
			case tj.sched.collective[step]:
				res, err := c.Checkpoint(context.Background(), cr.Options{})
				if err != nil {
					return fmt.Errorf("step %d: %w", step, err)
				}
				if r == 0 && !c.IsRestart() {
					tj.mu.Lock()
					tj.checkpoints = append(tj.checkpoints, res)
					tj.mu.Unlock()
				}
			case tj.sched.quiesce[step]:
				if err := c.QuiesceStart(context.Background()); err != nil {
					return fmt.Errorf("step %d: %w", step, err)
				}
				res, err := c.QuiesceCheckpoint(context.Background(), cr.Options{})
				if err != nil {
					return fmt.Errorf("step %d: %w", step, err)
				}
				if err := c.QuiesceEnd(context.Background()); err != nil {
					return fmt.Errorf("step %d: %w", step, err)
				}
				if r == 0 && !c.IsRestart() {
					tj.mu.Lock()
					tj.checkpoints = append(tj.checkpoints, res)
					tj.mu.Unlock()
				}
			default:
				if err := c.SafePoint(); err != nil {
					return err
				}
			}
			if r == 0 && tj.asks != nil && tj.sched.async[step] {
				select {
				case tj.asks <- struct{}{}:
				default:
				}
			}
			var sends []*mpi.Request
			for _, m := range plan(tj.seed, step, n) {
				if m.Src != r {
					continue
				}
				dst := m.Dst
				if m.Kind == kindAnyTag {
					dst = splitRank(m.Dst)
				}
				b := payload(tj.seed, step, m)
				cm := comms[m.Kind]
				if m.Blocking {
					if err := cm.Send(b, dst, m.Tag); err != nil {
						return err
					}
					continue
				}
				rq, err := cm.Isend(b, dst, m.Tag)
				if err != nil {
					return err
				}
				sends = append(sends, rq)
			}
			if step > 1 {
				if err := recvStep(step - 1); err != nil {
					return fmt.Errorf("step %d: %w", step, err)
				}
			}
			if _, err := mpi.Waitall(sends); err != nil {
				return err
			}
			v := []int64{int64(digest(fmt.Appendf(nil, "%d/%d/%d", tj.seed, step, r)) >> 8)}
			if err := mpi.Allreduce(w, v, v, mpi.Sum); err != nil {
				return err
			}
			st.Coll += v[0]
			if step%3 == 0 {
				b := []int64{0}
				if split.Rank() == 0 {
					b[0] = int64(step * (r + 1))
				}
				if err := mpi.BcastT(split, b, 0); err != nil {
					return err
				}
				st.Coll += b[0]
			}
			if step%4 == 1 {
				x := []int64{int64(r * step)}
				rq, err := mpi.Iallreduce(dupA, x, x, mpi.Max)
				if err != nil {
					return err
				}
				if _, err := rq.Wait(); err != nil {
					return err
				}
				st.Coll += x[0]
			}
			if step%5 == 2 {
				if err := dupC.Barrier(); err != nil {
					return err
				}
			}
		}
		if err := recvStep(tj.steps); err != nil {
			return fmt.Errorf("last step: %w", err)
		}
		out[r] = st
		return nil
	}
}

// expected is what the plan says rank r receives in all.
func (tj *trafficJob) expected(r int) (sum uint64, count int) {
	for step := 1; step <= tj.steps; step++ {
		for _, m := range plan(tj.seed, step, tj.n) {
			if m.Dst == r {
				sum += digest(payload(tj.seed, step, m))
				count++
			}
		}
	}
	return sum, count
}

// TestRandomTraffic checkpoints the randomized traffic program at random
// safe points (asynchronous requests landing wherever the ranks are, and
// collective and quiesced checkpoints at random steps), checks that the
// run with checkpoints ends as the uninterrupted one does, then restarts
// from every snapshot (over the other transport) and checks that each
// restarted run ends the same too.
func TestRandomTraffic(t *testing.T) {
	seeds := 24
	if *long {
		seeds = 200
	}
	if testing.Short() {
		seeds = 3
	}
	restarts := 0
	began := time.Now()
	for i := range seeds {
		seed := uint64(1000 + i)
		n := 3 + i%2
		btl, other := "tcp", "uds"
		if i%2 == 1 {
			btl, other = other, btl
		}
		t.Run(fmt.Sprintf("seed=%d/n=%d", seed, n), func(t *testing.T) {
			tj := &trafficJob{seed: seed, n: n, steps: 12, sched: newSchedule(seed, 12), plain: true}
			want := make([]trafficState, n)
			plainCfg := crtest.NewJob(n, t.TempDir(), "plain").Config(btl)
			plainCfg.Settings = nil // C/R off
			if errs, _ := start(plainCfg, tj.rank(want)); len(errs) > 0 {
				t.Fatalf("uninterrupted run: %v", errs)
			}
			tj.plain = false
			for r, st := range want {
				if sum, count := tj.expected(r); st.Sum != sum || st.Count != count {
					t.Fatalf("uninterrupted run, rank %d: %d messages with digest sum %x, the plan says %d, %x", r, st.Count, st.Sum, count, sum)
				}
			}

			j := crtest.NewJob(n, t.TempDir(), "traffic")
			tj.asks = make(chan struct{}, 1)
			stop := make(chan struct{})
			asked := background(func() ([]cr.Result, error) {
				var out []cr.Result
				for {
					select {
					case <-stop:
						return out, nil
					case <-tj.asks:
					}
					res, err := j.Checkpoint(context.Background(), cr.Options{})
					switch {
					case err == nil:
						out = append(out, res)
					case errors.Is(err, crtest.ErrRefused):
						// A rank was finalizing: gompi-checkpoint would
						// say so and fail.
					default:
						// A target beyond the end of the run: a rank
						// finished first and the others were cancelled.
						t.Logf("asynchronous checkpoint: %v", err)
					}
				}
			})
			got := make([]trafficState, n)
			errs, _ := start(j.Config(btl), tj.rank(got))
			close(stop)
			async := must(asked())(t)
			if len(errs) > 0 {
				t.Fatalf("run with checkpoints: %v", errs)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("run with checkpoints ended with %+v, the uninterrupted run with %+v", got, want)
			}
			snaps := append(append([]cr.Result(nil), tj.checkpoints...), async...)
			if len(snaps) == 0 {
				t.Fatal("no checkpoint was taken")
			}
			tj.asks = nil
			for _, res := range snaps {
				nj := must(j.Restart(res.Seq))(t)
				got := make([]trafficState, n)
				if errs, _ := start(nj.Config(other), tj.rank(got)); len(errs) > 0 {
					t.Fatalf("restart from sequence %d: %v", res.Seq, errs)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("restart from sequence %d ended with %+v, the uninterrupted run with %+v", res.Seq, got, want)
				}
				restarts++
			}
		})
	}
	t.Logf("%d seeds, %d checkpoints restarted in %v", seeds, restarts, time.Since(began).Round(time.Millisecond))
	if !testing.Short() && seeds >= 24 && restarts < 100 {
		t.Errorf("only %d checkpoints were restarted; the suite promises at least 100", restarts)
	}
}
