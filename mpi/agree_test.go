package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"

	"gompi/mca"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// flagOf is rank r's flag: every bit but bit r, so the agreed AND shows
// whose flags it holds.
func flagOf(r int) int { return ^(1 << r) }

// TestAgreeFailureFree: the AND of every rank's flag and no error, at
// every size, by Agree and Iagree, several times on one communicator.
func TestAgreeFailureFree(t *testing.T) {
	for n := 1; n <= 16; n++ {
		want := -1
		for r := range n {
			want &= flagOf(r)
		}
		mpitest.Run(t, n, "uds", func(p *mpi.Proc) error {
			w := p.World()
			for i := range 3 {
				got, err := w.Agree(flagOf(w.Rank()))
				if err != nil || got != want {
					return fmt.Errorf("agree %d: %#x, %v; want %#x", i, got, err, want)
				}
			}
			flag := flagOf(w.Rank())
			req, err := w.Iagree(&flag)
			if err != nil {
				return err
			}
			if _, err := req.Wait(); err != nil || flag != want {
				return fmt.Errorf("iagree: %#x, %v; want %#x", flag, err, want)
			}
			return nil
		})
	}
}

// outcome is what one rank got from an agreement.
type outcome struct {
	val    int
	failed bool // the error wraps ErrProcFailed
	comm   shrunk
}

// outcomes collects outcomes by world rank.
type outcomes struct {
	mu  sync.Mutex
	got map[int]outcome
}

func (o *outcomes) put(r int, v outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.got == nil {
		o.got = map[int]outcome{}
	}
	o.got[r] = v
}

// killPlan is where a test kills its victim: before its call, at its k-th
// agreement send, or after its call returned.
type killPlan struct {
	victim int
	when   string // "before", "during", "after"
	k      int
}

// runKilled runs one agreement (Agree, or Shrink when shrink) on the
// world of n in-process ranks with plan's victim killed, and checks that
// every rank that returned a result (survivors, and the victim when it
// decided before it died) got the same one, that it holds every
// survivor's flag, and that survivors' communicators match.
func runKilled(t *testing.T, n int, plan killPlan, shrink bool) {
	t.Helper()
	var res outcomes
	hold := holdAll(n)
	errs := mpitest.Start(mpitest.Config{N: n, BTL: "uds", AllowFailures: true}, func(p *mpi.Proc) error {
		w := p.World()
		me := w.Rank() == plan.victim
		if me {
			switch plan.when {
			case "before":
				mpi.Kill(p)
				hold()
				return nil
			case "during":
				sends := 0
				mpi.OnAgreeSend(p, func() {
					if sends++; sends == plan.k {
						mpi.Kill(p)
					}
				})
			}
		}
		if !me {
			// A victim the agreement left in may have died without a
			// connection to this rank: the runtime would report it.
			defer func() {
				hold()
				p.MarkFailed(plan.victim, errors.New("the test killed it"))
			}()
		}
		var o outcome
		var err error
		if shrink {
			var nc *mpi.Comm
			if nc, err = w.Shrink(); err == nil {
				o.comm = commOf(nc)
			}
		} else {
			o.val, err = w.Agree(flagOf(w.Rank()))
		}
		if err != nil && !errors.Is(err, mpi.ErrProcFailed) && !me {
			return err
		}
		o.failed = err != nil
		if me {
			// A decision it returned counts (uniformity holds for it
			// too); the error of its own death does not.
			if _, killed := mpi.RankOf(err); !killed && !errors.Is(err, mpi.ErrStopped) {
				res.put(w.Rank(), o)
			}
			mpi.Kill(p)
			hold()
			return nil
		}
		res.put(w.Rank(), o)
		return nil
	})
	for _, err := range errs {
		t.Errorf("%+v: %v", plan, err)
	}
	var first *outcome
	for r := range n {
		o, ok := res.got[r]
		if !ok {
			if r != plan.victim {
				t.Fatalf("%+v: survivor %d has no result", plan, r)
			}
			continue
		}
		if !shrink && o.val&(1<<r) != 0 {
			t.Errorf("%+v: rank %d's flag not in %#x", plan, r, o.val)
		}
		if first == nil {
			first = &o
			continue
		}
		if o.val != first.val || o.failed != first.failed || o.comm.handle != first.comm.handle || !slices.Equal(o.comm.members, first.comm.members) {
			t.Fatalf("%+v: ranks disagree: %v", plan, res.got)
		}
	}
	if plan.when == "before" && !shrink && !first.failed {
		t.Errorf("%+v: a failure nobody acknowledged raised no error: %v", plan, res.got)
	}
}

