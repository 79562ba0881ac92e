package main

import (
	"bytes"
	"compress/flate"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"gompi/cr/crtest"
	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

func compressedSize(t *testing.T, b []byte) int {
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	w.Close()
	return buf.Len()
}

func TestNoop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // told to stop at once
	for _, kind := range []string{"random", "compressible"} {
		states := make([][]byte, 2)
		outs := make([]string, 2)
		mpitest.Run(t, 2, "uds", func(p *mpi.Proc) error {
			var o bytes.Buffer
			st, err := run(ctx, p, []string{"-mib", "1", "-state", kind}, &o)
			states[p.Rank()], outs[p.Rank()] = st, o.String()
			return err
		})
		for r, st := range states {
			if len(st) != 1<<20 || !strings.Contains(outs[r], "holds 1 MiB of "+kind) {
				t.Fatalf("%s rank %d: %d bytes, output %q", kind, r, len(st), outs[r])
			}
			ratio := float64(compressedSize(t, st)) / float64(len(st))
			if kind == "random" && ratio < 0.95 || kind == "compressible" && ratio > 0.1 {
				t.Errorf("%s state compresses to %.2f of its size", kind, ratio)
			}
		}
		if kind == "random" && bytes.Equal(states[0], states[1]) {
			t.Error("ranks hold the same random state")
		}
	}
}

func TestNoopSecondsAndFlags(t *testing.T) {
	mpitest.Run(t, 1, "", func(p *mpi.Proc) error {
		// -seconds ends the idling on its own (a tiny value keeps the test quick).
		_, err := run(context.Background(), p, []string{"-mib", "0", "-seconds", "0.001"}, &bytes.Buffer{})
		return err
	})
	mpitest.Run(t, 1, "", func(p *mpi.Proc) error {
		if _, err := run(context.Background(), p, []string{"-state", "zeros"}, &bytes.Buffer{}); err == nil {
			t.Error("-state zeros accepted")
		}
		return nil
	})
}

// TestCheckpointRestart checkpoints idle noop ranks the way gompi-checkpoint
// does (each comes to a safe point when asked) and restarts them with the
// state they held.
func TestCheckpointRestart(t *testing.T) {
	j := crtest.NewJob(2, t.TempDir(), "noop")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	started := 0
	ready := make(chan struct{})
	wait := func() func() (snapc.Result, error) {
		done := make(chan struct{})
		var res snapc.Result
		var err error
		go func() {
			defer close(done)
			defer cancel() // then the ranks stop idling
			<-ready
			res, err = j.Checkpoint(context.Background(), crs.Options{})
		}()
		return func() (snapc.Result, error) { <-done; return res, err }
	}()
	states := make([][]byte, 2)
	mpitest.RunWith(t, j.Config("uds"), func(p *mpi.Proc) error {
		out := &announce{w: &bytes.Buffer{}, ready: func() {
			mu.Lock()
			defer mu.Unlock()
			if started++; started == 2 {
				close(ready)
			}
		}}
		st, err := run(ctx, p, []string{"-mib", "1"}, out)
		states[p.Rank()] = st
		return err
	})
	res, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	nj, err := j.Restart(res.Seq)
	if err != nil {
		t.Fatal(err)
	}
	done, stop := context.WithCancel(context.Background())
	stop()
	outs := make([]string, 2)
	mpitest.RunWith(t, nj.Config("tcp"), func(p *mpi.Proc) error {
		var o bytes.Buffer
		// Another -state: the restored state replaces what it makes.
		st, err := run(done, p, []string{"-mib", "1", "-state", "compressible"}, &o)
		if !bytes.Equal(st, states[p.Rank()]) {
			return fmt.Errorf("rank %d restarted with other state", p.Rank())
		}
		outs[p.Rank()] = o.String()
		return err
	})
	for r, o := range outs {
		if !strings.Contains(o, ", restarted\n") {
			t.Errorf("rank %d: %q does not say it restarted", r, o)
		}
	}
}

// announce calls ready once the program printed its first line (it has
// registered its state by then).
type announce struct {
	w     *bytes.Buffer
	once  sync.Once
	ready func()
}

func (a *announce) Write(b []byte) (int, error) {
	a.once.Do(a.ready)
	return a.w.Write(b)
}
