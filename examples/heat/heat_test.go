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

// TestCheckpointRestart checkpoints heat at step k (the top of the k-th
// iteration), lets it finish, restarts it from the snapshot over another
// transport, and gets the uninterrupted checksum both times.
func TestCheckpointRestart(t *testing.T) {
	args := []string{"-size", "37", "-steps", "30"}
	var want string
	mpitest.Run(t, 3, "tcp", func(p *mpi.Proc) error {
		s, err := run(p, args, &bytes.Buffer{})
		if p.Rank() == 0 {
			want = s
		}
		return err
	})
	for _, k := range []uint64{1, 17, 30} {
		t.Run(fmt.Sprintf("step=%d", k), func(t *testing.T) {
			j := crtest.NewJob(3, t.TempDir(), "heat")
			wait := j.StartAt(k, crs.Options{})
			sums := make([]string, 2)
			mpitest.RunWith(t, j.Config("tcp"), func(p *mpi.Proc) error {
				s, err := run(p, args, &bytes.Buffer{})
				if p.Rank() == 0 {
					sums[0] = s
				}
				return err
			})
			res, err := wait()
			if err != nil {
				t.Fatal(err)
			}
			nj, err := j.Restart(res.Seq)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			mpitest.RunWith(t, nj.Config("uds"), func(p *mpi.Proc) error {
				var o bytes.Buffer
				s, err := run(p, args, &o)
				if p.Rank() == 0 {
					sums[1], out = s, o
				}
				return err
			})
			if sums[0] != want || sums[1] != want {
				t.Fatalf("checksums: uninterrupted %s, with a checkpoint %s, restarted %s", want, sums[0], sums[1])
			}
			if !strings.Contains(out.String(), "checksum: "+want+"\n") {
				t.Fatalf("restarted output %q lacks the checksum line", out.String())
			}
		})
	}
}

// TestRestartWrongSize: a restart with another -size is refused with what
// to do.
func TestRestartWrongSize(t *testing.T) {
	j := crtest.NewJob(2, t.TempDir(), "heat")
	wait := j.StartAt(3, crs.Options{})
	mpitest.RunWith(t, j.Config("tcp"), func(p *mpi.Proc) error {
		_, err := run(p, []string{"-size", "20", "-steps", "5"}, &bytes.Buffer{})
		return err
	})
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	nj, err := j.Restart(0)
	if err != nil {
		t.Fatal(err)
	}
	errs := mpitest.Start(nj.Config("tcp"), func(p *mpi.Proc) error {
		_, err := run(p, []string{"-size", "24", "-steps", "5"}, &bytes.Buffer{})
		return err
	})
	if len(errs) == 0 || !strings.Contains(errs[0].Error(), "+10 of 20 (176 bytes each, a distributed array (ProtectDistributed)): restart with the sizes of the checkpointed run") {
		t.Fatalf("restart with another -size: %v", errs)
	}
}
