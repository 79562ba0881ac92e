package uds

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gompi/frameworks/btl"
	"gompi/frameworks/btl/btltest"
	"gompi/mca"
)

func TestConformance(t *testing.T) {
	btltest.Run(t, "uds-conformance-"+filepath.Base(t.TempDir()), func(t *testing.T) btl.Module { return btltest.Module(t, New()) })
}

func TestReachableOnlySameNode(t *testing.T) {
	m := btltest.Module(t, New())
	self := btl.Endpoint{Job: "j", Node: "a", Addr: "/x"}
	tests := []struct {
		peer btl.Endpoint
		want bool
	}{
		{btl.Endpoint{Job: "j", Node: "a", Addr: "/y"}, true},
		{btl.Endpoint{Job: "j", Node: "b", Addr: "/y"}, false},
		{btl.Endpoint{Job: "k", Node: "a", Addr: "/y"}, false},
		{btl.Endpoint{Job: "j", Node: "a"}, false},
	}
	for _, tt := range tests {
		if got := m.Reachable(self, tt.peer); got != tt.want {
			t.Errorf("Reachable(%+v) = %v, want %v", tt.peer, got, tt.want)
		}
	}
}

func TestJobDir(t *testing.T) {
	base := "/tmp"
	dir, sock, err := jobDir(base, "job-1", 3)
	if err != nil || !strings.HasPrefix(dir, "/tmp/gompi-") || !strings.HasSuffix(dir, "-job-1") || sock != filepath.Join(dir, "3.sock") {
		t.Errorf("jobDir = %q, %q, %v", dir, sock, err)
	}
	// Unsafe or long job ids are hashed, never used as path elements.
	for _, job := range []string{"../../etc", strings.Repeat("x", 80), ""} {
		dir, _, err := jobDir(base, job, 0)
		if err != nil || filepath.Dir(dir) != base || strings.Contains(filepath.Base(dir), "..") {
			t.Errorf("jobDir(%q) = %q, %v", job, dir, err)
		}
	}
	if _, _, err := jobDir("/"+strings.Repeat("d", 120), "j", 0); err == nil {
		t.Error("a socket path over the kernel limit was accepted")
	}
}

func TestRefusesOpenFolder(t *testing.T) {
	base := t.TempDir()
	dir, _, err := jobDir(base, "open", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	m := btltest.Module(t, New(), mca.Setting{Name: paramDir, Value: base})
	if _, err := m.Listen(t.Context(), btl.Endpoint{Job: "open"}, func(c btl.Conn) { c.Close() }); err == nil {
		t.Fatal("listening in a folder others can write succeeded")
	}
}

func TestRelisten(t *testing.T) {
	btltest.Relisten(t, "uds-relisten-"+filepath.Base(t.TempDir()), func(t *testing.T) btl.Module { return btltest.Module(t, New()) })
}
