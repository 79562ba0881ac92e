package snapshot

import (
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
	ms, err := MetaStoreFor(ref, nil)
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
	if _, err := MetaStoreFor(Ref{Dir: "sftp://h/x", Name: "r.ckpt"}, nil); err == nil || !strings.Contains(err.Error(), "--mca filem sftp") {
		t.Errorf("a remote reference without FileM: %v", err)
	}
}
