// Package crcptest is the conformance kit every CRCP component must pass.
// It runs the component's modules as the ranks of a small job over a
// simulated channel set (World): messages are handed to a FIFO transport
// per ordered pair of ranks and taken off it into each rank's library, as
// mpi's reader goroutines do; Exchange meets every rank, Drain takes
// messages off the transport. After a checkpoint the kit checks what the
// protocol promises: no message left on the transport (none lost when the
// process is saved), every message in the library exactly once and in
// the order sent, no drain waiting for a message never sent, and the
// totals running on across continue and restart.
package crcptest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"gompi/frameworks/crcp"
	"gompi/frameworks/crs"
)

// Options describe the component under test.
type Options struct {
	// Refuses is set for a component that cannot make the channels
	// consistent (C/R off): FTEvent(StateCheckpoint) must fail with an
	// error matching Refuses and leave the channels untouched. Nil: the
	// component is a protocol and must checkpoint.
	Refuses error
}

// Seeder is the optional interface mpi.Proc.SetCRCP gives the library's
// per-peer totals to (restored ones after a restart).
type Seeder interface {
	SeedCounts(sentTo, recvdFrom []uint64)
}

// Run runs the kit. newModule returns a fresh module (one rank's) on each
// call.
func Run(t *testing.T, newModule func(t *testing.T) crcp.Module, opts Options) {
	t.Helper()
	if opts.Refuses != nil {
		t.Run("refuses-checkpoint", func(t *testing.T) { testRefuses(t, newModule, opts.Refuses) })
		t.Run("resume-states", func(t *testing.T) { testResume(t, newModule) })
		return
	}
	t.Run("drain-in-flight", func(t *testing.T) { testDrain(t, newModule) })
	t.Run("nothing-in-flight", func(t *testing.T) { testQuiet(t, newModule) })
	t.Run("one-way-in-flight", func(t *testing.T) { testOneWay(t, newModule) })
	t.Run("totals-run-on-after-continue", func(t *testing.T) { testContinue(t, newModule) })
	t.Run("restart-from-saved-library", func(t *testing.T) { testRestart(t, newModule) })
	t.Run("concurrent-message-path", func(t *testing.T) { testConcurrent(t, newModule) })
	t.Run("exchange-fails", func(t *testing.T) { testExchangeFails(t, newModule) })
	t.Run("cancelled", func(t *testing.T) { testCancelled(t, newModule) })
	t.Run("resume-states", func(t *testing.T) { testResume(t, newModule) })
}

func newWorld(t *testing.T, n int, newModule func(t *testing.T) crcp.Module) *World {
	mods := make([]crcp.Module, n)
	for i := range mods {
		mods[i] = newModule(t)
		if s, ok := mods[i].(Seeder); ok {
			s.SeedCounts(make([]uint64, n), make([]uint64, n))
		}
	}
	return NewWorld(mods)
}

// traffic sends k messages on every ordered pair of distinct ranks and
// delivers the first deliver of each pair, leaving the rest in flight.
func traffic(t *testing.T, w *World, k, deliver int) {
	t.Helper()
	for round := range k {
		for src := range w.Size() {
			for dst := range w.Size() {
				if src != dst {
					w.Send(src, dst, round)
				}
			}
		}
	}
	for src := range w.Size() {
		for dst := range w.Size() {
			if src != dst {
				if got := w.Deliver(dst, src, deliver); got != min(deliver, k) {
					t.Fatalf("delivered %d of %d messages from rank %d to %d", got, k, src, dst)
				}
			}
		}
	}
}

func checkpoint(t *testing.T, w *World) {
	t.Helper()
	for r, err := range w.FTEventAll(t.Context(), crs.StateCheckpoint) {
		if err != nil {
			t.Fatalf("rank %d: FTEvent(checkpoint): %v", r, err)
		}
	}
	if err := w.Consistent(); err != nil {
		t.Fatalf("after a successful checkpoint: %v", err)
	}
}

func testDrain(t *testing.T, newModule func(t *testing.T) crcp.Module) {
	w := newWorld(t, 3, newModule)
	traffic(t, w, 5, 2)
	checkpoint(t, w)
}

func testQuiet(t *testing.T, newModule func(t *testing.T) crcp.Module) {
	w := newWorld(t, 2, newModule)
	traffic(t, w, 4, 4)
	checkpoint(t, w)
	checkpoint(t, w) // nothing sent since: still nothing to drain
}

// testOneWay: channels used in one direction only, with nothing
// delivered yet: rank 0 only sends (to 1), rank 1 sends only to 2, rank 2
// only receives, and rank 3 takes no part. A rank that has never heard of
// a peer must still drain what that peer sent it, before the checkpoint
// and again after a restart.
func testOneWay(t *testing.T, newModule func(t *testing.T) crcp.Module) {
	w := newWorld(t, 4, newModule)
	oneWay := func(k int) {
		for i := range k {
			w.Send(0, 1, i)
			w.Send(1, 2, i)
		}
	}
	oneWay(5)
	checkpoint(t, w)
	mods := make([]crcp.Module, w.Size())
	for r := range mods {
		mods[r] = newModule(t)
	}
	w = w.Restarted(mods)
	for r, err := range w.FTEventAll(t.Context(), crs.StateRestart) {
		if err != nil {
			t.Fatalf("rank %d: FTEvent(restart): %v", r, err)
		}
	}
	oneWay(3)
	w.Deliver(1, 0, 1)
	checkpoint(t, w)
	if n := w.Delivered(); n != 16 {
		t.Errorf("%d messages in the libraries, want the 16 sent", n)
	}
}

