// Command benchscale measures what a checkpoint's coordination costs as a
// job grows, for scripts/bench-scale.sh:
//
//	benchscale sim [-sizes 8,64,256,1024] [-radix 8] [-per-node 8] [-rounds 3] [-dir D]
//	    simulated jobs (package cr/crsim: in-process ranks over memory, the
//	    real SnapC coordinators, a modelled daemon tree), flat and tree;
//	    prints one JSON row per checkpoint
//	benchscale real -n N -series S FILE...
//	    turns gompi-checkpoint --json outputs of a job of N real ranks into
//	    rows
//	benchscale plot -in ROWS -out PLOT
//	    prints the table of medians and plots time and messages against N
//
// Coordination time is from the request to the last node's local
// snapshots written (the status line Local Write); the query time, from
// the request to every rank's answer (a round trip through the daemon
// tree, no drain and no write). Messages are those of the ranks' control
// tree (bookmark exchange and agreements), of gompirun and the daemons
// (down the tree and up, every hop counted) and of the daemons and their
// ranks; the all-to-all exchange it replaced is printed beside them, as a
// count.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

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

	"gompi/cr/crsim"
	"gompi/frameworks/snapc"
)

// row is one checkpoint's figures.
type row struct {
	Series string `json:"series"` // "flat", "tree r=8", "real", ...
	N      int    `json:"n"`
	Nodes  int    `json:"nodes,omitempty"`
	// Milliseconds from the request.
	QueryMS        float64 `json:"query_ms,omitempty"`
	CoordinationMS float64 `json:"coordination_ms"`
	CommitMS       float64 `json:"commit_ms,omitempty"`
	// CPUMS is the processor time of the whole simulation for the
	// checkpoint (simulated jobs only).
	CPUMS float64 `json:"cpu_ms,omitempty"`
	// Messages (simulated jobs only).
	RankFrames   uint64 `json:"rank_frames,omitempty"`
	TreeMessages uint64 `json:"tree_messages,omitempty"`
	AppMessages  uint64 `json:"app_messages,omitempty"`
	Depth        int    `json:"depth,omitempty"`
	Fanout       int    `json:"fanout,omitempty"`
	RankDepth    int    `json:"rank_depth,omitempty"`
}