func commOf(c *mpi.Comm) shrunk {
	s := shrunk{handle: c.Handle()}
	for i := range c.Size() {
		s.members = append(s.members, c.WorldRank(i))
	}
	return s
}

// TestAgreeKilled kills a rank before, during (at a random send of the
// protocol) and after Agree and Shrink, over 240 random kill points.
func TestAgreeKilled(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 1))
	whens := []string{"before", "during", "during", "during", "after"}
	for i := range 240 {
		n := 4 + rng.IntN(5)
		plan := killPlan{victim: rng.IntN(n), when: whens[rng.IntN(len(whens))], k: 1 + rng.IntN(6)}
		runKilled(t, n, plan, i%3 == 2)
		if t.Failed() {
			return
		}
	}
}

// TestAgreeAcked: a failure every survivor acknowledged raises no error;
// one acknowledged by some only raises it everywhere.
func TestAgreeAcked(t *testing.T) {
	for _, all := range []bool{true, false} {
		const n, dead = 5, 3
		var res outcomes
		hold := holdAll(n)
		errs := mpitest.Start(mpitest.Config{N: n, BTL: "uds", AllowFailures: true}, func(p *mpi.Proc) error {
			w := p.World()
			if w.Rank() == dead {
				mpi.Kill(p)
				hold()
				return nil
			}
			hold()
			p.MarkFailed(dead, errors.New("the test says it died"))
			if all || w.Rank()%2 == 0 {
				if _, err := w.AckFailed(1); err != nil {
					return err
				}
			}
			v, err := w.Agree(flagOf(w.Rank()))
			if err != nil && !errors.Is(err, mpi.ErrProcFailed) {
				return err
			}
			res.put(w.Rank(), outcome{val: v, failed: err != nil})
			return nil
		})
		for _, err := range errs {
			t.Fatal(err)
		}
		want := -1
		for r := range n {
			if r != dead {
				want &= flagOf(r)
			}
		}
		for r, o := range res.got {
			if o.val != want || o.failed == all {
				t.Errorf("all acked %v: rank %d got %#x, error %v; want %#x, error %v", all, r, o.val, o.failed, want, !all)
			}
		}
	}
}

// TestAgreeKilledProcesses runs Agree in jobs of separate processes and
// kills one with SIGKILL before its call, at a random send of the
// protocol, or after it returned: every survivor reports the same value
// and the same error-or-not.
func TestAgreeKilledProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns 24 jobs")
	}
	rng := rand.New(rand.NewPCG(23, 3))
	for i := range 24 {
		n := 4 + rng.IntN(3)
		victim, k := rng.IntN(n), rng.IntN(8)-1 // -1: after the call, 0: before
		outs, err := mpitest.Spawn(context.Background(), mpitest.SpawnConfig{
			N: n, Rank: "agreekill", Settings: []mca.Setting{{Name: "btl", Value: "uds"}},
			Env: []string{fmt.Sprintf("GOMPI_AGREE_PLAN=%d,%d", victim, k)},
		})
		var first string
		for r, out := range outs {
			if r == victim && len(out) == 0 {
				continue
			}
			if len(out) != 1 {
				t.Fatalf("run %d (victim %d, k %d): rank %d reported %q; job: %v", i, victim, k, r, out, err)
			}
			if first == "" {
				first = out[0]
			} else if out[0] != first {
				t.Fatalf("run %d (victim %d, k %d): ranks disagree: %q", i, victim, k, outs)
			}
		}
		t.Logf("run %d: %d ranks, victim %d at send %d: %s", i, n, victim, k, first)
	}
}

