package cr

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gompi/frameworks/sstore/snapshot"
)

// splits are decompositions of g elements over n ranks: each returns
// rank r's first element and count.
var splits = map[string]func(g, n, r int) (lo, count int){
	"even": func(g, n, r int) (int, int) { return r * g / n, (r+1)*g/n - r*g/n },
	// Rank r gets a share proportional to r+1: the last ranks hold far
	// more than the first, and some runs are empty when g is small.
	"skewed": func(g, n, r int) (int, int) {
		w := n * (n + 1) / 2
		at := func(r int) int { return g * (r * (r + 1) / 2) / w }
		return at(r), at(r+1) - at(r)
	},
}

const rowCols = 3 // a distributed element is a row of 3 float64

// slab is rank r's slice of the global grid of g rows under split: one
// halo row each side (set to -1: never saved, never overwritten).
func slab(g, lo, count int, fill bool) []float64 {
	s := make([]float64, (count+2)*rowCols)
	for i := range s {
		s[i] = -1
	}
	for e := range count {
		for c := range rowCols {
			s[(e+1)*rowCols+c] = 0
			if fill {
				s[(e+1)*rowCols+c] = float64((lo+e)*rowCols + c)
			}
		}
	}
	return s
}

// saveRanks writes n ranks' app.state under split into dir, each with
// the grid's run, a replicated step and a per-rank value with its own
// redistribution; it returns the sources a repartitioned restart reads.
func saveRanks(t *testing.T, dir string, g, n int, split func(g, n, r int) (int, int)) []*appSource {
	t.Helper()
	srcs := make([]*appSource, n)
	for r := range n {
		lo, count := split(g, n, r)
		grid, step, mine := slab(g, lo, count, true), 41, []int{r, r * r}
		dists := []distSpec{
			{mode: distBlock, block: Block{Global: g, Lo: lo, Elem: rowCols * 8, Halo: 1}},
			{mode: distReplicated},
			{mode: distFunc},
		}
		var buf bytes.Buffer
		if err := writeAppStateOf(&buf, r, 7, []string{"grid", "step", "mine"}, []any{&grid, &step, &mine}, dists); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, SourceFile(r))
		if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := readSource(path)
		if err != nil {
			t.Fatal(err)
		}
		srcs[r] = s
	}
	return srcs
}

// TestRepartition: every decomposition of N ranks restarts on every M
// (both up to 8) with each new rank's run read from the old runs that
// overlap it, halos untouched, the replicated value rank 0's, and the
// redistribution function given every old rank's value.
func TestRepartition(t *testing.T) {
	for _, g := range []int{5, 13, 64} {
		for from, fromSplit := range splits {
			for n := 1; n <= 8; n++ {
				dir := t.TempDir()
				srcs := saveRanks(t, dir, g, n, fromSplit)
				layouts := make([]Layout, n)
				for k := range n {
					var err error
					if layouts[k], err = ReadLayout(srcs[k].path); err != nil {
						t.Fatal(err)
					}
				}
				if err := CheckRedistributable(layouts); err != nil {
					t.Fatalf("g=%d %s n=%d: %v", g, from, n, err)
				}
				rs := &restartState{names: srcs[0].hdr.Names, sources: srcs}
				for to, toSplit := range splits {
					for m := 1; m <= 8; m++ {
						for j := range m {
							name := fmt.Sprintf("g=%d/%s%d→%s%d/rank%d", g, from, n, to, m, j)
							checkNewRank(t, name, rs, g, n, m, j, toSplit)
						}
					}
				}
			}
		}
	}
}

func checkNewRank(t *testing.T, name string, rs *restartState, g, n, m, j int, split func(g, n, r int) (int, int)) {
	lo, count := split(g, m, j)
	grid := slab(g, lo, count, false)
	d := distSpec{mode: distBlock, block: Block{Global: g, Lo: lo, Elem: rowCols * 8, Halo: 1}}
	if err := rs.fillRepartitioned("grid", &grid, d); err != nil {
		t.Fatalf("%s: grid: %v", name, err)
	}
	if want := slab(g, lo, count, true); !slices.Equal(grid, want) {
		t.Fatalf("%s: grid %v, want %v", name, grid, want)
	}
	var step int
	if err := rs.fillRepartitioned("step", &step, distSpec{mode: distReplicated}); err != nil || step != 41 {
		t.Fatalf("%s: step %d, %v", name, step, err)
	}
	var mine []int
	err := rs.fillRepartitioned("mine", &mine, distSpec{mode: distFunc, fn: func(s Saved) error {
		for k := range s.Ranks() {
			var v []int
			if err := s.Decode(k, &v); err != nil {
				return err
			}
			mine = append(mine, v[1])
		}
		return nil
	}})
	want := make([]int, n)
	for k := range want {
		want[k] = k * k
	}
	if err != nil || !slices.Equal(mine, want) {
		t.Fatalf("%s: redistributed %v, want %v (%v)", name, mine, want, err)
	}
}

