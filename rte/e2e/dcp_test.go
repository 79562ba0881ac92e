package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gompi/frameworks/sstore/blocks"
	"gompi/frameworks/sstore/snapshot"
)

// TestDifferentialCheckpoints: heat on 4 ranks over two nodes checkpoints
// itself 10 times with sstore stage's differential checkpoints (zstd per
// block, a full sequence every 4); then it is restarted from each
// sequence in turn, oldest first, and every restart ends with the
// uninterrupted checksum, each after the sequences before it were
// removed: a removal keeps the folders newer sequences store blocks in,
// and says so. Last, a byte flipped in a block that the newest sequence
// references in an older one's pack is found by gompi-restart and, once
// the nodes' own copies are gone, by each node's fetch, which name the
// sequence, file and block: nothing restarts from it.
func TestDifferentialCheckpoints(t *testing.T) {
	heat := []string{filepath.Join(bin, "heat"), "-size", "512", "-steps", "100"}
	code, out, errs := start(t, append([]string{"-np", "1"}, heat...)...).wait()
	want, ok := heatChecksum(out, "")
	if code != 0 || !ok {
		t.Fatalf("heat -np 1: status %d %q\n%s", code, out, errs)
	}
	dir, local := t.TempDir(), t.TempDir()
	j := start(t, append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes), "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", dir, "--mca", "sstore", "stage",
		"--mca", "sstore_stage_local_snapshot_dir", local, "--mca", "sstore_stage_cache", "0",
		"--mca", "sstore_stage_compress", "zstd", "--mca", "sstore_stage_differential", "on",
		"--mca", "sstore_stage_block_size", "4KiB", "--mca", "sstore_stage_full_every", "4"},
		append(heat, "-checkpoint-every", "10")...)...)
	code, out, errs = j.wait()
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 {
		t.Fatalf("global snapshot folder: %v, %v; want one reference", ents, err)
	}
	ref := snapshot.Ref{Dir: dir, Name: ents[0].Name()}
	if got, _ := heatChecksum(out, ""); code != 0 || got != want {
		t.Fatalf("heat checkpointing itself: status %d, checksum %q, want %q\n%s", code, got, want, errs)
	}
	if yes, no := committed(t, ref); len(yes) != 10 || len(no) != 0 {
		t.Fatalf("committed %v, not committed %v; want 0-9", yes, no)
	}
	// Heat's front moves down a row a step: between two checkpoints
	// only the rows above it change, all in rank 0 (128 rows of 512), and
	// each rank's first block (step and residual).
	for seq := range 10 {
		own, total := blockCounts(t, ref, seq)
		t.Logf("seq %d stores %d of its %d blocks", seq, own, total)
		if full := seq%4 == 0; full && own != total || !full && own*2 > total {
			t.Errorf("seq %d stores %d of its %d blocks (a full one every 4)", seq, own, total)
		}
	}

	kept := 0
	for seq := range 10 {
		r := startProg(t, "gompi-restart", "-s", strconv.Itoa(seq), "--hostfile", hostfile(t, twoNodes), ref.Path())
		code, out, errs := r.wait()
		if got, _ := heatChecksum(out, ""); code != 0 || got != want {
			t.Fatalf("restart from seq %d: status %d, checksum %q, want %q\n%s", seq, code, got, want, errs)
		}
		if seq == 9 {
			break
		}
		code, rout, rerrs := tool(t, "gompi-checkpoint", "--remove", strconv.Itoa(seq), ref.Path())
		if code != 0 || !strings.HasPrefix(rout, fmt.Sprintf("Removed from %s: sequences %d\n", ref, seq)) {
			t.Fatalf("--remove %d: status %d\n%s%s", seq, code, rout, rerrs)
		}
		if strings.Contains(rout, fmt.Sprintf("Kept sequence %d's folder (sequences ", seq)) {
			kept++
		}
	}
	if kept == 0 {
		t.Errorf("no removal kept a folder that newer sequences store blocks in")
	}
	if yes, _ := committed(t, ref); !slices.Equal(yes, []int{9}) {
		t.Errorf("committed after the removals: %v", yes)
	}
	// The kept folders nothing references any more go with a prune; seq
	// 8's, whose blocks seq 9 uses, stays.
	if code, out, errs := tool(t, "gompi-checkpoint", "--prune", ref.Path()); code != 0 || !strings.HasPrefix(out, "Removed from") {
		t.Errorf("--prune: status %d\n%s%s", code, out, errs)
	}
	var folders []int
	for seq := range 10 {
		if _, err := os.Stat(ref.SeqDir(seq)); err == nil {
			folders = append(folders, seq)
		}
	}
	if !slices.Equal(folders, []int{8, 9}) {
		t.Errorf("folders after the prune: %v, want [8 9]", folders)
	}

	// Damage a block seq 9 references in seq 8's pack (seq 8 is full, 9
	// differential; 8's record is gone, its folder kept).
	seq, rank, file, index := damageReferenced(t, ref, 9)
	// The nodes' caches and partner copies of seq 9 (the restarts above
	// left verified ones) would serve the restart: without them each
	// node reads global storage.
	ents, _ = os.ReadDir(local)
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(local, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	code, out2, errs := tool(t, "gompi-restart", "--hostfile", hostfile(t, twoNodes), ref.Path())
	name := fmt.Sprintf("sequence %d, file %s, block %d", seq, file, index)
	if code == 0 || !strings.Contains(errs, name) || !strings.Contains(errs, "damaged") {
		t.Errorf("restart over a damaged block of rank %d: status %d, stderr:\n%s\nwant it to name %q\n%s", rank, code, errs, name, out2)
	}
	t.Logf("gompi-restart over a damaged block: %s", errs)
}

