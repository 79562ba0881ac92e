package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"gompi/frameworks/filem/fscopy"
)

const globalHead = "# Format: 1 kind=\"gompi global snapshot metadata\"\n# Job: j\n"

// committed is a committed checkpoint sequence recording ranks 0..n-1.
func committed(seq, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Seq: %d kind=checkpoint started=2026-11-21T02:50:00Z\n", seq)
	for r := range n {
		fmt.Fprintf(&b, "# Process: %d node=n1 crs=self\n", r)
	}
	fmt.Fprintf(&b, "# Committed Seq: %d finished=2026-11-21T02:50:01Z\n", seq)
	return b.String()
}

// hostileGlobals are global metadata files whose counts lie about what
// they hold, each with what its refusal says (beside the file's name).
var hostileGlobals = []struct{ name, in, want string }{
	{"a billion ranks", globalHead + "# Ranks: 1000000000\n" + committed(0, 2), "committed sequence 0 records 2 processes but the job has 1000000000 ranks"},
	{"a billion ranks, one committed later", globalHead + "# Ranks: 1000000000\n" + committed(0, 0) + committed(1, 1), "committed sequence 0 records 0 processes"},
	{"more ranks than an int", globalHead + "# Ranks: 99999999999999999999\n", "rank count \"99999999999999999999\" is not a non-negative number"},
	{"negative ranks", globalHead + "# Ranks: -1\n", "rank count \"-1\" is not a non-negative number"},
	{"zero ranks", globalHead + "# Ranks: 0\n", "want one rank count of at least 1"},
	{"no ranks", globalHead, "missing Job or Ranks"},
	{"ranks twice", globalHead + "# Ranks: 2\n# Ranks: 1000000000\n", "want one rank count"},
	{"ranks after the sequences", globalHead + "# Seq: 0 kind=checkpoint started=2026-11-21T02:50:00Z\n# Ranks: 2\n", "before the sequences"},
	{"process before ranks", globalHead + "# Seq: 0 kind=checkpoint started=2026-11-21T02:50:00Z\n# Process: 0 node=n crs=self\n", "Process before Ranks"},
	{"rank beyond ranks", globalHead + "# Ranks: 2\n" + strings.Replace(committed(0, 2), "Process: 1 ", "Process: 7 ", 1), "Process 7: the job has 2 ranks"},
	{"rank twice", globalHead + "# Ranks: 2\n" + strings.Replace(committed(0, 2), "Process: 1 ", "Process: 0 ", 1), "Process 0 recorded twice in sequence 0"},
	{"sequence too large", globalHead + "# Ranks: 1\n# Seq: 4294967296 kind=checkpoint started=2026-11-21T02:50:00Z\n", "which no reference reaches"},
	{"sequence twice", globalHead + "# Ranks: 1\n" + committed(3, 1) + committed(3, 1), "sequence 3 recorded twice"},
	{"a line past the bound", globalHead + "# Ranks: 1\n# AMCA: " + strings.Repeat("x", maxMetaLine) + "\n", "token too long"},
}

func TestHostileGlobal(t *testing.T) {
	for _, tt := range hostileGlobals {
		t.Run(tt.name, func(t *testing.T) {
			g, err := ParseGlobal(strings.NewReader(tt.in), "hostile_meta")
			if err == nil {
				t.Fatalf("accepted: %+v", g)
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "hostile_meta") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q: want ErrCorrupt naming the file and saying %q", err, tt.want)
			}
		})
	}
}

// allocated runs f and returns the bytes it allocated (garbage included).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A rank count is never what sizes an allocation: refusing (or reading) a
// file that claims a billion ranks costs what its few lines cost. The
// bounds are generous (a thousand times what the lines need would still
// be far from a billion of anything).
func TestHostileGlobalAllocation(t *testing.T) {
	refused := globalHead + "# Ranks: 1000000000\n" + committed(0, 2)
	unclaimed := globalHead + "# Ranks: 1000000000\n# Seq: 0 kind=checkpoint started=2026-11-21T02:50:00Z\n" // never committed: it parses
	for _, in := range []string{refused, unclaimed} {
		if n := testing.AllocsPerRun(20, func() { ParseGlobal(strings.NewReader(in), "m") }); n > 500 {
			t.Errorf("%d allocations to read %d bytes", int(n), len(in))
		}
		if b := allocated(func() { ParseGlobal(strings.NewReader(in), "m") }); b > 1<<20 {
			t.Errorf("%d bytes allocated to read %d bytes", b, len(in))
		}
	}
	g, err := ParseGlobal(strings.NewReader(unclaimed), "m")
	if err != nil {
		t.Fatal(err)
	}
	ref := Ref{Dir: t.TempDir(), Name: "r.ckpt"}
	if _, err := ChooseSeq(ref, g, -1); !errors.Is(err, ErrNotCommitted) {
		t.Errorf("ChooseSeq of an uncommitted billion-rank reference: %v", err)
	}
}

