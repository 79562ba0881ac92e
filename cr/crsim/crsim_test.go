package crsim_test

import (
	"os"
	"slices"
	"strconv"
	"testing"

	"gompi/cr/crsim"
)

// longEnv runs the simulations of 256 and 1,024 ranks (minutes, a few
// GiB): scripts/bench-scale.sh sets it.
const longEnv = "GOMPI_SCALE_LONG"

// TestScale checkpoints a halo-exchange job of 64 simulated ranks on 8
// nodes twice, through a daemon tree of radix 2 and flat, lets it run to
// its end, and restarts it from each snapshot: every run ends with what
// the program computes without MPI. Each checkpoint costs the ranks
// 4(N-1) frames (the bookmark exchange and the agreement that every rank
// saved, over the control tree), gompirun talks to at most radix daemons,
// and the tree is as deep as its shape says. With GOMPI_SCALE_LONG=1 it
// runs 256 and 1,024 ranks too.
func TestScale(t *testing.T) {
	sizes := []int{64}
	if os.Getenv(longEnv) != "" {
		sizes = append(sizes, 256, 1024)
	}
	for _, n := range sizes {
		for _, radix := range []int{2, 0} {
			name := strconv.Itoa(n) + "/radix=" + strconv.Itoa(radix)
			if radix == 0 {
				name = strconv.Itoa(n) + "/flat"
			}
			t.Run(name, func(t *testing.T) {
				scale(t, crsim.Config{Ranks: n, Radix: radix, Dir: t.TempDir(), Steps: 8, HoldAt: 4})
			})
		}
	}
}

func scale(t *testing.T, cfg crsim.Config) {
	want := crsim.Expected(cfg)
	s, err := crsim.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int
	for range 2 {
		f, err := s.Checkpoint(t.Context())
		if err != nil {
			s.Finish()
			t.Fatal(err)
		}
		t.Logf("%+v", f)
		seqs = append(seqs, f.Seq)
		n := uint64(cfg.Ranks)
		if f.RankFrames != 4*(n-1) {
			t.Errorf("the ranks wrote %d frames for a checkpoint, want 4(N-1) = %d", f.RankFrames, 4*(n-1))
		}
		nodes := (cfg.Ranks + 7) / 8
		wantFanout, wantDepth := nodes, 1
		if cfg.Radix > 0 {
			wantFanout, wantDepth = cfg.Radix, depth(nodes, cfg.Radix)
		}
		if f.Fanout != wantFanout || f.Depth != wantDepth {
			t.Errorf("gompirun talks to %d daemons over a tree %d deep, want %d and %d", f.Fanout, f.Depth, wantFanout, wantDepth)
		}
		if f.Coordination <= 0 || f.Coordination > f.Commit {
			t.Errorf("coordination %v, commit %v", f.Coordination, f.Commit)
		}
	}
	got, err := s.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("checkpointed run: digests differ from the program's (first ranks %x, want %x)", got[:4], want[:4])
	}
	for _, seq := range seqs {
		got, err := crsim.Restart(cfg, seq)
		if err != nil {
			t.Fatalf("restart from %d: %v", seq, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("restart from %d: digests differ from the program's", seq)
		}
	}
}

// depth of the routed radix tree of nodes daemons below gompirun.
func depth(nodes, radix int) int {
	d, v := 0, nodes
	for ; v > 0; v = (v - 1) / radix {
		d++
	}
	return d
}
