package central

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/frameworks/sstore/sstoretest"
	"gompi/mca"
)

func values(t *testing.T, settings ...string) *mca.Values {
	t.Helper()
	params := mca.NewParams()
	mca.NewFramework[sstore.Module](params, sstore.Name, "test")
	var s []mca.Setting
	for _, kv := range settings {
		k, v, _ := strings.Cut(kv, "=")
		s = append(s, mca.Setting{Name: k, Value: v, Origin: mca.Origin{Source: mca.SourceCommandLine}})
	}
	vals, err := params.ResolveSettings(s)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

func TestQuery(t *testing.T) {
	tests := []struct {
		settings []string
		answers  bool
	}{
		{nil, false},
		{[]string{"ft_cr_enabled=1"}, true},
		{[]string{"sstore=central"}, true},
		{[]string{"sstore=none,central"}, true},
		{[]string{"sstore=^central"}, false},
		{[]string{"sstore=^none"}, false},
	}
	for _, tt := range tests {
		m, prio, err := New().Query(context.Background(), mca.Query{Values: values(t, tt.settings...), Priority: 20})
		if tt.answers != (err == nil) || (err == nil && (m == nil || prio != 20)) {
			t.Errorf("%v: module %v prio %d err %v; want answer=%v", tt.settings, m, prio, err, tt.answers)
		}
		if err != nil && !errors.Is(err, mca.ErrSkip) {
			t.Errorf("%v: %v does not wrap ErrSkip", tt.settings, err)
		}
	}
	if New().Info().Priority != Priority || New().Info().Name != "central" {
		t.Errorf("info %+v", New().Info())
	}
}

// writeLocal writes a rank's local snapshot the way a rank does.
func writeLocal(t *testing.T, dir string, rank int, files map[string]string) {
	t.Helper()
	var recs []snapshot.FileRecord
	for name, data := range files {
		w, err := snapshot.CreateFile(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(data))
		rec, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if err := snapshot.WriteLocal(dir, &snapshot.LocalMeta{Rank: rank, PID: 1, Node: "n1", CRS: "self", Created: time.Now(), Files: recs}); err != nil {
		t.Fatal(err)
	}
}

func TestLifeCycle(t *testing.T) {
	ctx := context.Background()
	m := module{}
	ref := snapshot.Ref{Dir: t.TempDir(), Name: snapshot.RefName("j1")}
	if _, err := m.LocalDir(ctx, ref, 0, 0); err == nil || !strings.Contains(err.Error(), "shared file system") {
		t.Errorf("LocalDir without the reference: %v", err)
	}
	os.MkdirAll(ref.Path(), 0o755)
	var locals []sstore.Local
	for rank := 0; rank < 3; rank++ {
		dir, err := m.LocalDir(ctx, ref, 2, rank)
		if err != nil || dir != ref.LocalPath(2, rank) {
			t.Fatalf("LocalDir = %q, %v", dir, err)
		}
		writeLocal(t, dir, rank, map[string]string{"app.state": strings.Repeat("x", rank*10), "library.state": "lib"})
		locals = append(locals, sstore.Local{Rank: rank, Dir: dir})
	}
	if err := m.Sync(ctx, ref, 2, locals); err != nil {
		t.Fatal(err)
	}
	// A directory left by an attempt that did not commit is emptied.
	os.WriteFile(filepath.Join(ref.LocalPath(2, 1), "stale"), nil, 0o644)
	if dir, err := m.LocalDir(ctx, ref, 2, 1); err != nil {
		t.Fatal(err)
	} else if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("LocalDir left %v", ents)
	}
	if dir, err := m.Fetch(ctx, ref, 2, 0); err != nil || dir != ref.LocalPath(2, 0) {
		t.Errorf("Fetch = %q, %v", dir, err)
	}
	if _, err := m.Fetch(ctx, ref, 2, 7); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Fetch of a missing rank: %v", err)
	}
	if err := m.Remove(ctx, ref, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ref.SeqDir(2)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove left %s: %v", ref.SeqDir(2), err)
	}
}

func TestSyncRefuses(t *testing.T) {
	tests := []struct {
		name   string
		damage func(ref snapshot.Ref) sstore.Local
		want   string
		is     error
	}{
		{"missing meta", func(ref snapshot.Ref) sstore.Local {
			os.Remove(filepath.Join(ref.LocalPath(0, 1), snapshot.LocalMetaFile))
			return sstore.Local{Rank: 1, Dir: ref.LocalPath(0, 1)}
		}, "rank 1", fs.ErrNotExist},
		{"missing file", func(ref snapshot.Ref) sstore.Local {
			os.Remove(filepath.Join(ref.LocalPath(0, 1), "app.state"))
			return sstore.Local{Rank: 1, Dir: ref.LocalPath(0, 1)}
		}, "app.state", fs.ErrNotExist},
		{"short file", func(ref snapshot.Ref) sstore.Local {
			os.Truncate(filepath.Join(ref.LocalPath(0, 1), "app.state"), 1)
			return sstore.Local{Rank: 1, Dir: ref.LocalPath(0, 1)}
		}, "app.state is 1 bytes, 5 were recorded", snapshot.ErrCorrupt},
		{"wrong rank", func(ref snapshot.Ref) sstore.Local {
			return sstore.Local{Rank: 0, Dir: ref.LocalPath(0, 0)}
		}, "records rank 1, not 0", snapshot.ErrCorrupt},
		{"elsewhere", func(ref snapshot.Ref) sstore.Local {
			return sstore.Local{Rank: 1, Dir: "/tmp"}
		}, "not to its local snapshot", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := snapshot.Ref{Dir: t.TempDir(), Name: snapshot.RefName("j2")}
			for _, rank := range []int{0, 1} {
				dir := ref.LocalPath(0, rank)
				os.MkdirAll(dir, 0o755)
				writeLocal(t, dir, 1, map[string]string{"app.state": "hello"}) // both record rank 1
			}
			err := module{}.Sync(context.Background(), ref, 0, []sstore.Local{tt.damage(ref)})
			if err == nil || !strings.Contains(err.Error(), tt.want) || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("Sync: %v; want %q (%v)", err, tt.want, tt.is)
			}
		})
	}
}

// TestConformance runs the SStore kit on the module the component answers
// with when C/R is on.
func TestConformance(t *testing.T) {
	sstoretest.Run(t, func(t *testing.T) sstore.Module {
		m, _, err := New().Query(t.Context(), mca.Query{Values: values(t, "ft_cr_enabled=1")})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}, sstoretest.Options{})
}