func (r row) messages() uint64 { return r.RankFrames + r.TreeMessages + r.AppMessages }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchscale sim|real|plot [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "sim":
		err = sim(os.Args[2:], os.Stdout)
	case "real":
		err = real(os.Args[2:], os.Stdout)
	case "plot":
		err = plotCmd(os.Args[2:], os.Stdout)
	default:
		err = fmt.Errorf("unknown subcommand %q: sim, real or plot", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchscale:", err)
		os.Exit(1)
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a list of positive numbers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func sim(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	sizes := fs.String("sizes", "8,64,256,1024", "simulated ranks")
	radix := fs.Int("radix", 8, "the daemon tree's radix")
	perNode := fs.Int("per-node", 8, "ranks per simulated node")
	rounds := fs.Int("rounds", 3, "checkpoints per job")
	dir := fs.String("dir", "", "where the snapshots go (default: a folder under $TMPDIR; tmpfs measures coordination, not a disk)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ns, err := ints(*sizes)
	if err != nil {
		return fmt.Errorf("-sizes: %w", err)
	}
	enc := json.NewEncoder(w)
	for _, n := range ns {
		nodes := (n + *perNode - 1) / *perNode
		modes := []struct {
			name  string
			radix int
		}{{"flat", 0}, {fmt.Sprintf("tree r=%d", *radix), *radix}}
		for _, m := range modes {
			rows, err := simJob(n, *perNode, m.radix, *rounds, *dir)
			if err != nil {
				return fmt.Errorf("%d ranks, %s: %w", n, m.name, err)
			}
			for _, r := range rows {
				r.Series, r.Nodes = m.name, nodes
				if err := enc.Encode(r); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// simJob runs one simulated job through rounds checkpoints and checks its
// result.
func simJob(n, perNode, radix, rounds int, dir string) ([]row, error) {
	d, err := os.MkdirTemp(dir, "benchscale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(d)
	cfg := crsim.Config{Ranks: n, PerNode: perNode, Radix: radix, Dir: d, Steps: rounds + 4, HoldAt: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	s, err := crsim.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var rows []row
	for range rounds {
		f, err := s.Checkpoint(ctx)
		if err != nil {
			s.Finish()
			return nil, err
		}
		rows = append(rows, row{N: n, QueryMS: ms(f.Query), CoordinationMS: ms(f.Coordination), CommitMS: ms(f.Commit), CPUMS: ms(f.CPU),
			RankFrames: f.RankFrames, TreeMessages: f.TreeMessages, AppMessages: f.AppMessages,
			Depth: f.Depth, Fanout: f.Fanout, RankDepth: f.RankDepth})
	}
	got, err := s.Finish()
	if err != nil {
		return nil, err
	}
	if !slices.Equal(got, crsim.Expected(cfg)) {
		return nil, errors.New("the checkpointed job's result differs from the program's")
	}
	return rows, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// real reads gompi-checkpoint --json outcomes.
func real(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("real", flag.ContinueOnError)
	n := fs.Int("n", 0, "the job's ranks")
	series := fs.String("series", "real", "the rows' series")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 || fs.NArg() == 0 {
		return errors.New("real: -n and at least one file are required")
	}
	enc := json.NewEncoder(w)
	for _, name := range fs.Args() {
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		var o outcome
		if err := json.Unmarshal(b, &o); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		r, err := outcomeRow(o)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		r.Series, r.N = *series, *n
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// outcome is what gompi-checkpoint --json prints, the part read here.
type outcome struct {
	Events []snapc.Event `json:"events"`
	Error  string        `json:"error,omitempty"`
}

// outcomeRow measures one checkpoint from its events.
func outcomeRow(o outcome) (row, error) {
	if o.Error != "" {
		return row{}, errors.New(o.Error)
	}
	var start, query, written, commit time.Time
	nodes := 0
	for _, e := range o.Events {
		switch e.Phase {
		case snapc.PhaseRequested:
			start = e.Time
		case snapc.PhaseQuery:
			query = e.Time
		case snapc.PhaseLocalWrite:
			written, nodes = e.Time, nodes+1
		case snapc.PhaseCommit:
			commit = e.Time
		}
	}
	if start.IsZero() || written.IsZero() || commit.IsZero() {
		return row{}, errors.New("the outcome lacks the requested, local write or commit event")
	}
	return row{Nodes: nodes, QueryMS: ms(query.Sub(start)), CoordinationMS: ms(written.Sub(start)), CommitMS: ms(commit.Sub(start))}, nil
}

func plotCmd(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	in := fs.String("in", "", "rows (JSON lines)")
	out := fs.String("out", "", "plot (.svg, .png or .pdf)")
	title := fs.String("title", "gompi: a checkpoint's coordination against job size", "the plot's title")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *out == "" {
		return errors.New("plot: -in and -out are required")
	}
	rows, err := readRows(*in)
	if err != nil {
		return err
	}
	g := group(rows)
	g.table(w)
	return g.plot(*out, *title)
}

func readRows(name string) ([]row, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []row
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no rows", name)
	}
	return rows, sc.Err()
}

// groups holds the rows by series and size, series in the order seen.
type groups struct {
	series []string
	by     map[string]map[int][]row
}

func group(rows []row) groups {
	g := groups{by: map[string]map[int][]row{}}
	for _, r := range rows {
		if g.by[r.Series] == nil {
			g.series = append(g.series, r.Series)
			g.by[r.Series] = map[int][]row{}
		}
		g.by[r.Series][r.N] = append(g.by[r.Series][r.N], r)
	}
	return g
}

func (g groups) sizes(series string) []int {
	var out []int
	for n := range g.by[series] {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func median(rs []row, f func(row) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func (g groups) table(w io.Writer) {
	fmt.Fprintf(w, "%-16s %5s %5s %5s %6s %4s %8s %8s %9s %8s %6s %6s %6s %7s %6s %10s\n",
		"series", "ranks", "nodes", "depth", "fanout", "rdep", "query ms", "coord ms", "commit ms", "cpu ms",
		"rank", "tree", "app", "msgs", "msgs/N", "all-to-all")
	for _, s := range g.series {
		for _, n := range g.sizes(s) {
			rs := g.by[s][n]
			r := rs[0]
			med := func(f func(row) float64) float64 { return median(rs, f) }
			fmt.Fprintf(w, "%-16s %5d %5d ", s, n, r.Nodes)
			if r.RankFrames == 0 { // a real job: times only
				fmt.Fprintf(w, "%5s %6s %4s %8.1f %8.1f %9.1f %8s %6s %6s %6s %7s %6s %10s", "-", "-", "-",
					med(func(r row) float64 { return r.QueryMS }), med(func(r row) float64 { return r.CoordinationMS }),
					med(func(r row) float64 { return r.CommitMS }), "-", "-", "-", "-", "-", "-", "-")
			} else {
				msgs := med(func(r row) float64 { return float64(r.messages()) })
				// The exchange and the agreement all-to-all, as before.
				fmt.Fprintf(w, "%5d %6d %4d %8.1f %8.1f %9.1f %8.1f %6.0f %6.0f %6.0f %7.0f %6.2f %10d", r.Depth, r.Fanout, r.RankDepth,
					med(func(r row) float64 { return r.QueryMS }), med(func(r row) float64 { return r.CoordinationMS }),
					med(func(r row) float64 { return r.CommitMS }), med(func(r row) float64 { return r.CPUMS }),
					med(func(r row) float64 { return float64(r.RankFrames) }), med(func(r row) float64 { return float64(r.TreeMessages) }),
					med(func(r row) float64 { return float64(r.AppMessages) }), msgs, msgs/float64(n), 2*n*(n-1))
			}
			fmt.Fprintf(w, "  (%d)\n", len(rs))
		}
	}
}

// plot draws coordination time and messages against ranks, log-log.
func (g groups) plot(out, title string) error {
	timeP := g.panel("coordination time (request → all local snapshots written)", "ms",
		func(r row) float64 { return r.CoordinationMS }, func(string) bool { return true })
	msgP := g.panel("messages per checkpoint (simulated)", "messages",
		func(r row) float64 { return float64(r.messages()) }, func(s string) bool { return g.by[s][g.sizes(s)[0]][0].RankFrames > 0 })
	for _, s := range g.series {
		if g.by[s][g.sizes(s)[0]][0].RankFrames > 0 {
			g.allToAll(msgP, s)
			break
		}
	}
	format := strings.TrimPrefix(filepath.Ext(out), ".")
	c, err := draw.NewFormattedCanvas(22*vg.Centimeter, 11*vg.Centimeter, format)
	if err != nil {
		return fmt.Errorf("%s: %w", out, err)
	}
	dc := draw.New(c)
	sty := text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, 13), Handler: plot.DefaultTextHandler, XAlign: draw.XCenter, YAlign: draw.YTop}
	dc.FillText(sty, vg.Point{X: dc.Center().X, Y: dc.Max.Y - vg.Millimeter*2}, title)
	body := draw.Crop(dc, 0, 0, 0, -vg.Centimeter)
	row := []*plot.Plot{timeP, msgP}
	panels := plot.Align([][]*plot.Plot{row}, draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadTop: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4, PadBottom: vg.Millimeter * 2}, body)
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

func (g groups) panel(title, unit string, value func(row) float64, keep func(string) bool) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "ranks"
	p.Y.Label.Text = unit
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	for i, s := range g.series {
		if !keep(s) {
			continue
		}
		var xys plotter.XYs
		for _, n := range g.sizes(s) {
			if v := median(g.by[s][n], value); v > 0 {
				xys = append(xys, plotter.XY{X: float64(n), Y: v})
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			continue
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(s, l, pts)
	}
	return p
}

// allToAll adds to a messages panel the line of the exchange this one
// replaced: the bookmarks and the agreement all-to-all, 2N(N-1) messages
// between the ranks, plus the daemons' of series s.
func (g groups) allToAll(p *plot.Plot, s string) {
	var xys plotter.XYs
	for _, n := range g.sizes(s) {
		rs := g.by[s][n]
		runtime := median(rs, func(r row) float64 { return float64(r.TreeMessages + r.AppMessages) })
		xys = append(xys, plotter.XY{X: float64(n), Y: float64(2*n*(n-1)) + runtime})
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return
	}
	l.Dashes = plotutil.Dashes(1)
	p.Add(l)
	p.Legend.Add("all-to-all exchange (before)", l)
}