// blockCounts counts the blocks of seq's files, and those its packs hold.
func blockCounts(t *testing.T, ref snapshot.Ref, seq int) (own, total int) {
	t.Helper()
	for rank := range 4 {
		dir := ref.LocalPath(seq, rank)
		meta, err := snapshot.ReadLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range meta.Files {
			if f.Blocks == "" {
				t.Fatalf("seq %d rank %d: %s not stored as blocks", seq, rank, f.Name)
			}
			m, err := blocks.ReadManifest(filepath.Join(dir, f.Blocks), seq)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range m.Blocks {
				if e.Seq == seq {
					own++
				}
			}
			total += len(m.Blocks)
		}
	}
	return own, total
}

// damageReferenced flips a byte of the first block that sequence seq of
// ref stores in an older sequence's pack, and says which.
func damageReferenced(t *testing.T, ref snapshot.Ref, seq int) (older, rank int, file string, index int) {
	t.Helper()
	for rank := range 4 {
		dir := ref.LocalPath(seq, rank)
		meta, err := snapshot.ReadLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range meta.Files {
			if f.From == "" {
				continue
			}
			m, err := blocks.ReadManifest(filepath.Join(dir, f.Blocks), seq)
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range m.Blocks {
				if e.Seq == seq {
					continue
				}
				pack := filepath.Join(ref.LocalPath(e.Seq, rank), m.Packs[e.Seq])
				b, err := os.ReadFile(pack)
				if err != nil {
					t.Fatal(err)
				}
				b[e.Off+e.Len/2] ^= 0x10
				if err := os.WriteFile(pack, b, 0o600); err != nil {
					t.Fatal(err)
				}
				return e.Seq, rank, f.Name, i
			}
		}
	}
	t.Fatalf("sequence %d references no block of an older sequence", seq)
	return
}

// TestCRIUDifferential: plainheat's CRIU images (crs=criu) checkpointed
// twice with differential checkpoints: the second sequence stores only
// some blocks of the images and references the first's; restarted from
// it, the job ends with the uninterrupted checksum.
func TestCRIUDifferential(t *testing.T) {
	dir := t.TempDir()
	j := criuJobWith(t, dir, append(criuParams(), "--mca", "sstore", "stage",
		"--mca", "sstore_stage_local_snapshot_dir", t.TempDir(), "--mca", "sstore_stage_cache", "0",
		"--mca", "sstore_stage_differential", "on", "--mca", "sstore_stage_block_size", "64KiB"))
	ref := refOf(t, j, dir)
	checkpointCRIU(t, j, ref.Name, "0")
	checkpointCRIU(t, j, ref.Name, "1", "--term")
	if code, _, errs := j.wait(); code != 0 {
		t.Fatalf("job after --term: status %d\n%s", code, errs)
	}
	own, total := blockCounts(t, ref, 1)
	t.Logf("the second sequence stores %d of its %d blocks", own, total)
	if own == 0 || own >= total {
		t.Errorf("the second sequence stores %d of its %d blocks", own, total)
	}
	restartCRIU(t, ref.Path(), plainSum(t))
}