// A metadata file larger than MaxMetaSize is refused before it is read,
// and a stream past it once there, both naming the file.
func TestMetaSizeBound(t *testing.T) {
	ref := Ref{Dir: t.TempDir(), Name: "r.ckpt"}
	if err := os.MkdirAll(ref.Path(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ref.MetaPath(), []byte(globalHead+"# Ranks: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(ref.MetaPath(), MaxMetaSize+1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	var err error
	if b := allocated(func() { _, err = ReadGlobal(ref) }); b > 1<<20 {
		t.Errorf("%d bytes allocated to refuse an oversized file", b)
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), ref.MetaPath()) || !strings.Contains(err.Error(), "larger than 64 MiB") {
		t.Errorf("oversized file: %v", err)
	}
	big := strings.NewReader(globalHead + "# Ranks: 1\n" + strings.Repeat("# Job: j\n", MaxMetaSize/9+1))
	if _, err := ParseGlobal(big, "stream"); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "stream: larger than 64 MiB") {
		t.Errorf("oversized stream: %v", err)
	}
}

// File records name files of the snapshot's own folder only.
func TestHostileLocal(t *testing.T) {
	head := "# Format: 1 kind=\"gompi local snapshot metadata\"\n# Rank: 0 pid=1 node=n\n# CRS Component: self\n"
	sum := " size=1 checksum=crc32c:00000001"
	for _, tt := range []struct{ name, line string }{
		{"parent", "# File: ../x" + sum},
		{"deeper parent", "# File: \"../../etc/passwd\"" + sum},
		{"absolute", "# File: /etc/passwd" + sum},
		{"in a folder", "# File: a/b" + sum},
		{"dot", "# File: ." + sum},
		{"dot-dot", "# File: .." + sum},
		{"the metadata itself", "# File: snapshot_meta" + sum},
		{"stored as parent", "# File: a" + sum + " compression=zstd stored=.."},
		{"stored absolute", "# File: a" + sum + " compression=zstd stored=/etc/passwd"},
		{"stored as the metadata", "# File: a" + sum + " compression=zstd stored=snapshot_meta"},
		{"negative size", "# File: a size=-1 checksum=crc32c:00000001"},
		{"unknown filter", "# File: a" + sum + " compression=zstd stored=a.zst filter=rot13"},
		{"filter of another element size", "# File: a" + sum + " compression=zstd stored=a.zst filter=shuffle16"},
		{"filter without compression", "# File: a" + sum + " filter=shuffle8"},
		{"empty-named filter", "# File: a" + sum + " compression=zstd stored=a.zst filter=\"\\x00\""},
		{"manifest as parent", "# File: a" + sum + " blocks=.. from=\"\""},
		{"manifest in another folder", "# File: a" + sum + " blocks=../../3/x/a.blocks from=\"\""},
		{"manifest as the metadata", "# File: a" + sum + " blocks=snapshot_meta from=\"\""},
		{"manifest named as the file", "# File: a" + sum + " blocks=a from=\"\""},
		{"blocks and compression", "# File: a" + sum + " compression=zstd stored=a.zst blocks=a.blocks from=\"\""},
		{"references without a manifest", "# File: a" + sum + " from=3"},
		{"negative referenced sequence", "# File: a" + sum + " blocks=a.blocks from=-1"},
		{"referenced sequences out of order", "# File: a" + sum + " blocks=a.blocks from=3,1"},
		{"referenced sequence twice", "# File: a" + sum + " blocks=a.blocks from=1,1"},
		{"referenced sequence too large", "# File: a" + sum + " blocks=a.blocks from=4294967296"},
		{"referenced sequence not a number", "# File: a" + sum + " blocks=a.blocks from=1,x"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ParseLocal(strings.NewReader(head+tt.line+"\n"), "hostile_local")
			if err == nil {
				t.Fatalf("accepted: %+v", l.Files)
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "hostile_local:4") {
				t.Errorf("error %q: want ErrCorrupt naming the file and line 4", err)
			}
		})
	}
}

