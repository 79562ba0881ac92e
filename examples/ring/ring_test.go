package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

func TestRing(t *testing.T) {
	for _, n := range []int{1, 3} {
		for _, btl := range []string{"tcp", "uds"} {
			t.Run(fmt.Sprintf("n=%d/%s", n, btl), func(t *testing.T) {
				var out bytes.Buffer
				mpitest.Run(t, n, btl, func(p *mpi.Proc) error {
					var o bytes.Buffer
					err := run(p, []string{"-steps", "4", "-size", "8192"}, &o)
					if p.Rank() == 0 {
						out = o
					}
					return err
				})
				if got := strings.Count(out.String(), " us per hop\n"); got != 4 {
					t.Fatalf("%d lap lines in %q, want 4", got, out.String())
				}
			})
		}
	}
}
