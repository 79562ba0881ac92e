package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gompi/mca"
)

var t0 = time.Date(2026, 11, 21, 2, 50, 0, 123456789, time.UTC)

func sampleGlobal() *GlobalMeta {
	return &GlobalMeta{
		Job:   "4711",
		Ranks: 2,
		AMCA:  []string{"ft-enable-cr"},
		Params: []mca.Setting{
			{Name: "crs", Value: "self", Origin: mca.Origin{Source: mca.SourceAMCA, Where: "ft-enable-cr (built-in):7"}},
			{Name: "odd", Value: "a \"b\" = c\n\x00 é", Origin: mca.Origin{Source: mca.SourceEnv, Where: "GOMPI_MCA_odd"}},
			{Name: "empty", Value: "", Origin: mca.Origin{Source: mca.SourceCommandLine, Where: "--mca"}},
		},
		Seqs: []SeqRecord{
			{Seq: 0, Started: t0, Finished: t0.Add(time.Second), Committed: true,
				Procs: []ProcRecord{{0, "n1", "self"}, {1, "node two", "self"}}},
			{Seq: 1, Migrate: true, Started: t0, Finished: t0.Add(2 * time.Second), Committed: true},
			{Seq: 2, Started: t0.Add(time.Minute), Procs: []ProcRecord{{0, "n1", "self"}}},
		},
	}
}

func TestGlobalRoundTrip(t *testing.T) {
	g := sampleGlobal()
	var buf bytes.Buffer
	if err := g.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := ParseGlobal(bytes.NewReader(buf.Bytes()), "m")
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if !reflect.DeepEqual(got, g) {
		t.Errorf("round trip differs:\n%+v\n%+v\n%s", got, g, buf.String())
	}
	if c := got.Committed(); !reflect.DeepEqual(c, []int{0}) || got.NextSeq() != 3 {
		t.Errorf("Committed = %v NextSeq = %d", c, got.NextSeq())
	}
	if !strings.Contains(buf.String(), "# Committed Seq: 0 finished=2026-11-21T02:50:01.123456789Z\n") {
		t.Errorf("commit mark not human readable:\n%s", buf.String())
	}
}

func TestLocalRoundTrip(t *testing.T) {
	l := &LocalMeta{Rank: 3, PID: 99, Node: "n1", CRS: "self", Created: t0,
		CRSMeta: map[string]string{"restart cmd": "heat -size 64", "x": ""},
		Files: []FileRecord{{Name: "app.state", Size: 10, Checksum: "crc32c:0000abcd"},
			{Name: "lib state", Size: 0, Checksum: "crc32c:00000000", Compression: "zstd", Stored: "lib state.zst"},
			{Name: "field", Size: 8, Checksum: "crc32c:00000001", Compression: "s2", Stored: "field.s2", Filter: FilterShuffle8}}}
	var buf bytes.Buffer
	l.Encode(&buf)
	got, err := ParseLocal(&buf, "m")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, l) {
		t.Errorf("round trip differs:\n%+v\n%+v", got, l)
	}
}

// Metadata written before filters existed (no filter field) still reads:
// its compressed files had no filter.
func TestLocalBeforeFilters(t *testing.T) {
	in := "# Format: 1 kind=\"gompi local snapshot metadata\"\n# Rank: 0 pid=1 node=n\n# CRS Component: self\n" +
		"# File: a size=1 checksum=crc32c:00000001 compression=zstd stored=a.zst\n"
	l, err := ParseLocal(strings.NewReader(in), "old")
	if err != nil {
		t.Fatal(err)
	}
	want := FileRecord{Name: "a", Size: 1, Checksum: "crc32c:00000001", Compression: "zstd", Stored: "a.zst"}
	if len(l.Files) != 1 || l.Files[0] != want {
		t.Errorf("files %+v, want %+v", l.Files, want)
	}
}

