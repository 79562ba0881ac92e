package snapshot

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// A reference is created owner-only, or group-readable when asked; what
// is written into a folder takes the group's read access from it; an
// existing reference keeps the mode its owner gave it.
func TestModes(t *testing.T) {
	for _, tt := range []struct {
		group     bool
		dir, file os.FileMode
	}{{false, 0o700, 0o600}, {true, 0o750, 0o640}} {
		ref := Ref{Dir: filepath.Join(t.TempDir(), "new"), Name: RefName("ab")}
		if err := MkdirRef(ref, tt.group); err != nil {
			t.Fatal(err)
		}
		if err := WriteGlobal(ref, sampleGlobal()); err != nil {
			t.Fatal(err)
		}
		local := ref.LocalPath(0, 0)
		if err := os.MkdirAll(local, DirMode(ref.Path())); err != nil {
			t.Fatal(err)
		}
		if err := WriteLocal(local, &LocalMeta{Rank: 0, CRS: "self", Created: t0}); err != nil {
			t.Fatal(err)
		}
		w, err := CreateFile(local, "app.state")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Close(); err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]os.FileMode{
			ref.Dir: 0o700, ref.Path(): tt.dir, ref.SeqDir(0): tt.dir, local: tt.dir,
			ref.MetaPath(): tt.file, filepath.Join(local, LocalMetaFile): tt.file, filepath.Join(local, "app.state"): tt.file,
		} {
			if got := mode(t, path); got != want {
				t.Errorf("group=%v: %s has mode %04o, want %04o", tt.group, path, got, want)
			}
		}
	}
	ref := Ref{Dir: t.TempDir(), Name: "kept.ckpt"}
	os.Mkdir(ref.Path(), 0o711)
	os.Chmod(ref.Path(), 0o711)
	if err := MkdirRef(ref, false); err != nil || mode(t, ref.Path()) != 0o711 {
		t.Errorf("an existing reference's mode changed to %04o (%v)", mode(t, ref.Path()), err)
	}
	if err := ThisNode.WriteGlobal(t.Context(), Ref{Dir: t.TempDir(), Name: "m.ckpt"}, sampleGlobal()); err != nil {
		t.Fatal(err)
	}
}

// CheckSafe refuses what someone else could have written, naming the path
// and the fix, and only warns about what others may read.
func TestCheckSafe(t *testing.T) {
	tests := []struct {
		name    string
		change  func(ref Ref) string // returns the path it made unsafe
		err     []string
		warning string
	}{
		{"owner-only", func(Ref) string { return "" }, nil, ""},
		{"group-writable folder", func(ref Ref) string { os.Chmod(ref.Path(), 0o770); return ref.Path() },
			[]string{"is writable by its group (mode 0770)", "chmod go-w "}, ""},
		{"world-writable metadata", func(ref Ref) string { os.Chmod(ref.MetaPath(), 0o606); return ref.MetaPath() },
			[]string{"is writable by others (mode 0606)", "chmod go-w "}, ""},
		{"group-readable", func(ref Ref) string { os.Chmod(ref.Path(), 0o750); os.Chmod(ref.MetaPath(), 0o640); return "" },
			nil, "is readable by its group (mode 0750), and 1 more of the reference's folders and files: they hold the job's program"},
		{"another user's", func(ref Ref) string {
			if os.Getuid() != 0 {
				return "skip"
			}
			os.Chown(ref.MetaPath(), 4242, 4242)
			return ref.MetaPath()
		}, []string{"is owned by user 4242, not by you"}, ""},
		{"root's", func(ref Ref) string {
			if os.Getuid() != 0 {
				return "skip"
			}
			return "" // root restarting its own: as ssh, root-owned is trusted
		}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := Ref{Dir: t.TempDir(), Name: RefName("ab")}
			if err := ThisNode.WriteGlobal(t.Context(), ref, sampleGlobal()); err != nil {
				t.Fatal(err)
			}
			unsafe := tt.change(ref)
			if unsafe == "skip" {
				t.Skip("changing a file's owner needs root")
			}
			warning, err := CheckSafe(ref, ref.MetaPath(), ref.SeqDir(7))
			if len(tt.err) == 0 {
				if err != nil {
					t.Fatal(err)
				}
			} else {
				if !errors.Is(err, ErrUnsafeRef) || !strings.Contains(err.Error(), unsafe+" ") {
					t.Fatalf("err %v: want ErrUnsafeRef naming %s", err, unsafe)
				}
				for _, want := range tt.err {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
			}
			if (tt.warning == "") != (warning == "") || !strings.Contains(warning, tt.warning) {
				t.Errorf("warning %q, want %q", warning, tt.warning)
			}
		})
	}
}
