package main

import (
	"bytes"
	"strings"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

func TestBenchTables(t *testing.T) {
	var out bytes.Buffer
	var rows []Row
	mpitest.Run(t, 3, "tcp", func(p *mpi.Proc) error {
		var o bytes.Buffer
		got, err := run(p, []string{"-min", "1", "-max", "128k", "-iters", "20", "-warmup", "2", "-window", "4"}, &o)
		if p.Rank() == 0 {
			out, rows = o, got
		}
		return err
	})
	// 1 B..128 KiB is 18 sizes for latency and bandwidth, 15 from 8 B for allreduce.
	if len(rows) != 18+18+15 {
		t.Fatalf("%d rows, want 51:\n%s", len(rows), out.String())
	}
	for _, r := range rows {
		if r.Transport != "tcp" || r.Ranks != 3 || (r.LatencyUS <= 0 && r.MBps <= 0) {
			t.Fatalf("row %+v", r)
		}
	}
	for _, h := range []string{"# gompi latency, 3 ranks, transport tcp", "# gompi bandwidth", "# gompi allreduce"} {
		if !strings.Contains(out.String(), h) {
			t.Errorf("output lacks %q:\n%s", h, out.String())
		}
	}
}

func TestBenchSingletonAndFlags(t *testing.T) {
	mpitest.Run(t, 1, "", func(p *mpi.Proc) error {
		var o bytes.Buffer
		rows, err := run(p, []string{"-max", "64", "-iters", "5", "-json"}, &o)
		if err != nil {
			return err
		}
		if len(rows) != 4 || !strings.Contains(o.String(), "latency needs 2 ranks") || !strings.Contains(o.String(), `"test":"allreduce"`) {
			t.Errorf("singleton: %d rows, output %q", len(rows), o.String())
		}
		for _, args := range [][]string{{"-min", "0"}, {"-max", "x"}, {"-tests", "pingpong"}} {
			if _, err := run(p, args, &bytes.Buffer{}); err == nil {
				t.Errorf("%v accepted", args)
			}
		}
		return nil
	})
}
