package stage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gompi/frameworks/filem"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/compress"
	"gompi/frameworks/sstore/snapshot"
	"gompi/frameworks/sstore/sstoretest"
	"gompi/mca"
)

func TestQuery(t *testing.T) {
	tests := []struct {
		settings []string
		answers  bool
		skipped  bool
		errHas   string
	}{
		{settings: nil, skipped: true},
		{settings: []string{"ft_cr_enabled=1"}, answers: true},
		{settings: []string{"sstore=stage"}, answers: true},
		{settings: []string{"sstore=central,stage"}, answers: true},
		{settings: []string{"sstore=^stage"}, skipped: true},
		{settings: []string{"sstore=stage", ParamCompress + "=zstd", ParamCompressLevel + "=19"}, answers: true},
		{settings: []string{"sstore=stage", ParamCompress + "=zstd", ParamCompressLevel + "=30"}, errHas: ParamCompressLevel + " = 30: compress: zstd level 30 is out of range 1-22"},
		{settings: []string{"sstore=stage", ParamCompress + "=none", ParamCompressLevel + "=3"}, errHas: ParamCompressLevel},
		{settings: []string{"sstore=stage", ParamCompress + "=s2", ParamCompressLevel + "=-1"}, errHas: ParamCompressLevel},
		{settings: []string{"sstore=stage", ParamMaxInflight + "=0"}, errHas: ParamMaxInflight + " = 0: must be at least 1"},
		{settings: []string{"sstore=stage", ParamCache + "=-1"}, errHas: ParamCache + " = -1"},
		{settings: []string{"sstore=stage", ParamCache + "=0"}, answers: true},
		{settings: []string{"sstore=stage", ParamLocalDir + "=relative/dir"}, errHas: ParamLocalDir + ` = "relative/dir": must be an absolute path`},
		{settings: []string{"sstore=stage", ParamDifferential + "=on", ParamBlockSize + "=64KiB", ParamFullEvery + "=4"}, answers: true},
		{settings: []string{"sstore=stage", ParamBlockSize + "=1000"}, errHas: ParamBlockSize + " = 1000: must be a multiple of 4KiB"},
		{settings: []string{"sstore=stage", ParamBlockSize + "=1GiB"}, errHas: ParamBlockSize + " = 1073741824"},
		{settings: []string{"sstore=stage", ParamFullEvery + "=0"}, errHas: ParamFullEvery + " = 0: must be at least 1"},
		{settings: []string{"sstore=stage", ParamDifferential + "=on", snapc.ParamGlobalDir + "=" + snapc.GlobalNone}, errHas: ParamDifferential + " applies to what drains to global storage"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.settings, ","), func(t *testing.T) {
			_, vals := resolve(t, tt.settings...)
			m, prio, err := New().Query(context.Background(), mca.Query{Values: vals, Priority: Priority})
			switch {
			case tt.answers:
				if err != nil || m == nil || prio != Priority {
					t.Errorf("module %v prio %d err %v; want an answer", m, prio, err)
				}
			case tt.skipped:
				if !errors.Is(err, mca.ErrSkip) {
					t.Errorf("err %v; want a skip", err)
				}
			default:
				if err == nil || errors.Is(err, mca.ErrSkip) || !strings.Contains(err.Error(), tt.errHas) {
					t.Errorf("err %v; want a failure saying %q", err, tt.errHas)
				}
			}
		})
	}
	info := New().Info()
	if info.Name != Name || info.Priority != Priority || info.Framework != sstore.Name {
		t.Errorf("info %+v", info)
	}
	// A bad choice of algorithm is refused by the parameter itself.
	set, _ := resolve(t)
	if _, err := set.Params.ResolveSettings([]mca.Setting{{Name: ParamCompress, Value: "lz4"}}); err == nil {
		t.Errorf("%s=lz4 accepted", ParamCompress)
	}
}