func TestParseErrors(t *testing.T) {
	good := func() string {
		var b bytes.Buffer
		sampleGlobal().Encode(&b)
		return b.String()
	}()
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "not gompi global snapshot metadata"},
		{"local as global", "# Format: 1 kind=\"gompi local snapshot metadata\"\n", "not gompi global"},
		{"future format", strings.Replace(good, "# Format: 1", "# Format: 2", 1), "format \"2\"; this gompi reads format 1"},
		{"garbage line", good + "hello\n", "does not start with"},
		{"unknown record", good + "# Colour: blue\n", "unknown record \"Colour\""},
		{"dup seq", good + "# Seq: 0 kind=checkpoint started=2026-11-21T02:50:00Z\n", "sequence 0 recorded twice"},
		{"stray commit", good + "# Committed Seq: 7 finished=2026-11-21T02:50:00Z\n", "does not close it"},
		{"bad rank", strings.Replace(good, "# Process: 1", "# Process: -1", 1), "not a non-negative number"},
		{"truncated quote", strings.Replace(good, "node=\"node two\"", "node=\"node two", 1), "unterminated"},
		{"missing job", strings.Replace(good, "# Job: 4711\n", "", 1), "missing Job"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseGlobal(strings.NewReader(tt.in), "gm")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
	badLocal := []struct{ name, in, want string }{
		{"path escape", "# Format: 1 kind=\"gompi local snapshot metadata\"\n# Rank: 0 pid=1 node=n\n# CRS Component: self\n# File: ../x size=1 checksum=crc32c:00000000\n", "bad file name"},
		{"bad checksum", "# Format: 1 kind=\"gompi local snapshot metadata\"\n# Rank: 0 pid=1 node=n\n# CRS Component: self\n# File: x size=1 checksum=md5:00\n", "not crc32c"},
		{"no crs", "# Format: 1 kind=\"gompi local snapshot metadata\"\n# Rank: 0 pid=1 node=n\n", "missing Rank or CRS"},
		{"dup file", "# Format: 1 kind=\"gompi local snapshot metadata\"\n# Rank: 0 pid=1 node=n\n# CRS Component: self\n# File: x size=1 checksum=crc32c:00000000\n# File: x size=1 checksum=crc32c:00000000\n", "recorded twice"},
	}
	for _, tt := range badLocal {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseLocal(strings.NewReader(tt.in), "lm")
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestParseRef(t *testing.T) {
	wd, _ := os.Getwd()
	tests := []struct {
		arg, def string
		want     Ref
		err      string
	}{
		{"gompi_global_snapshot_1.ckpt", "/g", Ref{"/g", "gompi_global_snapshot_1.ckpt"}, ""},
		{"/a/b/gompi_global_snapshot_1.ckpt/", "/g", Ref{"/a/b", "gompi_global_snapshot_1.ckpt"}, ""},
		{"./x.ckpt", "/g", Ref{wd, "x.ckpt"}, ""},
		{"x.ckpt", "", Ref{}, "no global snapshot directory"},
		{"  ", "/g", Ref{}, "empty snapshot reference"},
	}
	for _, tt := range tests {
		got, err := ParseRef(tt.arg, tt.def)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseRef(%q) err = %v", tt.arg, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v", tt.arg, got, err, tt.want)
		}
	}
}

