package raw

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gompi/frameworks"
	"gompi/frameworks/filem"
	"gompi/frameworks/filem/filemtest"
	"gompi/mca"
)

func newModule(t *testing.T, settings ...mca.Setting) filem.Module {
	t.Helper()
	params := mca.NewParams()
	set := frameworks.New(params)
	set.FileM.Register(New())
	vals, err := params.ResolveSettings(settings)
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.FileM.SelectOne(t.Context(), vals, mca.RoleDaemon, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Priority != 20 {
		t.Errorf("priority %d, want 20", c.Priority)
	}
	return c.Module
}

func TestConformance(t *testing.T) {
	filemtest.Run(t, func(t *testing.T) filem.Module { return newModule(t) })
}

func TestConformanceOneAtATime(t *testing.T) {
	filemtest.Run(t, func(t *testing.T) filem.Module {
		return newModule(t, mca.Setting{Name: ParamConcurrency, Value: "1"})
	})
}

func TestBadConcurrency(t *testing.T) {
	params := mca.NewParams()
	set := frameworks.New(params)
	set.FileM.Register(New())
	vals, err := params.ResolveSettings([]mca.Setting{{Name: ParamConcurrency, Value: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = set.FileM.SelectOne(t.Context(), vals, mca.RoleDaemon, nil)
	if err == nil {
		t.Fatal("filem_raw_max_concurrent=0 was accepted")
	}
}

func TestOtherHostUnreachable(t *testing.T) {
	m := newModule(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "f")
	if err := os.WriteFile(src, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	for _, tc := range []struct {
		host string
		ok   bool
	}{{"", true}, {host, true}, {"no-such-node.invalid", false}} {
		dst := filem.Remote{Host: tc.host, Path: filepath.Join(dir, "out-"+tc.host)}
		err := m.Put(t.Context(), []filem.Transfer{{Local: src, Remote: dst}})
		if tc.ok && err != nil {
			t.Errorf("put to host %q: %v", tc.host, err)
		}
		if !tc.ok {
			if !errors.Is(err, filem.ErrUnreachable) || !strings.Contains(err.Error(), "filem=rsh") {
				t.Errorf("put to host %q: %v, want ErrUnreachable advising filem=rsh or sftp", tc.host, err)
			}
			if err := m.Remove(t.Context(), []filem.Remote{dst}); !errors.Is(err, filem.ErrUnreachable) {
				t.Errorf("remove on host %q: %v, want ErrUnreachable", tc.host, err)
			}
		}
	}
}

// TestCancelDuringCopy cancels after the first chunk of a multi-chunk file:
// the copy stops, the old destination stays and no temporary is left.
func TestCancelDuringCopy(t *testing.T) {
	m := newModule(t)
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "big"), filepath.Join(dir, "dst")
	if err := os.WriteFile(src, make([]byte, 4*chunkSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	chunks := 0
	m.(*module).afterChunk = func() { chunks++; cancel() }
	err := m.Put(ctx, []filem.Transfer{{Local: src, Remote: filem.Remote{Path: dst}}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("put cancelled mid-copy: %v, want context.Canceled", err)
	}
	if chunks != 1 {
		t.Errorf("copied %d chunks after cancelling, want 1", chunks)
	}
	if b, _ := os.ReadFile(dst); string(b) != "old" {
		t.Errorf("destination changed to %d bytes after a cancelled copy", len(b))
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only big and dst", names)
	}
}

func TestDestinationInsideSource(t *testing.T) {
	m := newModule(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "tree")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := m.Put(t.Context(), []filem.Transfer{{Local: src, Remote: filem.Remote{Path: filepath.Join(src, "sub", "copy")}}})
	if err == nil || !strings.Contains(err.Error(), "inside the source") {
		t.Fatalf("copying a tree into itself: %v, want a refusal", err)
	}
}
