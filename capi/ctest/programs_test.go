package ctest

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ranks are the job sizes every program runs at, under both MPIs: from
// 1 to 8, odd and even, powers of two and not (all eight counts made the
// package a third slower on 2 cores, near its 3-minute budget).
var ranks = []int{1, 2, 3, 4, 5, 8}

// floatTol is the relative difference allowed between floating-point
// results: the MPIs may reduce in different orders.
const floatTol = 1e-9

func programs(t *testing.T) []string {
	t.Helper()
	var progs []string
	for _, pat := range []string{"*.c", "*.cpp"} {
		m, err := filepath.Glob(filepath.Join("testdata", pat))
		if err != nil {
			t.Fatal(err)
		}
		progs = append(progs, m...)
	}
	if len(progs) == 0 {
		t.Fatal("no programs in testdata")
	}
	return progs
}

func progName(src string) string {
	return strings.TrimSuffix(filepath.Base(src), filepath.Ext(src))
}

func TestPrograms(t *testing.T) {
	setup(t)
	want := expectedPass(t)
	names := map[string]bool{"heat": true, "netpipe": true}
	for _, src := range programs(t) {
		names[progName(src)] = true
	}
	for w := range want {
		if !names[w] {
			t.Errorf("testdata/expected-pass names %q, which is no program", w)
		}
	}
	for _, src := range programs(t) {
		src, _ := filepath.Abs(src)
		t.Run(progName(src), func(t *testing.T) {
			t.Parallel()
			testProgram(t, src, want[progName(src)])
		})
	}
}

// testProgram runs src under Open MPI at every rank count (its own checks
// must pass), then under gompi where applicable, and compares.
func testProgram(t *testing.T, src string, mustPass bool) {
	dir := t.TempDir()
	refBin := ompi.compile(t, src, dir)
	ref := map[int][][]string{}
	for _, n := range ranks {
		out, err := runProgram(ompi, n, refBin, dir)
		if err != nil {
			t.Fatalf("the reference: %v", err)
		}
		ref[n] = out
	}
	fail := t.Logf
	if mustPass {
		fail = t.Errorf
	}
	bin := gompi.compile(t, src, dir)
	if why, err := applicable(bin); err != nil {
		t.Fatal(err)
	} else if why != "" {
		fail("%s", why)
		return
	}
	for _, n := range ranks {
		out, err := runProgram(gompi, n, bin, dir)
		if err == nil {
			err = compareRanks(ref[n], out)
		}
		if err != nil {
			fail("gompi at %d ranks: %v", n, err)
			return
		}
	}
	if !mustPass {
		t.Logf("passes on gompi at %v ranks: add it to testdata/expected-pass", ranks)
	}
}

// runProgram runs bin at n ranks and returns each rank's lines, after
// checking the program's own checks passed.
func runProgram(im *impl, n int, bin, dir string) ([][]string, error) {
	outDir, err := os.MkdirTemp(dir, fmt.Sprintf("%s-%d-", im.name, n))
	if err != nil {
		return nil, err
	}
	if out, err := im.run(n, bin, outDir); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, tail(out))
	}
	var ranksOut [][]string
	for r := 0; r < n; r++ {
		data, err := os.ReadFile(filepath.Join(outDir, fmt.Sprintf("rank.%d", r)))
		if err != nil {
			return nil, fmt.Errorf("%s at %d ranks under %s: %w", filepath.Base(bin), n, im.name, err)
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
			if strings.HasPrefix(l, "FAIL") {
				return nil, fmt.Errorf("%s at %d ranks under %s, rank %d: %s", filepath.Base(bin), n, im.name, r, l)
			}
			if !strings.HasPrefix(l, "mpi4:") {
				lines = append(lines, l)
			}
		}
		if len(lines) == 0 || lines[len(lines)-1] != "done" {
			return nil, fmt.Errorf("%s at %d ranks under %s: rank %d did not finish (its last line is not \"done\")", filepath.Base(bin), n, im.name, r)
		}
		ranksOut = append(ranksOut, lines)
	}
	return ranksOut, nil
}

// compareRanks compares got with the reference's output, rank by rank
// and line by line.
func compareRanks(ref, got [][]string) error {
	for r := range ref {
		if len(ref[r]) != len(got[r]) {
			return fmt.Errorf("rank %d printed %d lines, the reference %d:\n%s", r, len(got[r]), len(ref[r]), diffHint(ref[r], got[r]))
		}
		for i := range ref[r] {
			if !sameLine(ref[r][i], got[r][i]) {
				return fmt.Errorf("rank %d line %d: %q, the reference %q", r, i+1, got[r][i], ref[r][i])
			}
		}
	}
	return nil
}

// sameLine: equal tokens, or floating-point tokens within floatTol.
func sameLine(a, b string) bool {
	if a == b {
		return true
	}
	ta, tb := strings.Fields(a), strings.Fields(b)
	if len(ta) != len(tb) {
		return false
	}
	for i := range ta {
		if ta[i] != tb[i] && !closeFloats(ta[i], tb[i]) {
			return false
		}
	}
	return true
}

func closeFloats(a, b string) bool {
	if !isFloat(a) || !isFloat(b) {
		return false
	}
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
		return false // equal ones were equal strings
	}
	return math.Abs(x-y) <= floatTol*math.Max(math.Abs(x), math.Abs(y))
}

func isFloat(s string) bool {
	return strings.ContainsAny(s, ".eE") || strings.Contains(strings.ToLower(s), "inf") || strings.Contains(strings.ToLower(s), "nan")
}

// diffHint shows the first line where a and b part.
func diffHint(a, b []string) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if !sameLine(a[i], b[i]) {
			return fmt.Sprintf("first difference at line %d: %q, the reference %q", i+1, b[i], a[i])
		}
	}
	return "one is a prefix of the other"
}

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}