func TestUnbound(t *testing.T) {
	_, vals := resolve(t, "sstore=stage")
	m, _, err := New().Query(context.Background(), mca.Query{Values: vals, Priority: Priority})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ref := snapshot.Ref{Dir: t.TempDir(), Name: snapshot.RefName("1")}
	calls := map[string]func() error{
		"LocalDir": func() error { _, err := m.LocalDir(ctx, ref, 0, 0); return err },
		"Sync":     func() error { return m.Sync(ctx, ref, 0, []sstore.Local{{Rank: 0, Dir: t.TempDir()}}) },
		"Fetch":    func() error { _, err := m.Fetch(ctx, ref, 0, 0); return err },
		"Remove":   func() error { return m.Remove(ctx, ref, 0) },
	}
	for name, call := range calls {
		if err := call(); err == nil || !strings.Contains(err.Error(), "not bound") {
			t.Errorf("%s before Provision: %v", name, err)
		}
	}
	for _, node := range []string{"..", "a/b", "x\x00"} {
		if err := m.(mca.Provisioner[sstore.Host]).Provision(ctx, sstore.Host{Node: node}); err == nil {
			t.Errorf("Provision with node %q accepted", node)
		}
	}
	// A process that only writes local snapshots binds without FileM.
	if err := m.(mca.Provisioner[sstore.Host]).Provision(ctx, sstore.Host{Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(ctx, ref, 0, []sstore.Local{{Rank: 0, Dir: t.TempDir()}}); err == nil || !strings.Contains(err.Error(), "no FileM") {
		t.Errorf("Sync without FileM: %v", err)
	}
}

func TestLocalDir(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	dir, err := f.m.LocalDir(ctx, f.ref, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(f.root, "n1", f.ref.Name, "3", "gompi_snapshot_1.ckpt")
	if dir != want {
		t.Errorf("LocalDir = %s, want %s", dir, want)
	}
	// Nothing is written to global storage while the rank writes.
	if got := tree(t, f.ref.Path()); len(got) != 0 {
		t.Errorf("global storage touched: %v", got)
	}
	os.WriteFile(filepath.Join(dir, "leftover"), []byte("x"), 0o644)
	if dir2, err := f.m.LocalDir(ctx, f.ref, 3, 1); err != nil || dir2 != dir {
		t.Fatalf("LocalDir again = %s, %v", dir2, err)
	}
	if got := tree(t, dir); len(got) != 0 {
		t.Errorf("leftovers of an earlier attempt kept: %v", got)
	}
	// Another node on the same machine has its own folder.
	other := newModule(f.m.cfg)
	if err := other.Provision(ctx, sstore.Host{Node: "n2"}); err != nil {
		t.Fatal(err)
	}
	if d, err := other.LocalDir(ctx, f.ref, 3, 1); err != nil || d == dir || !strings.HasPrefix(d, snapshot.StageNodeDir(f.root, "n2")) {
		t.Errorf("node n2's LocalDir = %s, %v", d, err)
	}
	for _, bad := range []struct {
		ref       snapshot.Ref
		seq, rank int
	}{
		{f.ref, -1, 0}, {f.ref, 0, -1}, {snapshot.Ref{Dir: f.global, Name: ".."}, 0, 0}, {snapshot.Ref{Dir: f.global, Name: "a/b"}, 0, 0},
	} {
		if d, err := f.m.LocalDir(ctx, bad.ref, bad.seq, bad.rank); err == nil {
			t.Errorf("LocalDir(%+v, %d, %d) = %s", bad.ref, bad.seq, bad.rank, d)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := f.m.LocalDir(cancelled, f.ref, 0, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("LocalDir with a cancelled context: %v", err)
	}
}

func TestDefaultRoot(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	root := filepath.Join(tmp, fmt.Sprintf("gompi-stage-%d", os.Getuid()))
	if snapshot.DefaultStageRoot() != root || snapshot.StageNodeDir("", "n7") != filepath.Join(root, "n7") || snapshot.StageNodeDir("/x", "n7") != "/x/n7" {
		t.Fatalf("DefaultRoot %s, NodeDir %s", snapshot.DefaultStageRoot(), snapshot.StageNodeDir("", "n7"))
	}
	_, vals := resolve(t, "sstore=stage")
	m, _, err := New().Query(context.Background(), mca.Query{Values: vals, Priority: Priority})
	if err != nil {
		t.Fatal(err)
	}
	m.(mca.Provisioner[sstore.Host]).Provision(context.Background(), sstore.Host{Node: "n7"})
	ref := snapshot.Ref{Dir: t.TempDir(), Name: snapshot.RefName("1")}
	dir, err := m.LocalDir(context.Background(), ref, 0, 0)
	if err != nil || !strings.HasPrefix(dir, filepath.Join(root, "n7")+"/") {
		t.Fatalf("LocalDir = %s, %v", dir, err)
	}
	if fi, err := os.Stat(root); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("default root %v, %v; want mode 0700", fi.Mode(), err)
	}
	// A root somebody planted (here a link) is refused.
	os.RemoveAll(root)
	if err := os.Symlink(t.TempDir(), root); err != nil {
		t.Fatal(err)
	}
	if _, err := m.LocalDir(context.Background(), ref, 0, 0); err == nil || !strings.Contains(err.Error(), "not a directory of this user") {
		t.Errorf("LocalDir under a planted root: %v", err)
	}
}

// TestRoundTrip drains two ranks with each algorithm and fetches them back
// from the cache, from global storage, and past a damaged cache; damage on
// global storage is refused.
func TestRoundTrip(t *testing.T) {
	snaps := []rankFiles{
		{"app.state": compressible(3<<20+17, 1), "library.state": []byte("lib"), "noise": random(300<<10, 1), "noise2": random(3<<20, 2), "empty": nil},
		// app.state.zst etc. are names a rank may write too: stored names must not collide.
		{"app.state": compressible(1<<20, 2), "app.state.zst": compressible(200<<10, 3), "app.state.s2": compressible(100<<10, 4), "app.state.gz": compressible(100<<10, 5)},
	}
	for _, alg := range compress.Algorithms {
		t.Run(alg, func(t *testing.T) {
			sp := &spy{}
			f := newFixture(t, func(m filem.Module) filem.Module { sp.Module = m; return sp }, ParamCompress+"="+alg)
			ctx := context.Background()
			var locals []sstore.Local
			for rank, s := range snaps {
				locals = append(locals, f.write(t, 5, rank, s))
			}
			if err := f.m.Sync(ctx, f.ref, 5, locals); err != nil {
				t.Fatal(err)
			}
			noTemporaries(t, f.nodeDir())
			for rank, s := range snaps {
				checkGlobal(t, f, 5, rank, s, alg)
				// The local copy stays as the node's cache, as written.
				sameSnapshot(t, locals[rank].Dir, rank, s)
				if dir, ok := snapshot.StagedCopy(f.root, f.node, f.ref, 5, rank); !ok || dir != locals[rank].Dir {
					t.Errorf("CachedDir = %s, %v", dir, ok)
				}
			}
			if _, ok := snapshot.StagedCopy(f.root, f.node, f.ref, 5, 7); ok {
				t.Errorf("CachedDir claims rank 7")
			}
			if _, ok := snapshot.StagedCopy(f.root, "n2", f.ref, 5, 0); ok {
				t.Errorf("CachedDir claims node n2 holds rank 0")
			}
			// Each rank's snapshot_meta arrived after all its files.
			checkMetaLast(t, sp, f.ref, 5, len(snaps))

			// From the cache: no transfer at all.
			_, _, gets0 := sp.counts()
			dir, err := f.m.Fetch(ctx, f.ref, 5, 0)
			if err != nil || dir != locals[0].Dir {
				t.Fatalf("Fetch = %s, %v", dir, err)
			}
			if _, _, gets := sp.counts(); gets != gets0 {
				t.Errorf("Fetch with a cached copy made %d transfers", gets-gets0)
			}

			// A damaged cached copy is replaced from global storage.
			flipByte(t, filepath.Join(locals[0].Dir, "app.state"), 1000)
			dir, err = f.m.Fetch(ctx, f.ref, 5, 0)
			if err != nil || dir != locals[0].Dir {
				t.Fatalf("Fetch past a damaged cache = %s, %v", dir, err)
			}
			sameSnapshot(t, dir, 0, snaps[0])
			if _, _, gets := sp.counts(); gets == gets0 {
				t.Errorf("Fetch used a damaged cached copy")
			}

			// Without a cache, from global storage.
			if err := f.m.Remove(ctx, f.ref, 5); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(f.nodeDir(), f.ref.Name)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Remove left the reference's local folder: %v", err)
			}
			for rank, s := range snaps {
				dir, err := f.m.Fetch(ctx, f.ref, 5, rank)
				if err != nil {
					t.Fatal(err)
				}
				sameSnapshot(t, dir, rank, s)
			}
			noTemporaries(t, f.nodeDir())

			// Damage on global storage is refused, naming the file.
			f.m.Remove(ctx, f.ref, 5)
			meta, err := snapshot.ReadLocal(f.ref.LocalPath(5, 1))
			if err != nil {
				t.Fatal(err)
			}
			stored := storedName(meta, "app.state")
			path := filepath.Join(f.ref.LocalPath(5, 1), stored)
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			flipByte(t, path, st.Size()/2)
			_, err = f.m.Fetch(ctx, f.ref, 5, 1)
			if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), "file app.state") ||
				!strings.Contains(err.Error(), stored) || !strings.Contains(err.Error(), "gompi-restart -s") {
				t.Errorf("Fetch of a damaged global copy: %v", err)
			}
			if _, ok := snapshot.StagedCopy(f.root, f.node, f.ref, 5, 1); ok {
				t.Errorf("a damaged fetch was installed as the cached copy")
			}
			noTemporaries(t, f.nodeDir())

			// A rank whose snapshot never reached global storage.
			_, err = f.m.Fetch(ctx, f.ref, 5, 9)
			if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "holds no complete copy") {
				t.Errorf("Fetch of a missing rank: %v", err)
			}
		})
	}
}