// A snapshot's files, rank folders and sequence folders are its own: a
// symbolic link among them, which could make a restart read a file
// outside the reference, is refused naming the link.
func TestSymlinksRefused(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte(strings.Repeat("state of rank ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		plant  func(ref Ref) string // returns the link
		reason string
	}{
		{"file", func(ref Ref) string {
			p := filepath.Join(ref.LocalPath(3, 0), "app.state")
			os.Remove(p)
			os.Symlink(secret, p)
			return p
		}, "is a symbolic link"},
		{"rank folder", func(ref Ref) string {
			p := ref.LocalPath(3, 1)
			os.Rename(p, filepath.Join(outside, "rank1"))
			os.Symlink(filepath.Join(outside, "rank1"), p)
			return p
		}, "is a symbolic link"},
		{"sequence folder", func(ref Ref) string {
			p := ref.SeqDir(3)
			os.Rename(p, filepath.Join(outside, "seq3"))
			os.Symlink(filepath.Join(outside, "seq3"), p)
			return p
		}, "is a symbolic link"},
		{"metadata", func(ref Ref) string {
			p := filepath.Join(ref.LocalPath(3, 0), LocalMetaFile)
			os.Rename(p, filepath.Join(outside, "meta"))
			os.Symlink(filepath.Join(outside, "meta"), p)
			return p
		}, "is a symbolic link"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := writeSnapshot(t)
			link := tt.plant(ref)
			err := restartPoint(t, ref, 3).VerifyAll()
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), link+" "+tt.reason) {
				t.Errorf("VerifyAll: %v; want ErrCorrupt naming %s", err, link)
			}
		})
	}
}

// hostileSeeds are the fuzz targets' extra seeds: the cases above.
func hostileSeeds(f *testing.F) {
	for _, tt := range hostileGlobals {
		if len(tt.in) < 4096 {
			f.Add(tt.in)
		}
	}
	f.Add(globalHead + "# Ranks: 1000000000\n")
}

// cancelOnRead cancels its context once its first Read returns: the
// cancel arrives in the middle of the file.
type cancelOnRead struct {
	r      io.Reader
	cancel context.CancelFunc
	reads  int
}

func (c *cancelOnRead) Read(p []byte) (int, error) {
	c.reads++
	defer c.cancel()
	return c.r.Read(p)
}

// The parse phase ends with the context's error once it is cancelled, in
// the middle of a file, without reading on.
func TestParseEndsWhenCancelled(t *testing.T) {
	in := globalHead + "# Ranks: 1\n" + strings.Repeat("# AMCA: a-set\n", 1<<20)
	ctx, cancel := context.WithCancel(context.Background())
	src := &cancelOnRead{r: strings.NewReader(in), cancel: cancel}
	_, err := ParseGlobal(fscopy.Reader{Ctx: ctx, R: src}, "m")
	if !errors.Is(err, context.Canceled) || src.reads != 1 {
		t.Errorf("err %v after %d reads; want context.Canceled after the first", err, src.reads)
	}
	ref := writeSnapshot(t)
	if _, err := ThisNode.ReadGlobal(ctx, ref); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadGlobal with a cancelled context: %v", err)
	}
}

// The verify phase stops at the first rank whose check says the context
// was cancelled, instead of trying every rank.
func TestVerifyEndsWhenCancelled(t *testing.T) {
	p := restartPoint(t, writeSnapshot(t), 3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	err := p.VerifyAllWith(func(dir string, l *LocalMeta) error { calls++; return l.VerifyContext(ctx, dir) })
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("err %v after %d ranks; want context.Canceled after the first", err, calls)
	}
}

// restartPoint reads ref and chooses seq of it.
func restartPoint(t *testing.T, ref Ref, seq int) RestartPoint {
	t.Helper()
	g, err := ReadGlobal(ref)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ChooseSeq(ref, g, seq)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// VerifyAll names at most maxVerifyErrors ranks, and counts the rest.
func TestVerifyErrorsBounded(t *testing.T) {
	ref := Ref{Dir: t.TempDir(), Name: "r.ckpt"}
	g, err := ParseGlobal(strings.NewReader(globalHead+"# Ranks: 1000\n"+committed(0, 1000)), "m")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ChooseSeq(ref, g, -1)
	if err != nil {
		t.Fatal(err)
	}
	err = p.VerifyAll()
	if err == nil || strings.Count(err.Error(), "no such file") != maxVerifyErrors || !strings.Contains(err.Error(), "and 990 more ranks' snapshots") {
		t.Errorf("error names %d ranks: %.300v", strings.Count(fmt.Sprint(err), "no such file"), err)
	}
}

// A filter this gompi does not know is refused saying so: restoring the
// file without undoing it would hand the CRS other bytes.
func TestUnknownFilter(t *testing.T) {
	in := "# Format: 1 kind=\"gompi local snapshot metadata\"\n# Rank: 0 pid=1 node=n\n# CRS Component: self\n" +
		"# File: a size=1 checksum=crc32c:00000001 compression=zstd stored=a.zst filter=bitshuffle\n"
	_, err := ParseLocal(strings.NewReader(in), "m")
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `unknown filter "bitshuffle"`) || !strings.Contains(err.Error(), "newer gompi") {
		t.Errorf("unknown filter: %v", err)
	}
}
