package snapshot

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// metaOf builds a GlobalMeta from a picture of its sequences, one letter
// each, oldest first: C committed restart point, F failed (never
// committed), M committed migration, m migration never committed.
func metaOf(picture string) *GlobalMeta {
	g := &GlobalMeta{Job: "j", Ranks: 1}
	for i, c := range picture {
		rec := SeqRecord{Seq: i, Committed: c == 'C' || c == 'M', Migrate: c == 'M' || c == 'm'}
		if rec.Committed {
			rec.Procs = []ProcRecord{{Rank: 0, Node: "n", CRS: "self"}}
		}
		g.Seqs = append(g.Seqs, rec)
	}
	return g
}

func TestPrunable(t *testing.T) {
	tests := []struct {
		name    string
		picture string
		keep    int
		busy    []int
		want    []int
	}{
		{"keep all", "CCCC", 0, nil, nil},
		{"keep all still drops failures", "CFCF", 0, nil, []int{1, 3}},
		{"keep 2 of 4", "CCCC", 2, nil, []int{0, 1}},
		{"keep 1", "CCCC", 1, nil, []int{0, 1, 2}},
		{"keep more than there are", "CC", 5, nil, nil},
		{"failures go whatever keep says", "FCFCF", 2, nil, []int{0, 2, 4}},
		{"only restart point stays, failures after it go", "CFF", 1, nil, []int{1, 2}},
		{"no restart point: failures go", "FF", 1, nil, []int{0, 1}},
		{"busy failure stays", "CCF", 1, []int{2}, []int{0}},
		{"busy old point stays", "CCC", 1, []int{0}, []int{1}},
		{"newest point stays even when busy names nothing", "C", 1, nil, nil},
		{"migrations older than the oldest kept go", "CMCMC", 2, nil, []int{0, 1}},
		{"migrations stay while keep is 0", "CMC", 0, nil, nil},
		{"failed migration goes", "CmC", 0, nil, []int{1}},
		{"empty", "", 3, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := metaOf(tt.picture).Prunable(tt.keep, tt.busy...)
			if !slices.Equal(got, tt.want) {
				t.Errorf("%s keep %d busy %v: %v, want %v", tt.picture, tt.keep, tt.busy, got, tt.want)
			}
		})
	}
}

func TestCanRemove(t *testing.T) {
	tests := []struct {
		picture string
		seq     int
		busy    []int
		want    error
	}{
		{"CC", 0, nil, nil},
		{"CC", 1, nil, nil},
		{"CF", 0, nil, ErrBusy},
		{"CF", 1, nil, nil},
		{"CC", 0, []int{0}, ErrBusy},
		{"CC", 7, nil, fs.ErrNotExist},
		{"MC", 1, nil, ErrBusy},
		{"MC", 0, nil, nil},
	}
	for _, tt := range tests {
		err := metaOf(tt.picture).CanRemove(tt.seq, tt.busy...)
		if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("%s remove %d busy %v: %v, want %v", tt.picture, tt.seq, tt.busy, err, tt.want)
		}
	}
}

// RemoveSeqs drops the records first and the folders after, finds the
// folders a crash left behind, and removes a linked sequence folder's
// link, never what it leads to.
func TestRemoveSeqs(t *testing.T) {
	ref := Ref{Dir: t.TempDir(), Name: RefName("j")}
	g := metaOf("CFCC")
	// 4 and 9 are past NextSeq: checkpoints begun after g was read.
	for _, seq := range []int{0, 1, 3, 4, 9} {
		if err := os.MkdirAll(ref.LocalPath(seq, 0), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(t.TempDir(), "precious")
	if err := os.MkdirAll(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o600)
	if err := os.Symlink(outside, ref.SeqDir(2)); err != nil {
		t.Fatal(err)
	}
	if err := WriteGlobal(ref, g); err != nil {
		t.Fatal(err)
	}
	orphans, err := Orphans(ref, g)
	if err != nil || len(orphans) != 0 {
		t.Fatalf("Orphans: %v %v, want none", orphans, err)
	}
	gone := g.Prunable(1)
	if !slices.Equal(gone, []int{0, 1, 2}) {
		t.Fatalf("Prunable: %v", gone)
	}
	if err := RemoveSeqs(ref, g, gone); err != nil {
		t.Fatal(err)
	}
	after, err := ReadGlobal(ref)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after.seqNumbers(), []int{3}) {
		t.Errorf("records left: %v, want [3]", after.seqNumbers())
	}
	for _, seq := range gone {
		if _, err := os.Lstat(ref.SeqDir(seq)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("sequence %d folder: %v, want it gone", seq, err)
		}
	}
	for _, p := range []string{ref.SeqDir(3), ref.SeqDir(4), ref.SeqDir(9), filepath.Join(outside, "keep")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v, want it kept", p, err)
		}
	}
	// A crash after the rewrite: the folder of a sequence no longer
	// recorded is an orphan once a later sequence is recorded.
	os.MkdirAll(ref.SeqDir(1), 0o700)
	after.Seqs = append(after.Seqs, SeqRecord{Seq: 10})
	if orphans, err := Orphans(ref, after); err != nil || !slices.Equal(orphans, []int{1, 4, 9}) {
		t.Errorf("Orphans: %v %v, want [1 4 9]", orphans, err)
	}
}

