package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

func TestChecksumIndependentOfRanks(t *testing.T) {
	args := []string{"-size", "37", "-steps", "40", "-every", "10"}
	runs := []mpitest.Config{
		{N: 1, BTL: "tcp"},
		{N: 2, BTL: "tcp"},
		{N: 3, BTL: "uds"},
		{N: 4, BTL: "tcp,uds", Nodes: []string{"a", "a", "b", "b"}},
	}
	var first string
	for _, cfg := range runs {
		t.Run(fmt.Sprintf("n=%d/%s", cfg.N, cfg.BTL), func(t *testing.T) {
			var out bytes.Buffer
			var sum string
			mpitest.RunWith(t, cfg, func(p *mpi.Proc) error {
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
			if strings.Count(out.String(), "residual") != 5 {
				t.Errorf("output %q: want 4 progress lines and the summary", out.String())
			}
			if first == "" {
				first = sum
			} else if sum != first {
				t.Fatalf("checksum %s, the 1-rank run gave %s", sum, first)
			}
		})
	}
}

func TestChecksumChangesWithInput(t *testing.T) {
	sums := map[string]bool{}
	for _, args := range [][]string{{"-size", "16", "-steps", "5"}, {"-size", "16", "-steps", "6"}, {"-size", "17", "-steps", "5"}} {
		mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
			s, err := run(p, args, &bytes.Buffer{})
			if p.Rank() == 0 {
				sums[s] = true
			}
			return err
		})
	}
	if len(sums) != 3 {
		t.Fatalf("different runs gave equal checksums: %v", sums)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-size", "0"}, {"-steps", "-1"}, {"-size", "2"}, {"-bogus"}} {
		errs := mpitest.Start(mpitest.Config{N: 3, BTL: "tcp"}, func(p *mpi.Proc) error {
			_, err := run(p, args, &bytes.Buffer{})
			return err
		})
		if len(errs) == 0 {
			t.Errorf("%v accepted", args)
		}
	}
}
