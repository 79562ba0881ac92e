package stage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gompi/frameworks/filem"
	"gompi/frameworks/filem/filemtest"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/compress"
	"gompi/frameworks/sstore/snapshot"
)

// manyFiles is a rank's snapshot of n small compressible files.
func manyFiles(n int, seed byte) rankFiles {
	s := rankFiles{}
	for i := range n {
		s[fmt.Sprintf("part%02d", i)] = compressible(20<<10+i, seed+byte(i))
	}
	return s
}

// TestFlowControl: a node never has more than sstore_stage_max_inflight
// files in flight, and with many files it has that many.
func TestFlowControl(t *testing.T) {
	for _, tc := range []struct {
		alg string
		max int
	}{{compress.None, 1}, {compress.None, 3}, {compress.S2, 3}, {compress.Zstd, 10}} {
		t.Run(fmt.Sprintf("%s/%d", tc.alg, tc.max), func(t *testing.T) {
			// Every Put waits until max are in flight at once: the drain
			// completes only if it reaches its bound.
			sp := &spy{target: tc.max, reached: make(chan struct{})}
			sp.hook = func(ctx context.Context, _ int, _ []filem.Transfer) error {
				select {
				case <-sp.reached:
					return nil
				case <-ctx.Done():
					return fmt.Errorf("only %d of %d Puts in flight: %w", sp.max, tc.max, ctx.Err())
				}
			}
			f := newFixture(t, func(m filem.Module) filem.Module { sp.Module = m; return sp },
				ParamCompress+"="+tc.alg, ParamMaxInflight+"="+strconv.Itoa(tc.max))
			var locals []sstore.Local
			for rank := range 3 {
				locals = append(locals, f.write(t, 0, rank, manyFiles(12, byte(rank*16))))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := f.m.Sync(ctx, f.ref, 0, locals); err != nil {
				t.Fatal(err)
			}
			puts, mx, _ := sp.counts()
			if puts != 3*12+3 {
				t.Errorf("%d Puts, want %d (36 files and 3 snapshot_meta)", puts, 3*12+3)
			}
			if mx != tc.max {
				t.Errorf("at most %d Puts in flight, want exactly %d", mx, tc.max)
			}
			checkMetaLast(t, sp, f.ref, 0, 3)
		})
	}
}

// TestFailedDrain: a Put that fails, or a drain cancelled midway, fails
// Sync naming the rank and file; no temporary stays, nothing of the
// sequence stays on global storage, the earlier sequence is intact.
func TestFailedDrain(t *testing.T) {
	const files, ranks = 6, 2
	const puts = ranks*files + ranks
	for _, tc := range []struct {
		name   string
		alg    string
		at     int // the Put of seq 1 that fails (1-based)
		cancel bool
	}{
		{"first", compress.None, 1, false},
		{"middle", compress.Zstd, 7, false},
		{"a-meta", compress.S2, puts, false},
		{"cancelled", compress.None, 5, true},
		{"cancelled-compressing", compress.Gzip, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := &spy{}
			f := newFixture(t, func(m filem.Module) filem.Module { sp.Module = m; return sp }, ParamCompress+"="+tc.alg, ParamMaxInflight+"=3")
			var seq0 []sstore.Local
			for rank := range ranks {
				seq0 = append(seq0, f.write(t, 0, rank, manyFiles(files, byte(rank))))
			}
			if err := f.m.Sync(context.Background(), f.ref, 0, seq0); err != nil {
				t.Fatal(err)
			}
			before := readTree(t, f.ref.SeqDir(0))
			base, _, _ := sp.counts()

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sp.hook = func(ctx context.Context, n int, ts []filem.Transfer) error {
				if n-base != tc.at {
					return nil
				}
				if tc.cancel {
					cancel()
					return nil // the module sees its context ended
				}
				return &filem.TransferError{Op: "put", Src: ts[0].Local, Dst: ts[0].Remote.String(), Err: errors.New("injected failure")}
			}
			var seq1 []sstore.Local
			snaps := []rankFiles{}
			for rank := range ranks {
				s := manyFiles(files, byte(100+rank))
				snaps = append(snaps, s)
				seq1 = append(seq1, f.write(t, 1, rank, s))
			}
			err := f.m.Sync(ctx, f.ref, 1, seq1)
			switch {
			case err == nil:
				t.Fatal("Sync succeeded")
			case tc.cancel && !errors.Is(err, context.Canceled):
				t.Errorf("cancelled drain: %v", err)
			case !tc.cancel && !strings.Contains(err.Error(), "injected failure"):
				t.Errorf("failed drain: %v", err)
			}
			if !strings.Contains(err.Error(), "seq 1: rank ") || !strings.Contains(err.Error(), ": file ") {
				t.Errorf("error names no rank and file: %v", err)
			}
			noTemporaries(t, f.nodeDir())
			if left := tree(t, f.ref.SeqDir(1)); len(left) != 0 {
				t.Errorf("left on global storage of seq 1: %v", left)
			}
			if after := readTree(t, f.ref.SeqDir(0)); !maps.EqualFunc(before, after, func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Errorf("seq 0 on global storage changed: %v -> %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
			}
			// The ranks' local copies are not the drain's to delete.
			for rank, s := range snaps {
				sameSnapshot(t, seq1[rank].Dir, rank, s)
			}
			// A second attempt succeeds.
			sp.hook = nil
			if err := f.m.Sync(context.Background(), f.ref, 1, seq1); err != nil {
				t.Fatal(err)
			}
			for rank, s := range snaps {
				checkGlobal(t, f, 1, rank, s, tc.alg)
			}
		})
	}
}

// TestDiskFull: global storage fills up mid-drain.
func TestDiskFull(t *testing.T) {
	for _, alg := range []string{compress.None, compress.Zstd} {
		t.Run(alg, func(t *testing.T) {
			disk := filemtest.Tmpfs(t, 1<<20)
			f := newFixture(t, nil, ParamCompress+"="+alg)
			f.ref.Dir = disk
			seq0 := f.write(t, 0, 0, rankFiles{"state": compressible(64<<10, 1)})
			if err := f.m.Sync(context.Background(), f.ref, 0, []sstore.Local{seq0}); err != nil {
				t.Fatal(err)
			}
			before := readTree(t, f.ref.SeqDir(0))
			seq1 := []sstore.Local{
				f.write(t, 1, 0, rankFiles{"state": random(3<<20, 2)}),
				f.write(t, 1, 1, rankFiles{"state": random(100<<10, 3)}),
			}
			err := f.m.Sync(context.Background(), f.ref, 1, seq1)
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "no space left") || !strings.Contains(err.Error(), "seq 1: rank ") || !strings.Contains(err.Error(), ": file ") {
				t.Fatalf("Sync onto a full disk: %v", err)
			}
			noTemporaries(t, f.nodeDir())
			if left := tree(t, f.ref.SeqDir(1)); len(left) != 0 {
				t.Errorf("left on global storage of seq 1: %v", left)
			}
			if after := readTree(t, f.ref.SeqDir(0)); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("seq 0 changed")
			}
			for _, p := range tree(t, disk) {
				if strings.Contains(p, ".filem-tmp-") {
					t.Errorf("FileM temporary left: %s", p)
				}
			}
		})
	}
}

