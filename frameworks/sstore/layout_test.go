package sstore

import (
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