// checkGlobal checks rank's snapshot on global storage: its meta records
// the original sizes and checksums, and compression where it shrank the
// file; the stored files are exactly those the meta names.
func checkGlobal(t *testing.T, f *fixture, seq, rank int, snap rankFiles, alg string) {
	t.Helper()
	dir := f.ref.LocalPath(seq, rank)
	meta, err := snapshot.ReadLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{snapshot.LocalMetaFile}
	for _, rec := range meta.Files {
		data := snap[rec.Name]
		h := snapshot.NewChecksum()
		h.Write(data)
		if rec.Size != int64(len(data)) || rec.Checksum != snapshot.FormatChecksum(h.Sum32()) {
			t.Errorf("rank %d %s: recorded %d %s", rank, rec.Name, rec.Size, rec.Checksum)
		}
		shrinks := len(data) > 1000 && !strings.HasPrefix(rec.Name, "noise")
		switch {
		case alg == compress.None || !shrinks:
			if rec.Compression != "" {
				t.Errorf("rank %d %s stored %s, want as is", rank, rec.Name, rec.Compression)
			}
			want = append(want, rec.Name)
		default:
			if rec.Compression != alg || rec.Stored == "" || rec.Stored == rec.Name || !strings.HasSuffix(rec.Stored, compress.Suffix(alg)) {
				t.Errorf("rank %d %s: compression %q stored %q, want %s", rank, rec.Name, rec.Compression, rec.Stored, alg)
			}
			want = append(want, rec.Stored)
			st, err := os.Stat(filepath.Join(dir, rec.Stored))
			if err != nil || st.Size() >= rec.Size {
				t.Errorf("rank %d %s: stored %v bytes of %d", rank, rec.Name, st, rec.Size)
			}
		}
	}
	if len(meta.Files) != len(snap) {
		t.Errorf("rank %d: global meta records %d files, want %d", rank, len(meta.Files), len(snap))
	}
	got := tree(t, dir)
	if fmt.Sprint(slices.Sorted(slices.Values(want))) != fmt.Sprint(got) {
		t.Errorf("rank %d on global storage holds %v, want %v", rank, got, want)
	}
}

