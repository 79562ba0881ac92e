package mpi_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"gompi/mca"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// The figures of Agree and Shrink (scripts/bench-ulfm.sh runs them; not
// part of CI, no timed assertion): latency next to an Allreduce of one
// int, in one run, in-process and in jobs of separate processes, and the
// messages and rounds each took, counted by the library.

const (
	figSamples = 7  // medians of this many samples
	figBatch   = 10 // calls per sample, back to back
)

// figOps times each operation on w: figSamples samples of figBatch calls
// after a barrier, at rank 0; it returns the median per call, and the
// messages (summed over the ranks) and rounds (the largest) of one Agree
// and one Shrink.
func figOps(p *mpi.Proc, w *mpi.Comm) (string, error) {
	ops := []struct {
		name string
		run  func() error
	}{
		{"allreduce", func() error { x := []int64{1}; return mpi.Allreduce(w, x, x, mpi.Sum) }},
		{"agree", func() error { _, err := w.Agree(1); return err }},
		{"shrink", func() error {
			nc, err := w.Shrink()
			if err == nil {
				err = nc.Free()
			}
			return err
		}},
	}
	var line []string
	var base float64
	for _, op := range ops {
		var samples []float64
		sent0, _ := mpi.AgreeCounts(p)
		for range figSamples {
			if err := w.Barrier(); err != nil {
				return "", err
			}
			t0 := time.Now()
			for range figBatch {
				if err := op.run(); err != nil {
					return "", fmt.Errorf("%s: %w", op.name, err)
				}
			}
			samples = append(samples, float64(time.Since(t0).Microseconds())/figBatch)
		}
		sent1, rounds := mpi.AgreeCounts(p)
		counts := []int64{(sent1 - sent0) / (figSamples * figBatch)}
		if err := mpi.Allreduce(w, counts, counts, mpi.Sum); err != nil {
			return "", err
		}
		r := []int64{rounds}
		if err := mpi.Allreduce(w, r, r, mpi.Max); err != nil {
			return "", err
		}
		slices.Sort(samples)
		med := samples[len(samples)/2]
		if op.name == "allreduce" {
			base = med
			line = append(line, fmt.Sprintf("allreduce %.1f us", med))
			continue
		}
		line = append(line, fmt.Sprintf("%s %.1f us (%.2fx, %d msgs, %d rounds)", op.name, med, med/base, counts[0], r[0]))
	}
	return strings.Join(line, "  "), nil
}

func TestULFMFigures(t *testing.T) {
	if os.Getenv("GOMPI_ULFM_FIGURES") == "" {
		t.Skip("figures: GOMPI_ULFM_FIGURES=1 (scripts/bench-ulfm.sh)")
	}
	for _, n := range []int{4, 8, 16, 32, 64} {
		var line string
		mpitest.Run(t, n, "uds", func(p *mpi.Proc) error {
			l, err := figOps(p, p.World())
			if p.World().Rank() == 0 {
				line = l
			}
			return err
		})
		fmt.Printf("in-process n=%-3d %s\n", n, line)
	}
	for _, n := range []int{4, 8, 16} {
		outs, err := mpitest.Spawn(context.Background(), mpitest.SpawnConfig{
			N: n, Rank: "ulfmfig", Settings: []mca.Setting{{Name: "btl", Value: "uds"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("processes  n=%-3d %s\n", n, strings.Join(outs[0], " "))
	}
}

// rankULFMFigures is a rank of TestULFMFigures' jobs of processes.
func rankULFMFigures(boot mpi.Bootstrap) error {
	p, err := mpi.InitWith(context.Background(), boot)
	if err != nil {
		return err
	}
	line, err := figOps(p, p.World())
	if err != nil {
		return err
	}
	if p.World().Rank() == 0 {
		mpitest.Report("%s", line)
	}
	return p.Finalize()
}