// A reference whose folder is a link is refused before anything changes.
func TestRemoveSeqsRefusesLinkedReference(t *testing.T) {
	real := Ref{Dir: t.TempDir(), Name: RefName("j")}
	if err := os.MkdirAll(real.SeqDir(0), 0o700); err != nil {
		t.Fatal(err)
	}
	g := metaOf("CC")
	if err := WriteGlobal(real, g); err != nil {
		t.Fatal(err)
	}
	link := Ref{Dir: t.TempDir(), Name: real.Name}
	if err := os.Symlink(real.Path(), link.Path()); err != nil {
		t.Fatal(err)
	}
	if err := RemoveSeqs(link, g, []int{0}); !errors.Is(err, ErrUnsafeRef) {
		t.Fatalf("RemoveSeqs through a link: %v, want ErrUnsafeRef", err)
	}
	if _, err := os.Stat(real.SeqDir(0)); err != nil {
		t.Errorf("sequence 0 behind the link: %v", err)
	}
	if after, err := ReadGlobal(real); err != nil || len(after.Seqs) != 2 {
		t.Errorf("metadata behind the link changed: %v %v", after, err)
	}
}

// TestKeptBlocks: with differential checkpoints (File records whose From
// lists older sequences), removing a sequence that sequences which stay
// reference keeps its folder, says so, and a later prune spares it as an
// orphan until nothing references it.
func TestKeptBlocks(t *testing.T) {
	ref := Ref{Dir: t.TempDir(), Name: "r.ckpt"}
	g := metaOf("CCCCC")
	// Sequence s's file references from[s].
	from := map[int]string{0: "", 1: "0", 2: "0,1", 3: "", 4: "3"}
	for s := range 5 {
		dir := ref.LocalPath(s, 0)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		rec := FileRecord{Name: "a", Size: 1, Checksum: FormatChecksum(1), Blocks: "a.blocks", From: from[s]}
		if err := WriteLocal(dir, &LocalMeta{Rank: 0, CRS: "self", Files: []FileRecord{rec}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteGlobal(ref, g); err != nil {
		t.Fatal(err)
	}
	exists := func(s int) bool { _, err := os.Stat(ref.SeqDir(s)); return err == nil }

	if got := KeptBlocks(ref, g, []int{0, 1}); len(got) != 2 || got[0].Seq != 0 || !slices.Equal(got[0].By, []int{2}) || got[1].Seq != 1 || !slices.Equal(got[1].By, []int{2}) {
		t.Errorf("KeptBlocks(0, 1) = %v", got)
	}
	// Prune to the newest 3 (2, 3, 4): 0 and 1 lose their records, keep
	// their folders for 2.
	gone, err := Removal{Seq: -1, Keep: 3}.Plan(ref, g)
	if err != nil || !slices.Equal(gone, []int{0, 1}) {
		t.Fatalf("Plan = %v, %v", gone, err)
	}
	kept, err := RemoveSeqsKept(ref, g, gone)
	if err != nil || len(kept) != 2 || kept[0].String() != "sequence 0's folder (sequences 2 store blocks in it)" {
		t.Fatalf("RemoveSeqsKept = %v, %v", kept, err)
	}
	if !exists(0) || !exists(1) {
		t.Errorf("a referenced folder went")
	}
	g, _ = ReadGlobal(ref)
	if !slices.Equal(g.Committed(), []int{2, 3, 4}) {
		t.Errorf("committed %v", g.Committed())
	}
	// A prune that takes nothing new does not list the kept folders.
	if gone, err := (Removal{Seq: -1, Keep: 3}).Plan(ref, g); err != nil || len(gone) != 0 {
		t.Errorf("second prune plans %v, %v", gone, err)
	}
	// Removing 2 frees 0 and 1: the next prune takes them as orphans.
	if kept, err := RemoveSeqsKept(ref, g, []int{2}); err != nil || len(kept) != 0 || exists(2) {
		t.Fatalf("remove 2: kept %v, %v", kept, err)
	}
	g, _ = ReadGlobal(ref)
	gone, err = Removal{Seq: -1, Keep: 3}.Plan(ref, g)
	if err != nil || !slices.Equal(gone, []int{0, 1}) {
		t.Fatalf("Plan after 2 went = %v, %v", gone, err)
	}
	if kept, err := RemoveSeqsKept(ref, g, gone); err != nil || len(kept) != 0 || exists(0) || exists(1) {
		t.Errorf("orphans: kept %v, %v", kept, err)
	}
	// 3 is referenced by 4: --remove 3 keeps its folder.
	if kept, err := RemoveSeqsKept(ref, g, []int{3}); err != nil || len(kept) != 1 || !slices.Equal(kept[0].By, []int{4}) || !exists(3) {
		t.Errorf("remove 3: kept %v, %v", kept, err)
	}
}