// TestEviction keeps the newest sstore_stage_cache drained sequences on
// the node, never one being written or drained.
func TestEviction(t *testing.T) {
	for _, cache := range []int{0, 1, 2} {
		t.Run(strconv.Itoa(cache), func(t *testing.T) {
			f := newFixture(t, nil, ParamCache+"="+strconv.Itoa(cache))
			for seq := range 4 {
				locals := []sstore.Local{f.write(t, seq, 0, manyFiles(2, byte(seq))), f.write(t, seq, 1, manyFiles(2, byte(seq+9)))}
				if seq == 3 {
					// The next checkpoint is being written meanwhile.
					f.write(t, 4, 0, manyFiles(1, 50))
				}
				if err := f.m.Sync(context.Background(), f.ref, seq, locals); err != nil {
					t.Fatal(err)
				}
				var want []int
				for s := max(0, seq-cache+1); s <= seq && cache > 0; s++ {
					want = append(want, s)
				}
				if seq == 3 {
					want = append(want, 4)
				}
				if got := localSeqs(t, f); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("after seq %d the node holds %v, want %v", seq, got, want)
				}
			}
		})
	}
}

// TestEvictionSparesDrain: a sequence still draining is not evicted by a
// later one that finished first.
func TestEvictionSparesDrain(t *testing.T) {
	release := make(chan struct{})
	blocked := make(chan struct{})
	var once sync.Once
	sp := &spy{}
	f := newFixture(t, func(m filem.Module) filem.Module { sp.Module = m; return sp }, ParamCache+"=1")
	sp.hook = func(ctx context.Context, _ int, ts []filem.Transfer) error {
		if strings.Contains(ts[0].Remote.Path, "/"+f.ref.Name+"/2/") {
			once.Do(func() { close(blocked) })
			<-release
		}
		return nil
	}
	for seq := range 2 {
		if err := f.m.Sync(context.Background(), f.ref, seq, []sstore.Local{f.write(t, seq, 0, manyFiles(1, 1))}); err != nil {
			t.Fatal(err)
		}
	}
	l2 := f.write(t, 2, 0, manyFiles(3, 2))
	l3 := f.write(t, 3, 1, manyFiles(3, 3))
	done2 := make(chan error, 1)
	go func() { done2 <- f.m.Sync(context.Background(), f.ref, 2, []sstore.Local{l2}) }()
	<-blocked
	if err := f.m.Sync(context.Background(), f.ref, 3, []sstore.Local{l3}); err != nil {
		t.Fatal(err)
	}
	if got := localSeqs(t, f); fmt.Sprint(got) != "[2 3]" {
		t.Errorf("while seq 2 drains the node holds %v, want [2 3]", got)
	}
	close(release)
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
	if got := localSeqs(t, f); fmt.Sprint(got) != "[2 3]" {
		t.Errorf("after both drains the node holds %v, want [2 3]", got)
	}
}