func testContinue(t *testing.T, newModule func(t *testing.T) crcp.Module) {
	w := newWorld(t, 3, newModule)
	traffic(t, w, 3, 1)
	checkpoint(t, w)
	for r, err := range w.FTEventAll(t.Context(), crs.StateContinue) {
		if err != nil {
			t.Fatalf("rank %d: FTEvent(continue): %v", r, err)
		}
	}
	traffic(t, w, 4, 1)
	checkpoint(t, w)
}

// testRestart saves the library (what was delivered; the transport is
// not saved), starts new modules seeded with the saved totals as mpi
// does, and checkpoints again after more traffic.
func testRestart(t *testing.T, newModule func(t *testing.T) crcp.Module) {
	w := newWorld(t, 3, newModule)
	traffic(t, w, 4, 1)
	checkpoint(t, w)
	mods := make([]crcp.Module, w.Size())
	for r := range mods {
		mods[r] = newModule(t)
	}
	w = w.Restarted(mods)
	for r, err := range w.FTEventAll(t.Context(), crs.StateRestart) {
		if err != nil {
			t.Fatalf("rank %d: FTEvent(restart): %v", r, err)
		}
	}
	traffic(t, w, 3, 2)
	checkpoint(t, w)
}

// testConcurrent calls Sent and Received from many goroutines at once, as
// the library's senders and reader goroutines do.
func testConcurrent(t *testing.T, newModule func(t *testing.T) crcp.Module) {
	w := newWorld(t, 4, newModule)
	var wg sync.WaitGroup
	for src := range w.Size() {
		for dst := range w.Size() {
			if src == dst {
				continue
			}
			wg.Go(func() {
				for i := range 200 {
					w.Send(src, dst, i)
					if i%3 == 0 {
						w.Deliver(dst, src, 1)
					}
				}
			})
		}
	}
	wg.Wait()
	checkpoint(t, w)
}

func testExchangeFails(t *testing.T, newModule func(t *testing.T) crcp.Module) {
	w := newWorld(t, 2, newModule)
	traffic(t, w, 2, 1)
	cause := errors.New("crcptest: peer lost")
	w.FailExchange(cause)
	for r, err := range w.FTEventAll(t.Context(), crs.StateCheckpoint) {
		if !errors.Is(err, cause) {
			t.Errorf("rank %d: FTEvent(checkpoint) with a failing exchange: %v, want an error wrapping %q", r, err, cause)
		}
	}
}

func testCancelled(t *testing.T, newModule func(t *testing.T) crcp.Module) {
	w := newWorld(t, 2, newModule)
	traffic(t, w, 2, 1)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	// Only rank 0 takes part: a protocol that waited for its peer
	// instead of for its context would hang here.
	if err := w.FTEvent(ctx, 0, crs.StateCheckpoint); !errors.Is(err, context.Canceled) {
		t.Errorf("FTEvent(checkpoint) with a cancelled context: %v, want context.Canceled", err)
	}
}

func testRefuses(t *testing.T, newModule func(t *testing.T) crcp.Module, refuses error) {
	w := newWorld(t, 2, newModule)
	traffic(t, w, 3, 1)
	before := w.InFlight()
	for r, err := range w.FTEventAll(t.Context(), crs.StateCheckpoint) {
		if !errors.Is(err, refuses) {
			t.Errorf("rank %d: FTEvent(checkpoint): %v, want an error matching %q", r, err, refuses)
		}
	}
	if after := w.InFlight(); after != before || w.Exchanges() != 0 {
		t.Errorf("a refused checkpoint touched the channels: %d messages in flight before, %d after, %d exchanges",
			before, after, w.Exchanges())
	}
}

// testResume: the states after a checkpoint (or instead of one) succeed
// on a quiet job and leave its messages where they are.
func testResume(t *testing.T, newModule func(t *testing.T) crcp.Module) {
	w := newWorld(t, 2, newModule)
	traffic(t, w, 3, 3)
	for _, st := range []crs.State{crs.StateContinue, crs.StateRestart, crs.StateTerm, crs.StateError} {
		for r, err := range w.FTEventAll(t.Context(), st) {
			if err != nil {
				t.Errorf("rank %d: FTEvent(%v): %v", r, st, err)
			}
		}
	}
	if err := w.Consistent(); err != nil {
		t.Error(err)
	}
	if n := w.Delivered(); n != 6 {
		t.Errorf("%d messages in the libraries after the resume states, want the 6 delivered before", n)
	}
}

var errNeverSent = fmt.Errorf("crcptest: drain waits for a message never sent")
