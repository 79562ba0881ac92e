package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"gompi/cr/crtest"
	"gompi/frameworks/crs"
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

// TestCheckpointRestart checkpoints the ring at lap 3 and restarts it: the
// restarted run does the remaining laps only, with the same messages.
func TestCheckpointRestart(t *testing.T) {
	j := crtest.NewJob(3, t.TempDir(), "ring")
	wait := j.StartAt(3, crs.Options{})
	args := []string{"-steps", "5", "-size", "4096"}
	var out bytes.Buffer
	mpitest.RunWith(t, j.Config("uds"), func(p *mpi.Proc) error {
		var o bytes.Buffer
		err := run(p, args, &o)
		if p.Rank() == 0 {
			out = o
		}
		return err
	})
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.String(), " us per hop\n"); got != 5 {
		t.Fatalf("%d lap lines in %q, want 5", got, out.String())
	}
	nj, err := j.Restart(0)
	if err != nil {
		t.Fatal(err)
	}
	mpitest.RunWith(t, nj.Config("tcp"), func(p *mpi.Proc) error {
		var o bytes.Buffer
		err := run(p, args, &o)
		if p.Rank() == 0 {
			out = o
		}
		return err
	})
	for lap, want := range map[int]bool{1: false, 2: false, 3: true, 4: true, 5: true} {
		if got := strings.Contains(out.String(), fmt.Sprintf("step %d: lap", lap)); got != want {
			t.Errorf("restarted output %q: lap %d shown: %v, want %v", out.String(), lap, got, want)
		}
	}
}
