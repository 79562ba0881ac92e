package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

func expected(items, cost int) string {
	results := make([]uint64, items)
	for i := range results {
		results[i] = value(i, cost)
	}
	return fmt.Sprintf("mgrwork: done: %d items, checksum %016x", items, checksum(results))
}

var noFailures = hooks{
	crash: func() { panic("no crash asked for") },
	pause: func(int) { panic("no pause asked for") },
}

// Without failures every layout gives the checksum of the items computed
// in order, in both ways of collecting results.
func TestFailureFree(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		for _, shrink := range []bool{true, false} {
			t.Run(fmt.Sprintf("n=%d/shrink=%v", n, shrink), func(t *testing.T) {
				var out bytes.Buffer
				args := []string{"-items", "37", "-cost", "10", fmt.Sprintf("-shrink=%v", shrink)}
				mpitest.Run(t, n, "uds", func(p *mpi.Proc) error {
					var o bytes.Buffer
					err := run(p, args, &o, noFailures)
					if p.Rank() == 0 {
						out = o
					}
					return err
				})
				if !strings.Contains(out.String(), expected(37, 10)+"\n") {
					t.Errorf("output:\n%s\nwant %q", out.String(), expected(37, 10))
				}
				if !regexp.MustCompile(`mgrwork: items per rank: (\d+:\d+ ?)+\n`).MatchString(out.String()) {
					t.Errorf("no per-rank count in:\n%s", out.String())
				}
			})
		}
	}
}

func TestChecksumDependsOnEveryItem(t *testing.T) {
	a := []uint64{value(0, 5), value(1, 5), value(2, 5)}
	b := []uint64{value(0, 5), value(2, 5), value(1, 5)}
	if checksum(a) == checksum(b) || checksum(a) == checksum(a[:2]) {
		t.Errorf("checksum ignores order or the last item: %x %x %x", checksum(a), checksum(b), checksum(a[:2]))
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{{"-items", "-1"}, {"-crash-at", "0"}, {"-nosuchflag"}} {
		var out bytes.Buffer
		mpitest.Run(t, 1, "uds", func(p *mpi.Proc) error {
			if err := run(p, args, &out, noFailures); err == nil {
				return fmt.Errorf("run %v succeeded", args)
			}
			return nil
		})
	}
}