// checkMetaLast checks that each rank's snapshot_meta was the last of its
// Puts.
func checkMetaLast(t *testing.T, sp *spy, ref snapshot.Ref, seq, ranks int) {
	t.Helper()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for rank := range ranks {
		g, _ := ref.GlobalLocal(seq, rank)
		last, metaAt := -1, -1
		for i, r := range sp.done {
			if filepath.Dir(r.Path) != g.Path {
				continue
			}
			last = i
			if filepath.Base(r.Path) == snapshot.LocalMetaFile {
				metaAt = i
			}
		}
		if metaAt < 0 || metaAt != last {
			t.Errorf("rank %d: snapshot_meta put at %d, last put at %d", rank, metaAt, last)
		}
	}
}

func storedName(meta *snapshot.LocalMeta, name string) string {
	for _, f := range meta.Files {
		if f.Name == name {
			if f.Compression != "" {
				return f.Stored
			}
			return f.Name
		}
	}
	return name
}

func flipByte(t testing.TB, path string, at int64) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	b := make([]byte, 1)
	if _, err := fh.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := fh.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

// TestRemoteWithRaw: a remote global folder with raw selected says how to
// reach it.
func TestRemoteWithRaw(t *testing.T) {
	f := newFixture(t, nil)
	ref := snapshot.Ref{Dir: "sftp://root@node-far-away:2222/scratch", Name: f.ref.Name}
	l := sstore.Local{Rank: 0, Dir: mustLocalDir(t, f, ref, 0, 0)}
	writeLocal(t, l.Dir, 0, rankFiles{"a": []byte("x")})
	err := f.m.Sync(context.Background(), ref, 0, []sstore.Local{l})
	if !errors.Is(err, filem.ErrUnreachable) || !strings.Contains(err.Error(), "global snapshot folder sftp://root@node-far-away:2222/scratch is remote: run with --mca filem sftp (or rsh)") {
		t.Errorf("Sync to a remote folder with raw: %v", err)
	}
	f.m.Remove(context.Background(), ref, 0)
	_, err = f.m.Fetch(context.Background(), ref, 0, 0)
	if !errors.Is(err, filem.ErrUnreachable) || !strings.Contains(err.Error(), "--mca filem sftp") {
		t.Errorf("Fetch from a remote folder with raw: %v", err)
	}
}

func mustLocalDir(t testing.TB, f *fixture, ref snapshot.Ref, seq, rank int) string {
	t.Helper()
	d, err := f.m.LocalDir(context.Background(), ref, seq, rank)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestConformance runs the SStore kit on stage selected and provisioned as
// gompid does (node n1, FileM raw), its node-local root and global folder
// in temporary directories.
func TestConformance(t *testing.T) {
	sstoretest.Run(t, func(t *testing.T) sstore.Module { return newFixture(t, nil).m }, sstoretest.Options{})
}
