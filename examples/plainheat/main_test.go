package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"gompi/examples/heat/solver"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// TestSolverChecksum: plainheat prints the checksum heat prints for the same
// input (heat's own test pins it across rank counts and transports; a
// one-rank heat run is the solver alone, so the checksum is recomputed
// here from the solver with one rank), and a different input gives a
// different one.
func TestSolverChecksum(t *testing.T) {
	one := func(args []string, n int, btl string, nodes []string) string {
		var sum string
		var out bytes.Buffer
		mpitest.RunWith(t, mpitest.Config{N: n, BTL: btl, Nodes: nodes}, func(p *mpi.Proc) error {
			var o bytes.Buffer
			s, err := run(p, args, &o)
			if p.Rank() == 0 {
				sum, out = s, o
			}
			return err
		})
		if !strings.Contains(out.String(), "checksum: "+sum+"\n") || len(sum) != 16 {
			t.Fatalf("output %q lacks the checksum line", out.String())
		}
		return sum
	}
	args := []string{"-size", "37", "-steps", "40", "-every", "10"}
	var want string
	mpitest.Run(t, 1, "tcp", func(p *mpi.Proc) error {
		s, err := solver.New(37, 1, 0)
		if err != nil {
			return err
		}
		var res float64
		for step := 1; step <= 40; step++ {
			if res, err = s.Step(p.World()); err != nil {
				return err
			}
		}
		want, err = s.Finish(p.World(), &bytes.Buffer{}, "heat", 40, res)
		return err
	})
	for _, c := range []struct {
		n     int
		btl   string
		nodes []string
	}{{1, "tcp", nil}, {3, "uds", nil}, {4, "tcp,uds", []string{"a", "a", "b", "b"}}} {
		t.Run(fmt.Sprintf("n=%d/%s", c.n, c.btl), func(t *testing.T) {
			if got := one(args, c.n, c.btl, c.nodes); got != want {
				t.Fatalf("checksum %s, the solver alone gives %s", got, want)
			}
		})
	}
	if one([]string{"-size", "37", "-steps", "41"}, 2, "tcp", nil) == want {
		t.Fatal("41 steps gave the checksum of 40")
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-size", "0"}, {"-steps", "-1"}, {"-size", "2"}, {"-every", "-1"}, {"-bogus"}} {
		errs := mpitest.Start(mpitest.Config{N: 3, BTL: "tcp"}, func(p *mpi.Proc) error {
			_, err := run(p, args, &bytes.Buffer{})
			return err
		})
		if len(errs) == 0 {
			t.Errorf("%v accepted", args)
		}
	}
}
