// Command benchplot turns the rows scripts/bench-vs-openmpi.sh collects
// (JSON lines of examples/bench -json and of its Open MPI twin
// examples/bench/testdata/ompi_bench.c, each tagged with the series it
// belongs to) into a table of medians over the rounds and a plot of the
// curves: ping-pong latency, streaming bandwidth and Allreduce latency
// against message size, one line per series. The plot's format follows
// the -out file's extension (svg, png, pdf).
//
//	go run ./scripts/benchplot -in rows.jsonl -out plot.svg -title "..." > table.txt
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	_ "gonum.org/v1/plot/vg/vgimg" // png
	_ "gonum.org/v1/plot/vg/vgpdf" // pdf
	_ "gonum.org/v1/plot/vg/vgsvg" // svg
)

// row is one measurement, as the bench programs print it, with the series
// the script adds.
type row struct {
	Series    string  `json:"series"`
	Test      string  `json:"test"`
	Size      int     `json:"size"`
	LatencyUS float64 `json:"latency_us"`
	MBps      float64 `json:"mb_per_s"`
}

// value is the figure a test's plot shows: latency, or bandwidth for the
// bandwidth test and NetPIPE's (whose curve is its throughput).
func (r row) value() float64 {
	if r.Test == "bandwidth" || r.Test == "netpipe" {
		return r.MBps
	}
	return r.LatencyUS
}

// key names one point: a series' median at one size of one test.
type key struct {
	series, test string
	size         int
}

// results holds every sample by point, and the series in the order first
// seen (the script's order: each gompi transport before its Open MPI peer).
type results struct {
	samples map[key][]float64
	series  []string
}

var tests = []struct{ name, title, unit string }{
	{"latency", "ping-pong latency (one way)", "µs"},
	{"bandwidth", "streaming bandwidth", "MB/s"},
	{"allreduce", "Allreduce latency (slowest rank)", "µs"},
	{"netpipe", "NetPIPE NPmpi throughput", "MB/s"},
}

func main() {
	in := flag.String("in", "", "rows (JSON lines) to read")
	out := flag.String("out", "", "plot to write (.svg, .png or .pdf)")
	title := flag.String("title", "gompi vs Open MPI", "the plot's title")
	flag.Parse()
	if err := run(*in, *out, *title, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

func run(in, out, title string, w io.Writer) error {
	if in == "" || out == "" {
		return fmt.Errorf("-in and -out are required")
	}
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	res, err := read(f)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	res.table(w)
	return res.plot(out, title)
}

func read(r io.Reader) (*results, error) {
	res := &results{samples: map[key][]float64{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var rw row
		if err := json.Unmarshal([]byte(line), &rw); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if rw.Series == "" || rw.value() <= 0 {
			return nil, fmt.Errorf("line %d: no series or no figure: %s", n, line)
		}
		if !slices.Contains(res.series, rw.Series) {
			res.series = append(res.series, rw.Series)
		}
		k := key{rw.Series, rw.Test, rw.Size}
		res.samples[k] = append(res.samples[k], rw.value())
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(res.samples) == 0 {
		return nil, fmt.Errorf("no rows")
	}
	return res, nil
}

// median of a point's samples; ok is false when the point has none.
func (res *results) median(series, test string, size int) (float64, bool) {
	v := slices.Clone(res.samples[key{series, test, size}])
	if len(v) == 0 {
		return 0, false
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], true
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
}

// sizes lists the sizes measured for test, ascending.
func (res *results) sizes(test string) []int {
	var out []int
	for k := range res.samples {
		if k.test == test && !slices.Contains(out, k.size) {
			out = append(out, k.size)
		}
	}
	slices.Sort(out)
	return out
}

// table writes, for each test, the median of each series at each size,
// with the number of samples behind them.
func (res *results) table(w io.Writer) {
	for _, t := range tests {
		sizes := res.sizes(t.name)
		if len(sizes) == 0 {
			continue
		}
		fmt.Fprintf(w, "# %s (%s, median of the rounds)\n%-9s", t.title, t.unit, "size")
		for _, s := range res.series {
			fmt.Fprintf(w, " %14s", s)
		}
		fmt.Fprintln(w)
		for _, size := range sizes {
			fmt.Fprintf(w, "%-9s", sizeName(size))
			for _, s := range res.series {
				if m, ok := res.median(s, t.name, size); ok {
					fmt.Fprintf(w, " %9.2f (%2d)", m, len(res.samples[key{s, t.name, size}]))
				} else {
					fmt.Fprintf(w, " %14s", "-")
				}
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w)
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// plot draws one panel per test, side by side, log-log.
func (res *results) plot(out, title string) error {
	var row []*plot.Plot
	for _, t := range tests {
		if len(res.sizes(t.name)) == 0 {
			continue
		}
		p, err := res.panel(t.name, t.title, t.unit)
		if err != nil {
			return err
		}
		row = append(row, p)
	}
	format := strings.TrimPrefix(filepath.Ext(out), ".")
	c, err := draw.NewFormattedCanvas(vg.Length(len(row))*11*vg.Centimeter, 11*vg.Centimeter, format)
	if err != nil {
		return fmt.Errorf("%s: %w", out, err)
	}
	dc := draw.New(c)
	sty := text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, 13), Handler: plot.DefaultTextHandler, XAlign: draw.XCenter, YAlign: draw.YTop}
	dc.FillText(sty, vg.Point{X: dc.Center().X, Y: dc.Max.Y - vg.Millimeter*2}, title)
	body := draw.Crop(dc, 0, 0, 0, -vg.Centimeter)
	panels := plot.Align([][]*plot.Plot{row}, draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Centimeter, PadTop: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4, PadBottom: vg.Millimeter * 2}, body)
	for i, p := range row {
		p.Draw(panels[0][i])
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", out, err)
	}
	return f.Close()
}

// panel plots test's medians against size, one line per series.
func (res *results) panel(test, title, unit string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "message size (bytes)"
	p.Y.Label.Text = unit
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = sizeTicks{}, plot.LogTicks{Prec: -1}
	p.Legend.Top = test != "bandwidth" && test != "netpipe"
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	for i, s := range res.series {
		var xys plotter.XYs
		for _, size := range res.sizes(test) {
			if m, ok := res.median(s, test, size); ok {
				xys = append(xys, plotter.XY{X: float64(size), Y: m})
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", test, s, err)
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i % 2)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(s, l, pts)
	}
	return p, nil
}

// sizeTicks marks powers of two on a size axis, naming every fifth
// (1B, 32B, 1KiB, ...) so the labels do not run into each other.
type sizeTicks struct{}

func (sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for i := 0; i < 63 && float64(int64(1)<<i) <= hi; i++ {
		v := int64(1) << i
		if float64(v) < lo {
			continue
		}
		t := plot.Tick{Value: float64(v)}
		if i%5 == 0 {
			t.Label = sizeName(int(v))
		}
		out = append(out, t)
	}
	return out
}
