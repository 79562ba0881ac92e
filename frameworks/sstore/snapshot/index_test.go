package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gompi/frameworks/filem"
	"gompi/mca"
)

// indexIn points IndexPath at a fresh home and returns it.
func indexIn(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	path, err := IndexPath()
	if err != nil || path != filepath.Join(home, ".gompi", "snapshots", "index") {
		t.Fatalf("IndexPath = %s, %v", path, err)
	}
	return path
}

// An entry is recorded owner-only, replaces the one of the same name,
// keeps only the settings the index may keep, and is found by name and
// by its folder however written.
func TestIndexRecord(t *testing.T) {
	path := indexIn(t)
	secret := mca.Setting{Name: "filem_rsh_args", Value: "-o IdentityAgent=/tmp/agent"}
	first := IndexEntry{Name: RefName("a"), Dir: "sftp://alice@node7:2222/scratch/", Settings: []mca.Setting{
		{Name: filem.Name, Value: "sftp"}, {Name: filem.ParamSFTPKnownHosts, Value: "/h/.ssh/known_hosts"}, secret}}
	if err := RecordIndex(path, first); err != nil {
		t.Fatal(err)
	}
	if err := RecordIndex(path, IndexEntry{Name: RefName("b"), Dir: "node8:/x"}); err != nil {
		t.Fatal(err)
	}
	first.Settings = append(first.Settings, mca.Setting{Name: filem.ParamSFTPIdentity, Value: "/h/.ssh/id_ed25519"})
	if err := RecordIndex(path, first); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{path: OwnerFileMode, filepath.Dir(path): OwnerDirMode} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %04o", p, fi.Mode(), err, want)
		}
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), "filem_rsh_args") || strings.Count(string(b), RefName("a")) != 1 {
		t.Errorf("index:\n%s", b)
	}
	entries, err := ReadIndex(path)
	if err != nil || len(entries) != 2 || entries[1].Name != RefName("a") || len(entries[1].Settings) != 3 {
		t.Fatalf("entries %+v, %v", entries, err)
	}
	e, ok, err := LookupIndex(path, RefName("a"), "sftp://alice@node7:2222/scratch")
	if err != nil || !ok || e.Dir != "sftp://alice@node7:2222/scratch" || e.setting(filem.ParamSFTPIdentity).Value != "/h/.ssh/id_ed25519" ||
		!strings.HasPrefix(e.Settings[0].Origin.Where, path+":") {
		t.Errorf("lookup: %+v %v %v", e, ok, err)
	}
	if _, ok, _ := LookupIndex(path, RefName("a"), "sftp://alice@node9/scratch"); ok {
		t.Error("found in another folder")
	}
	if _, ok, _ := LookupIndex(path, RefName("b"), "sftp://node8/x/"); !ok {
		t.Error("node8:/x is sftp://node8/x/")
	}
	// gompi-restart NAME finds it there when it is in neither folder.
	t.Chdir(t.TempDir())
	if ref, err := FindRef(RefName("a"), t.TempDir()); err != nil || ref != e.Ref() {
		t.Errorf("FindRef = %+v, %v", ref, err)
	}
	_, err = FindRef(RefName("none"), t.TempDir())
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "then in your snapshot index ("+path+")") {
		t.Errorf("FindRef of a name nowhere: %v", err)
	}
}

// An index someone else could have written is not read: it decides which
// host a restart trusts.
func TestIndexUnsafe(t *testing.T) {
	for _, tt := range []struct {
		name   string
		loosen func(path string)
	}{
		{"file writable by others", func(p string) { os.Chmod(p, 0o666) }},
		{"file writable by the group", func(p string) { os.Chmod(p, 0o620) }},
		{"folder writable by others", func(p string) { os.Chmod(filepath.Dir(p), 0o777) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := indexIn(t)
			if err := RecordIndex(path, IndexEntry{Name: RefName("a"), Dir: "node7:/x"}); err != nil {
				t.Fatal(err)
			}
			tt.loosen(path)
			_, err := ReadIndex(path)
			if !errors.Is(err, ErrUnsafeRef) || !strings.Contains(err.Error(), "chmod go-w") {
				t.Errorf("ReadIndex: %v; want a refusal naming the fix", err)
			}
			if _, err := FindRef(RefName("a"), ""); !errors.Is(err, ErrUnsafeRef) {
				t.Errorf("FindRef: %v", err)
			}
			if err := RecordIndex(path, IndexEntry{Name: RefName("b"), Dir: "node7:/x"}); !errors.Is(err, ErrUnsafeRef) {
				t.Errorf("RecordIndex: %v", err)
			}
		})
	}
	path := indexIn(t)
	os.MkdirAll(filepath.Dir(path), 0o700)
	os.Symlink("/etc/passwd", path)
	if _, err := ReadIndex(path); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsafeRef) {
		t.Errorf("an index that is a link: %v", err)
	}
}