// writeSnapshot lays out a real reference with two ranks and the sequences
// of sampleGlobal.
func writeSnapshot(t *testing.T) Ref {
	t.Helper()
	ref := Ref{Dir: t.TempDir(), Name: RefName("4711")}
	if err := os.MkdirAll(ref.Path(), 0o755); err != nil {
		t.Fatal(err)
	}
	g := sampleGlobal()
	g.Seqs = append(g.Seqs, SeqRecord{Seq: 3, Started: t0, Finished: t0, Committed: true,
		Procs: []ProcRecord{{Rank: 0, Node: "n1", CRS: "self"}, {Rank: 1, Node: "n1", CRS: "self"}}})
	for _, seq := range []int{0, 3} {
		for rank := 0; rank < 2; rank++ {
			dir := ref.LocalPath(seq, rank)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			w, err := CreateFile(dir, "app.state")
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte(strings.Repeat("state of rank ", 100+rank)))
			rec, err := w.Close()
			if err != nil {
				t.Fatal(err)
			}
			if err := WriteLocal(dir, &LocalMeta{Rank: rank, PID: 1, Node: "n1", CRS: "self", Created: t0, Files: []FileRecord{rec}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := WriteGlobal(ref, g); err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestRestartPoint(t *testing.T) {
	tests := []struct {
		name    string
		seq     int
		damage  func(ref Ref)
		wantSeq int
		wantErr []string
		is      error
	}{
		{name: "newest committed", seq: -1, wantSeq: 3},
		{name: "explicit committed", seq: 0, wantSeq: 0},
		{name: "explicit uncommitted", seq: 2, wantErr: []string{"sequence 2", "was never committed", "committed sequences: 0, 3"}, is: ErrNotCommitted},
		{name: "migration seq", seq: 1, wantErr: []string{"taken for a migration"}, is: ErrNotCommitted},
		{name: "missing seq", seq: 9, wantErr: []string{"does not exist"}, is: ErrNotCommitted},
		{name: "truncated file", seq: -1, damage: func(ref Ref) {
			os.Truncate(filepath.Join(ref.LocalPath(3, 1), "app.state"), 5)
		}, wantErr: []string{"gompi_snapshot_1.ckpt/app.state is 5 bytes", "restart with -s 0"}, is: ErrCorrupt},
		{name: "flipped byte", seq: -1, damage: func(ref Ref) {
			p := filepath.Join(ref.LocalPath(3, 0), "app.state")
			b, _ := os.ReadFile(p)
			b[7] ^= 0x20
			os.WriteFile(p, b, 0o644)
		}, wantErr: []string{"gompi_snapshot_0.ckpt/app.state has checksum", "previous committed sequence is 0"}, is: ErrCorrupt},
		{name: "missing file", seq: -1, damage: func(ref Ref) {
			os.Remove(filepath.Join(ref.LocalPath(3, 1), "app.state"))
		}, wantErr: []string{"gompi_snapshot_1.ckpt/app.state"}, is: fs.ErrNotExist},
		{name: "missing local meta", seq: 0, damage: func(ref Ref) {
			os.Remove(filepath.Join(ref.LocalPath(0, 0), LocalMetaFile))
		}, wantErr: []string{"gompi_snapshot_0.ckpt", "no earlier sequence was committed"}, is: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := writeSnapshot(t)
			if tt.damage != nil {
				tt.damage(ref)
			}
			g, err := ReadGlobal(ref)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ChooseSeq(ref, g, tt.seq)
			if err == nil {
				err = p.VerifyAll()
			}
			if len(tt.wantErr) == 0 {
				if err != nil || p.Seq.Seq != tt.wantSeq {
					t.Fatalf("seq %d, err %v; want %d", p.Seq.Seq, err, tt.wantSeq)
				}
				return
			}
			if err == nil || !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want one wrapping %v", err, tt.is)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestReadGlobalMissing(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadGlobal(Ref{dir, "nope.ckpt"}); err == nil || !strings.Contains(err.Error(), "no snapshot reference") {
		t.Errorf("missing ref: %v", err)
	}
	os.Mkdir(filepath.Join(dir, "empty.ckpt"), 0o755)
	if _, err := ReadGlobal(Ref{dir, "empty.ckpt"}); err == nil || !strings.Contains(err.Error(), "has no global_snapshot_meta") {
		t.Errorf("empty ref: %v", err)
	}
}

func TestAtomicWritesLeaveNoTemp(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFileAtomic(filepath.Join(dir, "f"), []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "f"), []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, _ := CreateFile(dir, "g")
	w.Write([]byte("x"))
	w.Abort()
	if _, err := CreateFile(dir, "../escape"); err == nil {
		t.Error("CreateFile accepted a path")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "f" {
		t.Errorf("dir holds %v", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "two" {
		t.Errorf("content %q", b)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "nodir", "f"), nil, 0o600); err == nil {
		t.Error("write into a missing directory succeeded")
	}
}

func FuzzParseGlobal(f *testing.F) {
	var b bytes.Buffer
	sampleGlobal().Encode(&b)
	f.Add(b.String())
	f.Add("# Format: 1 kind=\"gompi global snapshot metadata\"\n# Job: j\n# Ranks: 1\n")
	hostileSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		g, err := ParseGlobal(strings.NewReader(in), "fuzz")
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := g.Encode(&out); err != nil {
			t.Fatal(err)
		}
		again, err := ParseGlobal(&out, "again")
		if err != nil {
			t.Fatalf("re-parse of encoded metadata failed: %v\n%s", err, out.String())
		}
		if !reflect.DeepEqual(again, g) {
			t.Fatalf("round trip differs")
		}
	})
}

func FuzzParseLocal(f *testing.F) {
	var b bytes.Buffer
	(&LocalMeta{Rank: 1, PID: 2, Node: "n", CRS: "self", Created: t0, CRSMeta: map[string]string{"k": "v w"},
		Files: []FileRecord{{Name: "a", Size: 1, Checksum: "crc32c:00000001"}}}).Encode(&b)
	f.Add(b.String())
	head := "# Format: 1 kind=\"gompi local snapshot metadata\"\n# Rank: 0 pid=1 node=n\n# CRS Component: self\n"
	for _, name := range []string{"../x", "\"../../etc/passwd\"", "/etc/passwd", "a/b", ".", "..", "snapshot_meta"} {
		f.Add(head + "# File: " + name + " size=1 checksum=crc32c:00000001\n")
		f.Add(head + "# File: a size=1 checksum=crc32c:00000001 compression=zstd stored=" + name + "\n")
	}
	for _, from := range []string{"", "1", "1,2,3", "3,1", "-1", "01"} {
		f.Add(head + "# File: a size=1 checksum=crc32c:00000001 blocks=a.blocks from=\"" + from + "\"\n")
	}
	for _, filter := range []string{FilterShuffle8, FilterShuffle4, "shuffle16", "", "\"x y\""} {
		f.Add(head + "# File: a size=1 checksum=crc32c:00000001 compression=zstd stored=a.zst filter=" + filter + "\n")
	}
	f.Fuzz(func(t *testing.T, in string) {
		l, err := ParseLocal(strings.NewReader(in), "fuzz")
		if err != nil {
			return
		}
		for _, fr := range l.Files {
			if fr.Name != filepath.Base(fr.Name) || fr.Name == ".." {
				t.Fatalf("unsafe file name %q accepted", fr.Name)
			}
			if fr.Compression != "" && checkFileName(fr.Stored) != nil {
				t.Fatalf("unsafe stored name %q accepted", fr.Stored)
			}
			if CheckFilter(fr.Filter) != nil || (fr.Filter != "" && fr.Compression == "") {
				t.Fatalf("filter %q accepted (compression %q)", fr.Filter, fr.Compression)
			}
			if fr.Blocks != "" && (checkFileName(fr.Blocks) != nil || fr.Compression != "") {
				t.Fatalf("manifest %q accepted (compression %q)", fr.Blocks, fr.Compression)
			}
			if seqs, err := ParseSeqs(fr.From); err != nil || (fr.Blocks == "" && fr.From != "") || JoinSeqs(seqs) != fr.From {
				t.Fatalf("referenced sequences %q accepted: %v", fr.From, err)
			}
		}
		var out bytes.Buffer
		l.Encode(&out)
		again, err := ParseLocal(&out, "again")
		if err != nil || !reflect.DeepEqual(again, l) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func TestNewestTimed(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name string
		seqs []SeqRecord
		want int // -1: none
	}{
		{"none", nil, -1},
		{"uncommitted only", []SeqRecord{{Seq: 0, Started: at(0), Finished: at(2)}}, -1},
		{"committed without times", []SeqRecord{{Seq: 0, Committed: true}}, -1},
		{"newest finish wins", []SeqRecord{
			{Seq: 0, Committed: true, Started: at(0), Finished: at(5)},
			{Seq: 1, Committed: true, Started: at(1), Finished: at(3)},
		}, 0},
		{"migration skipped", []SeqRecord{
			{Seq: 0, Committed: true, Started: at(0), Finished: at(2)},
			{Seq: 1, Committed: true, Migrate: true, Started: at(3), Finished: at(4)},
		}, 0},
	}
	for _, tt := range tests {
		s, ok := (&GlobalMeta{Seqs: tt.seqs}).NewestTimed()
		if ok != (tt.want >= 0) || (ok && s.Seq != tt.want) {
			t.Errorf("%s: NewestTimed = %+v, %v; want seq %d", tt.name, s, ok, tt.want)
		}
	}
}

// VerifySizes reads no file's bytes: a plain file is checked for its
// size, one stored compressed for its presence only, and a stored name
// that leaves the folder is refused.
func TestVerifySizes(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("12345"), 0o600)
	os.WriteFile(filepath.Join(dir, "b.zst"), []byte("xy"), 0o600)
	os.Symlink(filepath.Join(dir, "a"), filepath.Join(dir, "link"))
	tests := []struct {
		name string
		rec  FileRecord
		want string // "" = passes
		is   error
	}{
		{"right size", FileRecord{Name: "a", Size: 5, Checksum: "crc32c:00000000"}, "", nil},
		{"truncated", FileRecord{Name: "a", Size: 9}, "a is 5 bytes, 9 were recorded", ErrCorrupt},
		{"missing", FileRecord{Name: "gone", Size: 1}, "gone", fs.ErrNotExist},
		{"link", FileRecord{Name: "link", Size: 5}, "symbolic link", ErrCorrupt},
		{"compressed present", FileRecord{Name: "b", Size: 1000, Compression: "zstd", Stored: "b.zst"}, "", nil},
		{"compressed missing", FileRecord{Name: "c", Size: 1, Compression: "zstd", Stored: "c.zst"}, "c.zst", fs.ErrNotExist},
		{"stored outside", FileRecord{Name: "d", Size: 1, Compression: "zstd", Stored: "../a"}, `stored name "../a"`, ErrCorrupt},
	}
	for _, tt := range tests {
		err := (&LocalMeta{Files: []FileRecord{tt.rec}}).VerifySizes(dir)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (!errors.Is(err, tt.is) || !strings.Contains(fmt.Sprint(err), tt.want)):
			t.Errorf("%s: %v; want one wrapping %v saying %q", tt.name, err, tt.is, tt.want)
		}
	}
}
