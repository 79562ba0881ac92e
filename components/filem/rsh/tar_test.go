package rsh

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tarOf builds a stream from (name, type, body-or-link) triples.
func tarOf(t testing.TB, entries ...[3]string) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e[0], Typeflag: e[1][0], Mode: 0o644}
		switch h.Typeflag {
		case tar.TypeReg:
			h.Size = int64(len(e[2]))
		case tar.TypeSymlink, tar.TypeLink:
			h.Linkname = e[2]
		case tar.TypeDir:
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(e[2]))
		}
	}
	tw.Close()
	return b.Bytes()
}

var (
	reg  = string(tar.TypeReg)
	dirT = string(tar.TypeDir)
	sym  = string(tar.TypeSymlink)
)

func TestExtractRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		tar  [][3]string
		want string
	}{
		{"parent", [][3]string{{"../evil", reg, "x"}}, "outside"},
		{"absolute", [][3]string{{"/etc/evil", reg, "x"}}, "outside"},
		{"deep parent", [][3]string{{"./a/../../evil", reg, "x"}}, "outside"},
		{"through a symlink", [][3]string{{"./up", sym, ".."}, {"./up/evil", reg, "x"}}, "escapes"},
		{"through an absolute symlink", [][3]string{{"./abs", sym, "/tmp"}, {"./abs/evil", reg, "x"}}, "escapes"},
		{"hard link", [][3]string{{"./f", reg, "x"}, {"./g", string(tar.TypeLink), "f"}}, "only files, directories and symlinks"},
		{"device", [][3]string{{"./d", string(tar.TypeChar), ""}}, "only files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "dst")
			os.Mkdir(dst, 0o700)
			err := extractTar(context.Background(), bytes.NewReader(tarOf(t, tc.tar...)), dst)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want an error saying %q", err, tc.want)
			}
			onlyDst(t, parent)
		})
	}
}

func onlyDst(t *testing.T, parent string) {
	t.Helper()
	ents, _ := os.ReadDir(parent)
	if len(ents) != 1 || ents[0].Name() != "dst" {
		t.Fatalf("something was written beside the destination: %v", ents)
	}
	if _, err := os.Stat("/tmp/evil"); err == nil {
		t.Fatal("/tmp/evil was written")
	}
}

func TestTarRoundTrip(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(src, "a", "b", "f"), []byte("data"), 0o640)
	os.Symlink("../a", filepath.Join(src, "a", "b", "l"))
	os.Chmod(filepath.Join(src, "a"), 0o500)
	var b bytes.Buffer
	if err := writeTar(context.Background(), &b, src); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	os.Mkdir(dst, 0o700)
	if err := extractTar(context.Background(), &b, dst); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "a", "b", "f")); string(got) != "data" {
		t.Errorf("file content %q", got)
	}
	if l, _ := os.Readlink(filepath.Join(dst, "a", "b", "l")); l != "../a" {
		t.Errorf("symlink %q", l)
	}
	fi, _ := os.Stat(filepath.Join(dst, "a"))
	if fi.Mode().Perm() != 0o500 {
		t.Errorf("read-only directory has mode %v", fi.Mode().Perm())
	}
	os.Chmod(filepath.Join(src, "a"), 0o755)
	os.Chmod(filepath.Join(dst, "a"), 0o755)
}

func FuzzExtractTar(f *testing.F) {
	f.Add(tarOf(f, [3]string{"./", dirT, ""}, [3]string{"./a", reg, "x"}))
	f.Add(tarOf(f, [3]string{"./up", sym, ".."}, [3]string{"./up/evil", reg, "x"}))
	f.Add(tarOf(f, [3]string{"../evil", reg, "x"}))
	f.Add([]byte("not a tar stream"))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "dst")
		os.Mkdir(dst, 0o700)
		extractTar(context.Background(), bytes.NewReader(data), dst)
		onlyDst(t, parent)
		filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o700) // so the test's cleanup can remove it
			}
			return nil
		})
	})
}
