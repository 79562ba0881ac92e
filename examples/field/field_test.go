package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"gompi/components/filem/raw"
	"gompi/components/sstore/stage"
	"gompi/cr"
	"gompi/cr/crtest"
	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/compress"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// 640×640 cells over 2 ranks: 1.6 MiB of field per rank, above the size
// from which the stage component samples a file.
var args = []string{"-side", "640", "-steps", "20"}

func TestFieldIsSmoothAndNeverZero(t *testing.T) {
	f := Fill(64, 0, 64)
	for i, v := range f {
		if v == 0 || v < 250 || v > 350 {
			t.Fatalf("cell %d = %v: want a temperature around 300, never zero", i, v)
		}
	}
	g := append([]float64(nil), f...)
	Step(g, 64, 0, 1)
	for i := range f {
		if f[i] == g[i] {
			t.Fatalf("cell %d unchanged by a step", i)
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, a := range [][]string{{"-side", "1"}, {"-steps", "-1"}, {"-bogus"}} {
		errs := mpitest.Start(mpitest.Config{N: 2, BTL: "tcp"}, func(p *mpi.Proc) error {
			_, err := run(p, a, &bytes.Buffer{})
			return err
		})
		if len(errs) == 0 {
			t.Errorf("%v accepted", a)
		}
	}
}

// stageModule returns a provisioned stage SStore module of node n1 with
// zstd and the byte shuffle on, its node-local folder root.
func stageModule(t *testing.T, root string) sstore.Module {
	params := mca.NewParams()
	set := frameworks.New(params)
	set.SStore.Register(stage.New())
	set.FileM.Register(raw.New())
	var s []mca.Setting
	for _, kv := range [][2]string{{"sstore", "stage"}, {stage.ParamLocalDir, root}, {stage.ParamCompress, compress.Zstd}, {stage.ParamShuffle, compress.ShuffleOn}} {
		s = append(s, mca.Setting{Name: kv[0], Value: kv[1], Origin: mca.Origin{Source: mca.SourceCommandLine}})
	}
	vals, err := params.ResolveSettings(s)
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.SStore.SelectOne(context.Background(), vals, mca.RoleDaemon, nil)
	if err != nil {
		t.Fatal(err)
	}
	fc, err := set.FileM.SelectOne(context.Background(), vals, mca.RoleDaemon, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mca.Provision(context.Background(), c.Module, sstore.Host{Node: "n1", FileM: fc.Module}); err != nil {
		t.Fatal(err)
	}
	return c.Module
}

// TestCheckpointRestartShuffled checkpoints the field at step 7, drains
// the ranks' snapshots to global storage through the stage component with
// zstd and the shuffle on, replaces them by the copies fetched back from
// there (decompressed, unshuffled and verified) and restarts from them:
// the restarted run ends with the uninterrupted run's checksums.
func TestCheckpointRestartShuffled(t *testing.T) {
	want := make([]string, 2)
	mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
		s, err := run(p, args, &bytes.Buffer{})
		want[p.Rank()] = s
		return err
	})
	j := crtest.NewJob(2, t.TempDir(), "field")
	wait := j.StartAt(7, crs.Options{})
	mpitest.RunWith(t, j.Config("tcp"), func(p *mpi.Proc) error {
		_, err := run(p, args, &bytes.Buffer{})
		return err
	})
	res, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	ref := j.Ref()
	global := snapshot.Ref{Dir: t.TempDir(), Name: ref.Name}
	if err := os.MkdirAll(global.Path(), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var locals []sstore.Local
	for rank := range 2 {
		locals = append(locals, sstore.Local{Rank: rank, Dir: ref.LocalPath(res.Seq, rank)})
	}
	if err := stageModule(t, t.TempDir()).Sync(ctx, global, res.Seq, locals); err != nil {
		t.Fatal(err)
	}
	fetcher := stageModule(t, t.TempDir()) // another node: no cached copy
	for rank := range 2 {
		meta, err := snapshot.ReadLocal(global.LocalPath(res.Seq, rank))
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range meta.Files {
			if rec.Name != cr.AppStateFile {
				continue
			}
			st, err := os.Stat(global.LocalPath(res.Seq, rank) + "/" + rec.Stored)
			if (rec.Filter != compress.Shuffle8 && rec.Filter != compress.DeltaShuffle) || err != nil || float64(st.Size()) > 0.8*float64(rec.Size) {
				t.Errorf("rank %d: %s stored %+v (%v): want shuffled and zstd below 80 %% of its size", rank, rec.Name, rec, err)
			}
			t.Logf("rank %d: %s %d bytes stored in %d (ratio %.2f)", rank, rec.Name, rec.Size, st.Size(), float64(rec.Size)/float64(st.Size()))
		}
		dir, err := fetcher.Fetch(ctx, global, res.Seq, rank)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(locals[rank].Dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dir, locals[rank].Dir); err != nil {
			t.Fatal(err)
		}
	}
	nj, err := j.Restart(res.Seq)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, 2)
	var out bytes.Buffer
	mpitest.RunWith(t, nj.Config("uds"), func(p *mpi.Proc) error {
		var o bytes.Buffer
		s, err := run(p, args, &o)
		got[p.Rank()] = s
		if p.Rank() == 0 {
			out = o
		}
		return err
	})
	for r := range want {
		if got[r] != want[r] {
			t.Errorf("rank %d: restarted checksum %s, uninterrupted %s", r, got[r], want[r])
		}
	}
	if !strings.Contains(out.String(), "field: rank 0 of 2 checksum "+want[0]+"\n") {
		t.Errorf("restarted output %q lacks rank 0's checksum line", out.String())
	}
}