func localSeqs(t testing.TB, f *fixture) []int {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(f.nodeDir(), f.ref.Name))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			t.Errorf("unexpected %s in the node's folder", e.Name())
			continue
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// TestProgress: reports never go back and end with everything done.
func TestProgress(t *testing.T) {
	for _, alg := range []string{compress.None, compress.Zstd} {
		t.Run(alg, func(t *testing.T) {
			f := newFixture(t, nil, ParamCompress+"="+alg, ParamMaxInflight+"=2")
			snaps := []rankFiles{
				{"big": compressible(12<<20, 1), "small": []byte("abc"), "noise": random(1<<20, 1)},
				manyFiles(5, 7),
			}
			var locals []sstore.Local
			var files int
			var total int64
			for rank, s := range snaps {
				locals = append(locals, f.write(t, 0, rank, s))
				for _, b := range s {
					files++
					total += int64(len(b))
				}
			}
			var (
				mu      sync.Mutex
				reports []sstore.Progress
				inside  atomic.Bool
			)
			ctx := sstore.WithProgress(context.Background(), func(p sstore.Progress) {
				if inside.Swap(true) {
					t.Error("progress callback called concurrently")
				}
				mu.Lock()
				reports = append(reports, p)
				mu.Unlock()
				inside.Store(false)
			})
			if err := f.m.Sync(ctx, f.ref, 0, locals); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(reports) < files {
				t.Fatalf("%d reports for %d files", len(reports), files)
			}
			for i, p := range reports {
				if p.Node != "n1" || p.Files != files || p.Bytes != total {
					t.Errorf("report %d: %+v, want node n1, %d files, %d bytes", i, p, files, total)
				}
				if i == 0 {
					continue
				}
				q := reports[i-1]
				if p.FilesDone < q.FilesDone || p.BytesDone < q.BytesDone || p.Stored < q.Stored || p.Elapsed < q.Elapsed {
					t.Errorf("report %d went back: %+v after %+v", i, p, q)
				}
			}
			last := reports[len(reports)-1]
			var stored int64
			for rank := range snaps {
				for _, p := range tree(t, f.ref.LocalPath(0, rank)) {
					if p != snapshot.LocalMetaFile {
						st, _ := os.Stat(filepath.Join(f.ref.LocalPath(0, rank), p))
						stored += st.Size()
					}
				}
			}
			if last.FilesDone != files || last.BytesDone != total || last.Stored != stored {
				t.Errorf("last report %+v; want %d files, %d bytes, %d stored", last, files, total, stored)
			}
			if alg == compress.Zstd && last.Stored >= total/2 {
				t.Errorf("zstd stored %d of %d bytes", last.Stored, total)
			}
			if last.Rate() <= 0 || last.ETA() != 0 {
				t.Errorf("last report: rate %v ETA %v", last.Rate(), last.ETA())
			}
		})
	}
}

// TestChangedLocalFile: a local file that no longer matches its
// snapshot_meta is not drained as if it did.
func TestChangedLocalFile(t *testing.T) {
	for _, alg := range []string{compress.None, compress.S2} {
		t.Run(alg, func(t *testing.T) {
			f := newFixture(t, nil, ParamCompress+"="+alg)
			l := f.write(t, 0, 0, rankFiles{"state": compressible(100<<10, 1)})
			if alg == compress.None {
				os.Truncate(filepath.Join(l.Dir, "state"), 10)
			} else {
				flipByte(t, filepath.Join(l.Dir, "state"), 5)
			}
			err := f.m.Sync(context.Background(), f.ref, 0, []sstore.Local{l})
			if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), "rank 0: file state") {
				t.Errorf("Sync of a changed file: %v", err)
			}
			if left := tree(t, f.ref.SeqDir(0)); len(left) != 0 {
				t.Errorf("left on global storage: %v", left)
			}
			// A rank whose snapshot_meta is missing.
			os.Remove(filepath.Join(l.Dir, snapshot.LocalMetaFile))
			if err := f.m.Sync(context.Background(), f.ref, 0, []sstore.Local{l}); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "rank 0") {
				t.Errorf("Sync without snapshot_meta: %v", err)
			}
		})
	}
}

