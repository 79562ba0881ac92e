package snapshot

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gompi/frameworks/filem"
)

func TestRefGlobal(t *testing.T) {
	tests := []struct {
		dir    string
		remote bool
		want   filem.Remote
	}{
		{"/scratch/ckpt", false, filem.Remote{Path: "/scratch/ckpt/r.ckpt/3/gompi_snapshot_1.ckpt"}},
		{"file:///scratch/ckpt", false, filem.Remote{Path: "/scratch/ckpt/r.ckpt/3/gompi_snapshot_1.ckpt"}},
		{"sftp://ann@node7:2222/scratch/ckpt", true, filem.Remote{Host: "ann@node7:2222", Path: "/scratch/ckpt/r.ckpt/3/gompi_snapshot_1.ckpt"}},
		{"node7:ckpt", true, filem.Remote{Host: "node7", Path: "ckpt/r.ckpt/3/gompi_snapshot_1.ckpt"}},
	}
	for _, tt := range tests {
		ref := Ref{Dir: tt.dir, Name: "r.ckpt"}
		got, err := ref.GlobalLocal(3, 1)
		if err != nil {
			t.Fatalf("%s: %v", tt.dir, err)
		}
		if got != tt.want || ref.IsRemote() != tt.remote {
			t.Errorf("%s: GlobalLocal = %+v remote=%v, want %+v remote=%v", tt.dir, got, ref.IsRemote(), tt.want, tt.remote)
		}
	}
	if _, err := (Ref{Dir: "", Name: "r.ckpt"}).Global(); err == nil {
		t.Error("an empty directory gave no error")
	}
}

func TestParseRefRemote(t *testing.T) {
	tests := []struct {
		arg     string
		want    Ref
		wantErr string
	}{
		{"sftp://ann@node7:2222/scratch/gompi_global_snapshot_1.ckpt", Ref{Dir: "sftp://ann@node7:2222/scratch", Name: "gompi_global_snapshot_1.ckpt"}, ""},
		{"node7:/scratch/gompi_global_snapshot_1.ckpt/", Ref{Dir: "node7:/scratch", Name: "gompi_global_snapshot_1.ckpt"}, ""},
		{"sftp://node7/", Ref{}, "names no reference folder"},
	}
	for _, tt := range tests {
		got, err := ParseRef(tt.arg, "")
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseRef(%q) = %+v, %v; want error %q", tt.arg, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want || !got.IsRemote() {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v", tt.arg, got, err, tt.want)
			continue
		}
		if back, err := ParseRef(got.String(), ""); err != nil || back != got {
			t.Errorf("ParseRef(%q.String() = %q) = %+v, %v", tt.arg, got.String(), back, err)
		}
	}
}

func TestMetaStore(t *testing.T) {
	ref := Ref{Dir: t.TempDir(), Name: RefName("abc")}
	ms, err := MetaStoreFor(ref, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	g := &GlobalMeta{Job: "abc", Ranks: 2}
	if err := ms.WriteGlobal(t.Context(), ref, g); err != nil {
		t.Fatal(err)
	}
	back, err := ms.ReadGlobal(t.Context(), ref)
	if err != nil || back.Job != "abc" || back.Ranks != 2 {
		t.Fatalf("read back %+v, %v", back, err)
	}
	if _, err := MetaStoreFor(Ref{Dir: "sftp://h/x", Name: "r.ckpt"}, nil, false); err == nil || !strings.Contains(err.Error(), "--mca filem sftp") {
		t.Errorf("a remote reference without FileM: %v", err)
	}
}

// A bare name is looked up in the current folder first, then in the
// global snapshot directory; when it is in neither, both are named.
func TestFindRef(t *testing.T) {
	root := t.TempDir()
	cwd, global := filepath.Join(root, "cwd"), filepath.Join(root, "global")
	for _, d := range []string{
		filepath.Join(cwd, "here.ckpt"), filepath.Join(cwd, "both.ckpt"),
		filepath.Join(global, "there.ckpt"), filepath.Join(global, "both.ckpt"),
	} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(cwd, "file.ckpt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cwd)
	tests := []struct {
		name, arg, def string
		want           Ref
		err            []string // each in the error, which wraps fs.ErrNotExist
	}{
		{"in the current folder", "here.ckpt", global, Ref{cwd, "here.ckpt"}, nil},
		{"current folder first", "both.ckpt", global, Ref{cwd, "both.ckpt"}, nil},
		{"in the global folder", "there.ckpt", global, Ref{global, "there.ckpt"}, nil},
		{"global folder as a file URL", "there.ckpt", "file://" + global, Ref{global, "there.ckpt"}, nil},
		{"spaces around a bare name", " there.ckpt ", global, Ref{global, "there.ckpt"}, nil},
		{"a trailing slash makes a path", "there.ckpt/", global, Ref{cwd, "there.ckpt"}, nil},
		{"in the current folder, no global folder", "here.ckpt", "", Ref{cwd, "here.ckpt"}, nil},
		{"a file is no reference", "file.ckpt", global, Ref{}, []string{"current folder (" + cwd + ")", global}},
		{"nowhere", "none.ckpt", global, Ref{}, []string{"no snapshot reference " + filepath.Join(global, "none.ckpt"),
			"current folder (" + cwd + ")", "snapc_base_global_snapshot_dir (" + global + ")"}},
		{"nowhere, no global folder", "none.ckpt", "", Ref{}, []string{"current folder (" + cwd + ")", "no global snapshot directory is set"}},
		{"remote global folder, not looked into", "none.ckpt", "sftp://ann@node7/g", Ref{"sftp://ann@node7/g", "none.ckpt"}, nil},
		{"a path is not looked up", "./none.ckpt", global, Ref{cwd, "none.ckpt"}, nil},
		{"dot is the current folder", ".", global, Ref{filepath.Dir(cwd), "cwd"}, nil},
		{"dot-dot is its parent", "..", global, Ref{filepath.Dir(root), filepath.Base(root)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FindRef(tt.arg, tt.def)
			if tt.err != nil {
				if err == nil || !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("FindRef(%q, %q) = %+v, %v; want a not-exist error", tt.arg, tt.def, got, err)
				}
				for _, want := range tt.err {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("FindRef(%q, %q) = %+v, %v; want %+v", tt.arg, tt.def, got, err, tt.want)
			}
		})
	}
}
