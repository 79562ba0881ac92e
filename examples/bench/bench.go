package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"gompi/mca"
	"gompi/mpi"
	"gompi/mpi/mpibench"
)

type options struct {
	min, max      int64
	iters, warmup int
	window        int
	tests         []string
	json          bool
}

// Row is one measurement.
type Row struct {
	Test      string  `json:"test"`
	Size      int     `json:"size"`
	Ranks     int     `json:"ranks"`
	Transport string  `json:"transport"`
	Iters     int     `json:"iters"`
	LatencyUS float64 `json:"latency_us,omitempty"`
	MBps      float64 `json:"mb_per_s,omitempty"`
}

func parse(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(out)
	minS := fs.String("min", "1", "smallest message size (512, 64k, 1MiB…)")
	maxS := fs.String("max", "4MiB", "largest message size")
	fs.IntVar(&o.iters, "iters", 1000, "iterations per size (fewer for sizes above 64 KiB)")
	fs.IntVar(&o.warmup, "warmup", 20, "untimed iterations before each size")
	fs.IntVar(&o.window, "window", 64, "messages in flight in the bandwidth test")
	tests := fs.String("tests", "latency,bandwidth,allreduce", "tests to run")
	fs.BoolVar(&o.json, "json", false, "print JSON lines instead of tables")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	if o.min, err = mca.ParseSize(*minS); err != nil {
		return o, fmt.Errorf("-min: %w", err)
	}
	if o.max, err = mca.ParseSize(*maxS); err != nil {
		return o, fmt.Errorf("-max: %w", err)
	}
	if o.min < 1 || o.max < o.min || o.iters < 1 || o.warmup < 0 || o.window < 1 {
		return o, fmt.Errorf("want 1 <= -min <= -max, -iters >= 1, -warmup >= 0, -window >= 1")
	}
	o.tests = mca.SplitList(*tests)
	for _, t := range o.tests {
		if !slices.Contains([]string{"latency", "bandwidth", "allreduce"}, t) {
			return o, fmt.Errorf("-tests: unknown test %q (latency, bandwidth, allreduce)", t)
		}
	}
	return o, nil
}

func (o options) sizes() []int {
	var out []int
	for s := o.min; s <= o.max; s *= 2 {
		out = append(out, int(s))
	}
	return out
}

// itersFor scales iterations down for large messages so every size takes
// comparable time.
func (o options) itersFor(size int) int {
	if size <= 64<<10 {
		return o.iters
	}
	return max(10, o.iters*(64<<10)/size)
}

func run(p *mpi.Proc, args []string, out io.Writer) ([]Row, error) {
	o, err := parse(args, out)
	if err != nil {
		return nil, err
	}
	w := p.World()
	var rows []Row
	for _, test := range o.tests {
		var got []Row
		switch test {
		case "latency", "bandwidth":
			if w.Size() < 2 {
				if w.Rank() == 0 {
					fmt.Fprintf(out, "# %s needs 2 ranks; skipped\n", test)
				}
				continue
			}
			got, err = pointToPoint(w, o, test)
		case "allreduce":
			got, err = allreduce(w, o)
		}
		if err != nil {
			return rows, fmt.Errorf("%s: %w", test, err)
		}
		if w.Rank() == 0 {
			printRows(out, o, test, got)
		}
		rows = append(rows, got...)
	}
	return rows, nil
}

func printRows(out io.Writer, o options, test string, rows []Row) {
	if o.json {
		enc := json.NewEncoder(out)
		for _, r := range rows {
			enc.Encode(r)
		}
		return
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(out, "# gompi %s, %d ranks, transport %s\n", test, rows[0].Ranks, rows[0].Transport)
	switch test {
	case "latency":
		fmt.Fprintf(out, "%-10s %12s %12s\n", "# size", "latency(us)", "MB/s")
		for _, r := range rows {
			fmt.Fprintf(out, "%-10d %12.2f %12.2f\n", r.Size, r.LatencyUS, r.MBps)
		}
	case "bandwidth":
		fmt.Fprintf(out, "%-10s %12s\n", "# size", "MB/s")
		for _, r := range rows {
			fmt.Fprintf(out, "%-10d %12.2f\n", r.Size, r.MBps)
		}
	case "allreduce":
		fmt.Fprintf(out, "%-10s %12s\n", "# size", "latency(us)")
		for _, r := range rows {
			fmt.Fprintf(out, "%-10d %12.2f\n", r.Size, r.LatencyUS)
		}
	}
	fmt.Fprintln(out)
}

// pointToPoint runs between ranks 0 and 1; other ranks wait at the
// barrier that closes each size.
func pointToPoint(w *mpi.Comm, o options, test string) ([]Row, error) {
	r := w.Rank()
	var rows []Row
	for _, size := range o.sizes() {
		iters := o.itersFor(size)
		var elapsed time.Duration
		if r < 2 {
			var err error
			if test == "latency" {
				elapsed, err = mpibench.PingPong(w, size, o.warmup, iters)
			} else {
				elapsed, err = mpibench.Stream(w, size, o.window, o.warmup, iters)
			}
			if err != nil {
				return nil, fmt.Errorf("size %d: %w", size, err)
			}
		}
		if err := w.Barrier(); err != nil {
			return nil, err
		}
		row := Row{Test: test, Size: size, Ranks: w.Size(), Transport: w.Proc().Transport(1), Iters: iters}
		sec := elapsed.Seconds()
		if test == "latency" {
			row.LatencyUS = sec / float64(iters) / 2 * 1e6
			row.MBps = float64(size) * float64(iters) * 2 / sec / 1e6
		} else {
			row.MBps = float64(size) * float64(iters) / sec / 1e6
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func allreduce(w *mpi.Comm, o options) ([]Row, error) {
	var rows []Row
	for _, size := range o.sizes() {
		if size < 8 {
			continue
		}
		iters := o.itersFor(size)
		in, out := make([]float64, size/8), make([]float64, size/8)
		var start time.Time
		for i := 0; i < o.warmup+iters; i++ {
			if i == o.warmup {
				if err := w.Barrier(); err != nil {
					return nil, err
				}
				start = time.Now()
			}
			if err := mpi.Allreduce(w, in, out, mpi.Sum); err != nil {
				return nil, fmt.Errorf("size %d: %w", size, err)
			}
		}
		// Report the slowest rank's time, as OSU does with its max.
		t := []float64{time.Since(start).Seconds() / float64(iters) * 1e6}
		if err := mpi.Allreduce(w, t, t, mpi.Max); err != nil {
			return nil, err
		}
		tr := "self"
		if w.Size() > 1 {
			tr = w.Proc().Transport((w.Rank() + 1) % w.Size())
		}
		rows = append(rows, Row{Test: "allreduce", Size: size, Ranks: w.Size(), Transport: tr, Iters: iters, LatencyUS: t[0]})
	}
	return rows, nil
}
