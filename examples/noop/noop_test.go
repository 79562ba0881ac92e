package main

import (
	"bytes"
	"compress/flate"
	"context"
	"strings"
	"testing"

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
