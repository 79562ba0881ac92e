package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

func want(points, iters int) string {
	return fmt.Sprintf("resilient: done: %d points, %d iterations, checksum %016x\n",
		points, iters, reference(config{points: points, iters: iters}))
}

func noCrash() { panic("no crash asked for") }

// Without failures every rank count gives the serial solve's field, bit
// for bit, saves or not.
func TestFailureFree(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		for _, every := range []int{1, 7, 1000} {
			t.Run(fmt.Sprintf("n=%d/every=%d", n, every), func(t *testing.T) {
				var out bytes.Buffer
				args := []string{"-points", "101", "-iters", "60", "-every", fmt.Sprint(every)}
				mpitest.Run(t, n, "uds", func(p *mpi.Proc) error {
					var o bytes.Buffer
					err := run(p, args, &o, noCrash)
					if p.Rank() == 0 {
						out = o
					}
					return err
				})
				if out.String() != want(101, 60) {
					t.Errorf("output %q, want %q", out.String(), want(101, 60))
				}
			})
		}
	}
}

func TestChecksumDependsOnTheSolve(t *testing.T) {
	a, b := reference(config{points: 50, iters: 10}), reference(config{points: 50, iters: 11})
	if a == b {
		t.Errorf("10 and 11 iterations give the same checksum %x", a)
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{{"-points", "2"}, {"-every", "0"}, {"-crash-at", "3"}, {"-nosuchflag"}} {
		mpitest.Run(t, 1, "uds", func(p *mpi.Proc) error {
			var out bytes.Buffer
			if err := run(p, args, &out, noCrash); err == nil || strings.Contains(out.String(), "done") {
				return fmt.Errorf("run %v: %v, %q", args, err, out.String())
			}
			return nil
		})
	}
}
