package capi_test

import (
	"context"
	"debug/elf"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gompi/capi/api"
	"gompi/capi/internal/cbuild"
)

func TestMain(m *testing.M) { cbuild.Main(m) }

func cPrefix(t *testing.T) string { return cbuild.Prefix(t) }

// Every function of the standard links as PMPI_X and as MPI_X, a weak
// alias; a function api.Implemented lists is no generated stub (a stub
// has an alias gompi_stub_MPI_X), and every other one is.
func TestSymbols(t *testing.T) {
	lib := filepath.Join(cPrefix(t), "lib", "libmpi_abi.so.1")
	f, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	type sym struct {
		value uint64
		weak  bool
	}
	byName := map[string]sym{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Section == elf.SHN_UNDEF {
			continue
		}
		byName[s.Name] = sym{s.Value, elf.ST_BIND(s.Info) == elf.STB_WEAK}
	}
	impl := api.Implemented()
	if len(impl) < 60 {
		t.Errorf("only %d functions implemented", len(impl))
	}
	for _, fn := range api.Functions() {
		p, ok := byName["P"+fn]
		if !ok {
			t.Errorf("P%s is not in %s", fn, lib)
			continue
		}
		if m, ok := byName[fn]; !ok || !m.weak || m.value != p.value {
			t.Errorf("%s is not a weak alias of P%s in %s (%+v, %+v)", fn, fn, lib, m, p)
		}
		s, stub := byName["gompi_stub_"+fn]
		stub = stub && s.value == p.value
		if listed := slices.Contains(impl, fn); listed == stub {
			t.Errorf("%s: listed as implemented %v, but P%s is a stub: %v", fn, listed, fn, stub)
		}
	}
}

// run compiles a testdata program with gompicc and runs it alone (a
// 1-rank job) or under gompirun.
func run(t *testing.T, src string, np int) (string, error) {
	t.Helper()
	p := cPrefix(t)
	exe := filepath.Join(t.TempDir(), strings.TrimSuffix(src, ".c"))
	if out, err := exec.Command(filepath.Join(p, "bin", "gompicc"), "-Wall", "-Werror", "-o", exe, filepath.Join("testdata", src)).CombinedOutput(); err != nil {
		t.Fatalf("gompicc %s: %v\n%s", src, err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	if np > 0 {
		cmd = exec.CommandContext(ctx, filepath.Join(p, "bin", "gompirun"), "--oversubscribe", "-np", fmt.Sprint(np), exe)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestBasicProgram(t *testing.T) {
	for _, np := range []int{0, 2, 3} {
		t.Run(fmt.Sprintf("np%d", np), func(t *testing.T) {
			out, err := run(t, "basic.c", np)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			size := max(np, 1)
			for r := range size {
				next, prev := (r+1)%size, (r+size-1)%size
				want := []string{
					fmt.Sprintf("size = %d", size),
					"provided = 4096", "query_thread = 4096",
					fmt.Sprintf("ring = %d source %d tag %d count 1 null 1", prev, prev, 10+prev),
					"procnull source -3 tag -2 count 0",
					fmt.Sprintf("rsend = %d", prev), fmt.Sprintf("issend = %d", prev),
					fmt.Sprintf("allreduce sum = %d", size*(size+1)/2),
					fmt.Sprintf("allgather last = %d", size-1),
					"bcast = 77", "ibcast = 88",
					fmt.Sprintf("in-place prod = %d", 1<<size),
					"compare dup = congruent",
					fmt.Sprintf("split reversed rank = %d", size-1-r),
					"name = the dup (7)", "world name = MPI_COMM_WORLD", "freed = 1",
					"tag_ub >= 32767: 1 (flag 1)", "wtime_is_global = 0 (flag 1)",
					"send to rank size = 6", "bad keyval = 36",
					"win_fence = 55 (operation not supported)",
					"initialized 1 finalized 1",
				}
				if r == 0 {
					want = append(want, fmt.Sprintf("reduce max = %d", size))
				}
				_ = next
				for _, w := range want {
					if line := fmt.Sprintf("rank %d: %s\n", r, w); !strings.Contains(out, line) {
						t.Errorf("no %q in the output:\n%s", line, out)
					}
				}
			}
		})
	}
}

// An unsupported function under the default handler ends the job, saying
// which function gompi does not implement.
func TestUnsupportedIsFatal(t *testing.T) {
	for _, np := range []int{0, 2} {
		out, err := run(t, "unsupported.c", np)
		if err == nil {
			t.Errorf("np %d: the job succeeded:\n%s", np, out)
		}
		if !strings.Contains(out, "MPI_Win_fence is not implemented by gompi") || strings.Contains(out, "still running") {
			t.Errorf("np %d: output:\n%s", np, out)
		}
	}
}

// A predefined op on a derived datatype with holes combines its base
// elements and leaves the holes alone (coll.go stages such buffers).
func TestDerivedReduction(t *testing.T) {
	for _, np := range []int{0, 3} {
		t.Run(fmt.Sprintf("np%d", np), func(t *testing.T) {
			out, err := run(t, "derived_red.c", np)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for r := range max(np, 1) {
				if line := fmt.Sprintf("rank %d: ok\n", r); !strings.Contains(out, line) {
					t.Errorf("no %q in the output:\n%s", line, out)
				}
			}
		})
	}
}