// TestSweep: what a killed daemon left of its drains and fetches of the
// reference is removed by the next drain; another reference's is not.
func TestSweep(t *testing.T) {
	f := newFixture(t, nil)
	l := f.write(t, 0, 0, manyFiles(2, 1))
	other := snapshot.RefName("99")
	var stale, kept []string
	for _, d := range []string{".drain-" + f.ref.Name + "-7-123", ".fetch-" + f.ref.Name + "-3-0-456"} {
		stale = append(stale, filepath.Join(f.nodeDir(), d))
	}
	kept = append(kept, filepath.Join(f.nodeDir(), ".drain-"+other+"-1-789"))
	for _, d := range append(append([]string{}, stale...), kept...) {
		if err := os.MkdirAll(filepath.Join(d, "0"), 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "0", "state.zst"), []byte("partial"), 0o600)
	}
	if err := f.m.Sync(context.Background(), f.ref, 0, []sstore.Local{l}); err != nil {
		t.Fatal(err)
	}
	for _, d := range stale {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale %s kept: %v", d, err)
		}
	}
	for _, d := range kept {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("another reference's %s removed: %v", d, err)
		}
	}
}

// TestShuffle: each file's filter is chosen by the shuffle mode and the
// samples, recorded in the global snapshot_meta, and undone by a restart
// from global storage before the size and checksum check, which catches
// damage to the shuffled stream.
func TestShuffle(t *testing.T) {
	snap := rankFiles{"field": smoothField(2 << 20), "noise": random(2<<20, 3), "text": compressible(2<<20, 4), "small": smoothField(64 << 10)}
	for _, tc := range []struct {
		alg, mode string
		// file -> its filter when compressed ("" none), "as is", or "*":
		// compressed, the filter being whichever samples smallest.
		want map[string]string
	}{
		// A small file is not sampled: auto does not shuffle it, and
		// unshuffled it does not shrink.
		{compress.Zstd, compress.ShuffleAuto, map[string]string{"field": compress.DeltaShuffle, "noise": "as is", "text": "*", "small": "as is"}},
		{compress.S2, compress.ShuffleAuto, map[string]string{"field": compress.DeltaShuffle, "noise": "as is", "text": "*", "small": "as is"}},
		{compress.Zstd, compress.ShuffleOn, map[string]string{"field": compress.DeltaShuffle, "noise": "as is", "text": "*", "small": compress.Shuffle8}},
		{compress.Zstd, compress.ShuffleOff, map[string]string{"field": "as is", "noise": "as is", "text": "", "small": "as is"}},
	} {
		t.Run(tc.alg+"/"+tc.mode, func(t *testing.T) {
			f := newFixture(t, nil, ParamCompress+"="+tc.alg, ParamShuffle+"="+tc.mode)
			ctx := context.Background()
			l := f.write(t, 0, 0, snap)
			if err := f.m.Sync(ctx, f.ref, 0, []sstore.Local{l}); err != nil {
				t.Fatal(err)
			}
			meta, err := snapshot.ReadLocal(f.ref.LocalPath(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range meta.Files {
				got := rec.Filter
				if rec.Compression == "" {
					got = "as is"
				}
				if w := tc.want[rec.Name]; got != w && (w != "*" || got == "as is") {
					t.Errorf("%s stored %q (%+v), want %q", rec.Name, got, rec, tc.want[rec.Name])
				}
			}
			if err := f.m.Remove(ctx, f.ref, 0); err != nil { // no cache: from global storage
				t.Fatal(err)
			}
			dir, err := f.m.Fetch(ctx, f.ref, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			sameSnapshot(t, dir, 0, snap)
			if tc.want["field"] == "as is" {
				return
			}
			f.m.Remove(ctx, f.ref, 0)
			stored := storedName(meta, "field")
			path := filepath.Join(f.ref.LocalPath(0, 0), stored)
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			flipByte(t, path, st.Size()/2)
			_, err = f.m.Fetch(ctx, f.ref, 0, 0)
			if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), stored) {
				t.Errorf("Fetch of a damaged shuffled copy: %v", err)
			}
		})
	}
}
