package stage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gompi/frameworks/filem/filemtest"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/blocks"
	"gompi/frameworks/sstore/compress"
	"gompi/frameworks/sstore/snapshot"
)

// commit records seqs as committed checkpoints of one rank in the
// fixture's reference, as the global coordinator does after a Sync.
func (f *fixture) commit(t *testing.T, seqs ...int) {
	t.Helper()
	g := &snapshot.GlobalMeta{Job: "4711", Ranks: 1}
	for _, s := range seqs {
		g.Seqs = append(g.Seqs, snapshot.SeqRecord{Seq: s, Started: time.Unix(1, 0), Finished: time.Unix(2, 0), Committed: true,
			Procs: []snapshot.ProcRecord{{Rank: 0, Node: f.node, CRS: "self"}}})
	}
	if err := snapshot.WriteGlobal(f.ref, g); err != nil {
		t.Fatal(err)
	}
}

// TestDifferential drains sequences of a rank whose state changes in one
// block each time: each differential sequence stores about one block,
// every sequence fetches back (from global storage) as written, with and
// without compression, a full one comes every sstore_stage_full_every,
// and a damaged block of an older sequence is named when a newer one is
// fetched.
func TestDifferential(t *testing.T) {
	const bs = 16 << 10
	for _, alg := range []string{compress.None, compress.Zstd} {
		t.Run(alg, func(t *testing.T) {
			f := newFixture(t, nil, ParamCompress+"="+alg, ParamDifferential+"=on", ParamBlockSize+"=16KiB", ParamFullEvery+"=3", ParamCache+"=0")
			ctx := context.Background()
			field := smoothField(20 * bs)
			var snaps []rankFiles
			var seqs []int
			for seq := range 5 {
				field = bytes.Clone(field)
				copy(field[(seq+3)*bs:], random(100, byte(seq))) // one block changes
				snap := rankFiles{"field": field, "small": []byte("step " + string(rune('0'+seq)))}
				l := f.write(t, seq, 0, snap)
				if err := f.m.Sync(ctx, f.ref, seq, []sstore.Local{l}); err != nil {
					t.Fatal(err)
				}
				seqs = append(seqs, seq)
				f.commit(t, seqs...)
				snaps = append(snaps, snap)

				meta, err := snapshot.ReadLocal(f.ref.LocalPath(seq, 0))
				if err != nil {
					t.Fatal(err)
				}
				rec := meta.Files[0]
				man, err := blocks.ReadManifest(filepath.Join(f.ref.LocalPath(seq, 0), rec.Blocks), seq)
				if err != nil {
					t.Fatal(err)
				}
				full := seq%3 == 0
				if (man.Chain == 0) != full || rec.Name != "field" || (rec.From == "") != full {
					t.Errorf("seq %d: chain %d, from %q; want full %v", seq, man.Chain, rec.From, full)
				}
				stored := 0
				for _, e := range man.Blocks {
					if e.Seq == seq {
						stored++
					}
				}
				if want := map[bool]int{true: 20, false: 1}[full]; stored != want {
					t.Errorf("seq %d stored %d blocks, want %d", seq, stored, want)
				}
			}
			for seq, snap := range snaps {
				dir, err := f.m.Fetch(ctx, f.ref, seq, 0)
				if err != nil {
					t.Fatal(err)
				}
				sameSnapshot(t, dir, 0, snap)
				f.m.Remove(ctx, f.ref, seq)
			}
			noTemporaries(t, f.nodeDir())

			// Seq 4 references seq 3's blocks: damage one, fetch 4.
			flipByte(t, filepath.Join(f.ref.LocalPath(3, 0), "field.pack"), 10*bs+7)
			_, err := f.m.Fetch(ctx, f.ref, 4, 0)
			if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), "sequence 3, file field, block 10") {
				t.Errorf("fetch over a damaged block: %v", err)
			}
			// gompi-restart's own check names it too.
			meta, _ := snapshot.ReadLocal(f.ref.LocalPath(4, 0))
			err = compress.Verify(ctx, f.ref.LocalPath(4, 0), meta)
			if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), "sequence 3, file field, block 10") {
				t.Errorf("verify over a damaged block: %v", err)
			}
		})
	}
}

// TestDifferentialBase: a base sequence that cannot serve (its manifest
// damaged, or no committed sequence) makes the drain full, not a failure;
// the next one has a base again.
func TestDifferentialBase(t *testing.T) {
	f := newFixture(t, nil, ParamDifferential+"=on", ParamBlockSize+"=4KiB")
	ctx := context.Background()
	data := compressible(40<<10, 1)
	for seq := range 4 {
		l := f.write(t, seq, 0, rankFiles{"a": data})
		if seq == 2 {
			os.WriteFile(filepath.Join(f.ref.LocalPath(1, 0), "a.blocks"), []byte("garbage"), 0o600)
		}
		if err := f.m.Sync(ctx, f.ref, seq, []sstore.Local{l}); err != nil {
			t.Fatal(err)
		}
		committed := []int{1, 2, 3}[:max(0, seq)] // seq 0 is never committed: seq 1 has no base
		f.commit(t, committed...)
		meta, _ := snapshot.ReadLocal(f.ref.LocalPath(seq, 0))
		if want := map[int]string{3: "2"}[seq]; meta.Files[0].From != want {
			t.Errorf("seq %d references %q, want %q", seq, meta.Files[0].From, want)
		}
	}
}

// TestDifferentialSFTP: differential checkpoints with the global folder
// reached over sftp: the base's metadata and manifests are read, and the
// packs fetched back, through FileM.
func TestDifferentialSFTP(t *testing.T) {
	s := filemtest.StartSSHD(t)
	sp := &spy{Module: sftpModule(t, s)}
	f := newFixture(t, nil, ParamDifferential+"=on", ParamBlockSize+"=4KiB", ParamCompress+"=zstd")
	if err := f.m.Provision(context.Background(), sstore.Host{Node: "n1", FileM: sp}); err != nil {
		t.Fatal(err)
	}
	local := f.ref
	f.ref.Dir = fmt.Sprintf("sftp://root@127.0.0.1:%d%s", s.Port, f.global)
	ctx := context.Background()
	data := random(64<<10, 1)
	var snaps []rankFiles
	for seq := range 3 {
		data = bytes.Clone(data)
		data[seq*4096] ^= 1
		snap := rankFiles{"state": data}
		if err := f.m.Sync(ctx, f.ref, seq, []sstore.Local{f.write(t, seq, 0, snap)}); err != nil {
			t.Fatal(err)
		}
		lf := *f
		lf.ref = local
		lf.commit(t, []int{0, 1, 2}[:seq+1]...)
		snaps = append(snaps, snap)
	}
	meta, err := snapshot.ReadLocal(local.LocalPath(2, 0))
	if err != nil || meta.Files[0].From != "0,1" {
		t.Fatalf("seq 2 references %q, want 0,1: %v", meta.Files[0].From, err)
	}
	for seq, snap := range snaps {
		f.m.Remove(ctx, f.ref, seq)
		dir, err := f.m.Fetch(ctx, f.ref, seq, 0)
		if err != nil {
			t.Fatal(err)
		}
		sameSnapshot(t, dir, 0, snap)
	}
	noTemporaries(t, f.nodeDir())
}