// hostileIndexes are refused, each naming its line; fuzz seeds too.
var hostileIndexes = []struct{ name, text, want string }{
	{"long line", RefName("a") + "\tnode7:/" + strings.Repeat("x", 5000) + "\n", "longer than 4 KiB"},
	{"too many", func() string {
		var b strings.Builder
		for i := 0; i <= maxIndexEntries; i++ {
			fmt.Fprintf(&b, "%s\tnode7:/x\n", RefName(fmt.Sprint(i)))
		}
		return b.String()
	}(), "more than 4096 references"},
	{"path as name", "../x.ckpt\tnode7:/x\n", "is not a reference name"},
	{"absolute name", "/x.ckpt\tnode7:/x\n", "is not a reference name"},
	{"dot name", ".\tnode7:/x\n", "is not a reference name"},
	{"local folder", "x.ckpt\t/scratch\n", "is not a remote folder"},
	{"password", "x.ckpt\tsftp://u:secret@node7/x\n", "is not a remote folder"},
	{"no folder", "x.ckpt\n", "want a reference name and its folder"},
	{"unknown setting", "x.ckpt\tnode7:/x\tfilem_rsh_args=-v\n", "not a setting the index keeps"},
	{"no value", "x.ckpt\tnode7:/x\tfilem\n", "want name=value"},
	{"twice", "x.ckpt\tnode7:/x\tfilem=sftp\tfilem=rsh\n", "filem given twice"},
	{"control", "x.ckpt\tnode7:/x\x1b[2J\n", "control character"},
	{"not UTF-8", "x.ckpt\tnode7:/\xff\n", "not UTF-8"},
	{"NUL", "x.ckpt\tnode7:/x\x00\n", "control character"},
}

func TestIndexHostile(t *testing.T) {
	for _, tt := range hostileIndexes {
		_, err := ParseIndex(strings.NewReader(tt.text), "hostile_index")
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "hostile_index") {
			t.Errorf("%s: %v; want ErrCorrupt saying %q", tt.name, err, tt.want)
		}
	}
	big := bytes.Repeat([]byte("# padding padding padding padding padding padding padding\n"), maxIndexSize/50)
	if _, err := ParseIndex(bytes.NewReader(big), "big"); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "larger than 1 MiB") {
		t.Errorf("a 1 MiB index: %v", err)
	}
	path := indexIn(t)
	os.MkdirAll(filepath.Dir(path), 0o700)
	os.WriteFile(path, big, 0o600)
	if _, err := ReadIndex(path); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "larger than 1 MiB") {
		t.Errorf("a 1 MiB index file: %v", err)
	}
	if err := RecordIndex(indexIn(t), IndexEntry{Name: "x.ckpt", Dir: "node7:/x", Settings: []mca.Setting{{Name: filem.ParamSFTPIdentity, Value: "/a\tb"}}}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a value with a tab was recorded: %v", err)
	}
}

// FuzzParseIndex: whatever the file holds, parsing ends, bounded, and
// what it accepts writes back to the same entries.
func FuzzParseIndex(f *testing.F) {
	f.Add(indexHeader + "\n" + RefName("a") + "\tsftp://alice@node7:2222/scratch\tfilem=sftp\tfilem_sftp_known_hosts=/h/k\n")
	f.Add("x.ckpt\tnode7:/x\nx.ckpt\t[::1]:/y\tfilem=rsh\n")
	for _, h := range hostileIndexes {
		if len(h.text) < 8<<10 {
			f.Add(h.text)
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		entries, err := ParseIndex(strings.NewReader(text), "fuzz")
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		if len(entries) > maxIndexEntries {
			t.Fatalf("%d entries", len(entries))
		}
		var b strings.Builder
		for _, e := range entries {
			b.WriteString(formatIndexLine(e) + "\n")
		}
		again, err := ParseIndex(strings.NewReader(b.String()), "again")
		if err != nil || len(again) != len(entries) {
			t.Fatalf("written back: %v (%d of %d)\n%s", err, len(again), len(entries), b.String())
		}
		for i := range again {
			if formatIndexLine(again[i]) != formatIndexLine(entries[i]) {
				t.Fatalf("entry %d: %q became %q", i, formatIndexLine(entries[i]), formatIndexLine(again[i]))
			}
		}
	})
}