// rankAgreeKill is a rank of TestAgreeKilledProcesses: GOMPI_AGREE_PLAN
// is "victim,k"; the victim kills itself at its k-th agreement send (0:
// before the call, -1: after it).
func rankAgreeKill(boot mpi.Bootstrap) error {
	var victim, k int
	if _, err := fmt.Sscanf(os.Getenv("GOMPI_AGREE_PLAN"), "%d,%d", &victim, &k); err != nil {
		return err
	}
	p, err := mpi.InitWith(context.Background(), boot)
	if err != nil {
		return err
	}
	w := p.World()
	die := func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	if w.Rank() == victim {
		switch {
		case k == 0:
			die()
		case k > 0:
			sends := 0
			mpi.OnAgreeSend(p, func() {
				if sends++; sends == k {
					die()
				}
			})
		}
	}
	v, err := w.Agree(flagOf(w.Rank()))
	if err != nil && !errors.Is(err, mpi.ErrProcFailed) {
		return err
	}
	mpitest.Report("agreed %#x, failure reported %v", v, err != nil)
	if w.Rank() == victim {
		die()
	}
	// No Finalize: its barrier would wait for a victim the agreement left
	// in and nobody reported failed (no runtime here). The others may
	// still need this rank's answer: an exit looks like a failure to them,
	// which the agreement tolerates.
	return nil
}

// TestIshrink: a non-blocking Shrink after a failure gives every survivor
// the same communicator of the survivors.
func TestIshrink(t *testing.T) {
	const n, dead = 5, 2
	var res results
	hold := holdAll(n)
	errs := mpitest.Start(mpitest.Config{N: n, BTL: "uds", AllowFailures: true}, func(p *mpi.Proc) error {
		w := p.World()
		if w.Rank() == dead {
			mpi.Kill(p)
			hold()
			return nil
		}
		hold()
		var nc *mpi.Comm
		req, err := w.Ishrink(&nc)
		if err != nil {
			return err
		}
		if _, err := req.Wait(); err != nil {
			return err
		}
		res.put(w.Rank(), nc)
		return nil
	})
	for _, err := range errs {
		t.Fatal(err)
	}
	if got := res.agreed(t, []int{0, 1, 3, 4}); !slices.Equal(got.members, []int{0, 1, 3, 4}) {
		t.Errorf("members %v", got.members)
	}
}

// TestAgreeRevoked: Agree and Shrink work on a revoked communicator,
// whoever revoked it.
func TestAgreeRevoked(t *testing.T) {
	const n = 4
	mpitest.Run(t, n, "uds", func(p *mpi.Proc) error {
		w := p.World()
		if w.Rank() == 1 {
			if err := w.Revoke(); err != nil {
				return err
			}
		}
		if _, err := w.Recv(nil, mpi.AnySource, 5); !errors.Is(err, mpi.ErrRevoked) && w.Rank() != 1 {
			return fmt.Errorf("receive on the revoked world: %v, want ErrRevoked", err)
		}
		want := -1
		for r := range n {
			want &= flagOf(r)
		}
		if v, err := w.Agree(flagOf(w.Rank())); err != nil || v != want {
			return fmt.Errorf("agree on the revoked world: %#x, %v; want %#x", v, err, want)
		}
		nc, err := w.Shrink()
		if err != nil {
			return fmt.Errorf("shrink of the revoked world: %w", err)
		}
		if nc.Size() != n || nc.IsRevoked() {
			return fmt.Errorf("shrunk: %d ranks, revoked %v", nc.Size(), nc.IsRevoked())
		}
		return nil
	})
}
