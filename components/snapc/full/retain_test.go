package full

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"testing"

	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
)

// folders lists the sequence folders of c's reference, from 0 to 9.
func (c *cluster) folders() []int {
	var out []int
	for seq := 0; seq < 10; seq++ {
		if _, err := os.Lstat(c.ref.SeqDir(seq)); err == nil {
			out = append(out, seq)
		}
	}
	return out
}

func (c *cluster) recorded() []int {
	var out []int
	for _, s := range c.meta().Seqs {
		out = append(out, s.Seq)
	}
	return out
}

// With sstore_base_keep 2, each commit leaves the newest two restart
// points and takes a failed checkpoint's leftovers with it; the default
// keeps everything, failures too.
func TestKeepAfterCommit(t *testing.T) {
	for _, tt := range []struct {
		settings []string
		want     []int
	}{
		{nil, []int{0, 1, 2, 3, 4}},
		{[]string{sstore.ParamKeep + "=2"}, []int{3, 4}},
	} {
		t.Run(fmt.Sprint(tt.settings), func(t *testing.T) {
			c := newCluster(t, twoNodes, tt.settings...)
			for i := 0; i < 4; i++ {
				c.ranks[3].failErr = ""
				if i == 1 {
					c.ranks[3].failErr = "disk full" // sequence 1 fails
				}
				_, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil)
				if (err != nil) != (i == 1) {
					t.Fatalf("checkpoint %d: %v", i, err)
				}
			}
			if _, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err != nil {
				t.Fatal(err)
			}
			if got := c.recorded(); !slices.Equal(got, tt.want) {
				t.Errorf("recorded %v, want %v", got, tt.want)
			}
			if got := c.folders(); !slices.Equal(got, tt.want) {
				t.Errorf("folders %v, want %v", got, tt.want)
			}
			point, err := snapshot.ChooseSeq(c.ref, c.meta(), -1)
			if err != nil || point.Seq.Seq != 4 {
				t.Fatalf("newest restart point %+v: %v", point.Seq, err)
			}
			if err := point.VerifyAll(); err != nil {
				t.Errorf("the newest restart point after retention: %v", err)
			}
		})
	}
}

// The coordinator's Remove (gompi-checkpoint PID --remove, --prune):
// between checkpoints, never the only restart point, a dry run removing
// nothing, a prune with sstore_base_keep when no --keep is given.
func TestCoordinatorRemove(t *testing.T) {
	c := newCluster(t, twoNodes, sstore.ParamKeep+"=0")
	for i := 0; i < 3; i++ {
		if _, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		r       snapshot.Removal
		dryRun  bool
		gone    []int
		err     error
		records []int
	}{
		{snapshot.Removal{Seq: 7}, false, nil, fs.ErrNotExist, []int{0, 1, 2}},
		{snapshot.Removal{Seq: -1, Keep: 1}, true, []int{0, 1}, nil, []int{0, 1, 2}},
		{snapshot.Removal{Seq: 1}, false, []int{1}, nil, []int{0, 2}},
		{snapshot.Removal{Seq: -1, Keep: -1}, false, nil, nil, []int{0, 2}}, // sstore_base_keep 0
		{snapshot.Removal{Seq: -1, Keep: 1}, false, []int{0}, nil, []int{2}},
		{snapshot.Removal{Seq: 2}, false, nil, snapshot.ErrBusy, []int{2}},
	}
	for _, tt := range tests {
		gone, _, err := c.g.Remove(t.Context(), tt.r, tt.dryRun)
		if !slices.Equal(gone, tt.gone) || !errors.Is(err, tt.err) {
			t.Errorf("Remove(%+v, dry %v): %v %v, want %v %v", tt.r, tt.dryRun, gone, err, tt.gone, tt.err)
		}
		if got := c.recorded(); !slices.Equal(got, tt.records) || !slices.Equal(c.folders(), tt.records) {
			t.Errorf("after Remove(%+v): records %v, folders %v, want %v", tt.r, got, c.folders(), tt.records)
		}
	}
	// The next checkpoint goes on numbering after what was removed.
	if res, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err != nil || res.Seq != 3 {
		t.Errorf("after the removals: %+v %v", res, err)
	}
}

// The sequence of a migration whose ranks are held is in use: Remove
// keeps it, and removes it once the hold is over.
func TestRemoveKeepsHeldMigration(t *testing.T) {
	c := newCluster(t, threeRanks)
	for i := 0; i < 2; i++ {
		if _, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	res, _, err := c.migrate(1)
	if err != nil || res.Seq != 2 {
		t.Fatalf("migration: %+v %v", res, err)
	}
	if _, _, err := c.g.Remove(t.Context(), snapshot.Removal{Seq: 2}, false); !errors.Is(err, snapshot.ErrBusy) {
		t.Errorf("Remove of the held migration: %v, want ErrBusy", err)
	}
	if gone, _, err := c.g.Remove(t.Context(), snapshot.Removal{Seq: -1, Keep: 1}, false); err != nil || !slices.Equal(gone, []int{0}) {
		t.Errorf("prune during the hold: %v %v, want [0]", gone, err)
	}
	if err := c.g.Release(snapc.Release{}); err != nil {
		t.Fatal(err)
	}
	c.waitReleased()
	if gone, _, err := c.g.Remove(t.Context(), snapshot.Removal{Seq: 2}, false); err != nil || !slices.Equal(gone, []int{2}) {
		t.Errorf("Remove of the migration once released: %v %v", gone, err)
	}
	if got := c.recorded(); !slices.Equal(got, []int{1}) {
		t.Errorf("recorded %v, want [1]", got)
	}
}

// With differential checkpoints, Remove keeps the folder of a sequence
// whose blocks a sequence that stays references, and says so (what
// gompi-checkpoint PID --remove prints), dry run or not.
func TestRemoveKeepsReferencedBlocks(t *testing.T) {
	c := newCluster(t, twoNodes)
	for i := 0; i < 3; i++ {
		if _, err := c.g.Checkpoint(t.Context(), snapc.Request{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range c.meta().Seqs[2].Procs { // seq 2 stores blocks in seq 1
		dir := c.ref.LocalPath(2, p.Rank)
		l, err := snapshot.ReadLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		l.Files = append(l.Files, snapshot.FileRecord{Name: "blocked", Checksum: snapshot.FormatChecksum(0), Blocks: "blocked.blocks", From: "1"})
		if err := snapshot.WriteLocal(dir, l); err != nil {
			t.Fatal(err)
		}
	}
	for _, dry := range []bool{true, false} {
		gone, kept, err := c.g.Remove(t.Context(), snapshot.Removal{Seq: 1}, dry)
		if err != nil || !slices.Equal(gone, []int{1}) || len(kept) != 1 || kept[0].Seq != 1 || !slices.Equal(kept[0].By, []int{2}) {
			t.Errorf("Remove(1, dry %v): %v %v %v", dry, gone, kept, err)
		}
	}
	if got := c.recorded(); !slices.Equal(got, []int{0, 2}) || !slices.Equal(c.folders(), []int{0, 1, 2}) {
		t.Errorf("records %v, folders %v; want [0 2], [0 1 2]", got, c.folders())
	}
}