// TestRepartitionRefused: what cannot be redistributed is refused, naming
// why.
func TestRepartitionRefused(t *testing.T) {
	dir := t.TempDir()
	srcs := saveRanks(t, dir, 10, 2, splits["even"])
	rs := &restartState{names: srcs[0].hdr.Names, sources: srcs}
	tests := []struct {
		name string
		fill func() error
		want string
	}{
		{"registered otherwise", func() error { var s int; return rs.fillRepartitioned("step", &s, distSpec{}) }, "saved as a replicated value (ProtectReplicated), registered now as this rank's own value (Protect)"},
		{"unknown name", func() error { var s int; return rs.fillRepartitioned("nope", &s, distSpec{mode: distReplicated}) }, "holds no value of that name"},
		{"other array size", func() error {
			grid := slab(12, 0, 6, false)
			return rs.fillRepartitioned("grid", &grid, distSpec{mode: distBlock, block: Block{Global: 12, Elem: rowCols * 8, Halo: 1}})
		}, "of 10 elements of 24 bytes, the program registers a []float64 of 12 elements"},
		{"other type", func() error {
			grid := make([]int64, 7*rowCols)
			return rs.fillRepartitioned("grid", &grid, distSpec{mode: distBlock, block: Block{Global: 10, Elem: rowCols * 8, Halo: 1}})
		}, "saved a []float64"},
	}
	for _, tt := range tests {
		if err := tt.fill(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestCheckRedistributable: the layouts gompi-restart refuses.
func TestCheckRedistributable(t *testing.T) {
	grid := func(lo, count int64) ValueLayout {
		return ValueLayout{Name: "grid", Mode: "distributed", Global: 10, Lo: lo, Count: count, Elem: 8}
	}
	step := ValueLayout{Name: "step", Mode: "replicated"}
	tests := []struct {
		name    string
		layouts []Layout
		want    string
	}{
		{"tiled", []Layout{{0, 3, []ValueLayout{grid(0, 4), step}}, {1, 3, []ValueLayout{grid(4, 0), step}}, {2, 3, []ValueLayout{grid(4, 6), step}}}, ""},
		{"plain value", []Layout{{0, 3, []ValueLayout{grid(0, 10), {Name: "rng", Mode: "plain"}}}}, `saved "rng" with cr.Protect`},
		{"gap", []Layout{{0, 3, []ValueLayout{grid(0, 4)}}, {1, 3, []ValueLayout{grid(5, 5)}}}, "leave elements 4 to 4 unsaved or save them twice"},
		{"overlap", []Layout{{0, 3, []ValueLayout{grid(0, 6)}}, {1, 3, []ValueLayout{grid(5, 5)}}}, "unsaved or save them twice"},
		{"short", []Layout{{0, 3, []ValueLayout{grid(0, 4)}}, {1, 3, []ValueLayout{grid(4, 5)}}}, "cover elements 0 to 8 of 10"},
		{"other safe point", []Layout{{0, 3, []ValueLayout{step}}, {1, 4, []ValueLayout{step}}}, "does not match rank 0's"},
		{"other values", []Layout{{0, 3, []ValueLayout{step}}, {1, 3, []ValueLayout{grid(0, 10)}}}, "does not match rank 0's"},
		{"mixed modes", []Layout{{0, 3, []ValueLayout{grid(0, 10)}}, {1, 3, []ValueLayout{{Name: "grid", Mode: "replicated"}}}}, "rank 1 saved it as replicated"},
		{"none", nil, "no rank's state"},
	}
	for _, tt := range tests {
		err := CheckRedistributable(tt.layouts)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

// FuzzDecodeAppStateDists: whatever an app.state holds, decoding ends
// without a panic, and an accepted distribution fits its value: a block's
// run lies in its array and is its payload exactly, so a repartitioned
// restart never reads outside a value.
func FuzzDecodeAppStateDists(f *testing.F) {
	grid, step := slab(9, 2, 3, true), 5
	var buf bytes.Buffer
	dists := []distSpec{{mode: distBlock, block: Block{Global: 9, Lo: 2, Elem: rowCols * 8, Halo: 1}}, {mode: distReplicated}}
	if err := writeAppStateOf(&buf, 1, 3, []string{"grid", "step"}, []any{&grid, &step}, dists); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		af, err := decodeAppState(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		for i := range af.Values {
			d := af.dist(i)
			if d.Mode > distFunc || (d.Mode == distBlock && (d.Lo < 0 || d.Count < 0 || d.Lo+d.Count > d.Global || d.Count*d.Elem != int64(len(af.Values[i])))) {
				t.Fatalf("accepted value %q with distribution %+v and %d bytes", af.Names[i], d, len(af.Values[i]))
			}
		}
	})
}

// TestHostileDists: distributions that lie about their values are
// refused as damage before any value is read by them.
func TestHostileDists(t *testing.T) {
	h := func(d ...valueDist) *appHeader {
		return &appHeader{Names: []string{"a", "b"}, Kinds: []byte{valueRaw, valueGob}, Sizes: []int64{24, 5}, Dists: d}
	}
	block := func(global, lo, count, elem int64) valueDist {
		return valueDist{Mode: distBlock, Global: global, Lo: lo, Count: count, Elem: elem}
	}
	tests := []struct {
		name string
		h    *appHeader
		want string
	}{
		{"none recorded", h(), ""},
		{"fits", h(block(10, 7, 3, 8), valueDist{Mode: distReplicated}), ""},
		{"one for two values", h(block(10, 7, 3, 8)), "1 distributions for 2 values"},
		{"unknown mode", h(block(10, 7, 3, 8), valueDist{Mode: 9}), "distribution 9"},
		{"past its array", h(block(10, 8, 3, 8), valueDist{}), "elements 8+3 of 10"},
		{"more than the payload", h(block(10, 0, 4, 8), valueDist{}), "in 24 bytes"},
		{"negative run", h(block(10, 2, -3, 8), valueDist{}), "elements 2+-3"},
		{"huge elements", h(block(1<<62, 0, 1<<61, 1<<62), valueDist{}), "in 24 bytes"},
		{"zero-byte elements", h(block(10, 0, 3, 0), valueDist{}), "0 bytes each"},
		{"a gob value as a block", h(valueDist{}, block(10, 0, 1, 5)), `value "b"`},
	}
	for _, tt := range tests {
		err := checkDists(tt.h)
		if (tt.want == "") != (err == nil) || (err != nil && (!strings.Contains(err.Error(), tt.want) || !errors.Is(err, snapshot.ErrCorrupt))) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
