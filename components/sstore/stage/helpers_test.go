package stage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gompi/components/filem/raw"
	"gompi/frameworks"
	"gompi/frameworks/filem"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// resolve registers the stage and raw components' parameters and resolves
// settings ("name=value") over their defaults.
func resolve(t testing.TB, settings ...string) (*frameworks.Set, *mca.Values) {
	t.Helper()
	params := mca.NewParams()
	set := frameworks.New(params)
	set.SStore.Register(New())
	set.FileM.Register(raw.New())
	var s []mca.Setting
	for _, kv := range settings {
		k, v, _ := strings.Cut(kv, "=")
		s = append(s, mca.Setting{Name: k, Value: v, Origin: mca.Origin{Source: mca.SourceCommandLine}})
	}
	vals, err := params.ResolveSettings(s)
	if err != nil {
		t.Fatal(err)
	}
	return set, vals
}

// fixture is one node's stage with a local global folder.
type fixture struct {
	m      *module
	fm     filem.Module // what the module was bound with
	raw    filem.Module
	root   string // sstore_stage_local_snapshot_dir
	node   string
	ref    snapshot.Ref
	global string // the global snapshot folder (ref.Dir)
}

// newFixture selects stage (sstore=stage) and raw with settings, a local
// root and a global folder in temporary directories, and binds the module
// to node n1 with raw wrapped by wrap (nil: raw itself).
func newFixture(t testing.TB, wrap func(filem.Module) filem.Module, settings ...string) *fixture {
	t.Helper()
	f := &fixture{root: t.TempDir(), node: "n1", global: t.TempDir()}
	settings = append([]string{"sstore=stage", ParamLocalDir + "=" + f.root}, settings...)
	set, vals := resolve(t, settings...)
	c, err := set.SStore.SelectOne(context.Background(), vals, mca.RoleDaemon, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Info.Name != Name || c.Priority != Priority {
		t.Fatalf("selected %s priority %d", c.Info.Name, c.Priority)
	}
	f.m = c.Module.(*module)
	fc, err := set.FileM.SelectOne(context.Background(), vals, mca.RoleDaemon, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.raw, f.fm = fc.Module, fc.Module
	if wrap != nil {
		f.fm = wrap(f.raw)
	}
	if err := f.m.Provision(context.Background(), sstore.Host{Node: f.node, FileM: f.fm}); err != nil {
		t.Fatal(err)
	}
	f.ref = snapshot.Ref{Dir: f.global, Name: snapshot.RefName("4711")}
	if err := os.MkdirAll(f.ref.Path(), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) nodeDir() string { return snapshot.StageNodeDir(f.root, f.node) }

// rankFiles is what a test rank writes: file name to content.
type rankFiles map[string][]byte

// write has rank write snap into its local folder of seq as a rank does,
// and returns the Local to sync.
func (f *fixture) write(t testing.TB, seq, rank int, snap rankFiles) sstore.Local {
	t.Helper()
	dir, err := f.m.LocalDir(context.Background(), f.ref, seq, rank)
	if err != nil {
		t.Fatal(err)
	}
	writeLocal(t, dir, rank, snap)
	return sstore.Local{Rank: rank, Dir: dir}
}

func writeLocal(t testing.TB, dir string, rank int, snap rankFiles) {
	t.Helper()
	var recs []snapshot.FileRecord
	for _, name := range sortedNames(snap) {
		w, err := snapshot.CreateFile(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(snap[name]); err != nil {
			t.Fatal(err)
		}
		rec, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	meta := &snapshot.LocalMeta{Rank: rank, PID: 100 + rank, Node: "n1", CRS: "self", Created: time.Unix(1700000000, 0),
		CRSMeta: map[string]string{"app": "test"}, Files: recs}
	if err := snapshot.WriteLocal(dir, meta); err != nil {
		t.Fatal(err)
	}
}

func sortedNames(s rankFiles) []string {
	var out []string
	for n := range s {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// sameSnapshot checks that dir holds exactly snap, with a plain
// snapshot_meta that verifies.
func sameSnapshot(t testing.TB, dir string, rank int, snap rankFiles) {
	t.Helper()
	meta, err := snapshot.ReadLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Rank != rank || meta.CRS != "self" || meta.CRSMeta["app"] != "test" {
		t.Errorf("%s: meta %+v", dir, meta)
	}
	if err := meta.Verify(dir); err != nil {
		t.Error(err)
	}
	if len(meta.Files) != len(snap) {
		t.Errorf("%s records %d files, want %d", dir, len(meta.Files), len(snap))
	}
	for name, want := range snap {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Error(err)
		} else if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes differ from the %d written", name, len(got), len(want))
		}
	}
}

// compressible is text-like data that compresses well (as examples/noop's
// compressible state), different for each seed.
func compressible(n int, seed byte) []byte {
	const text = "gompi stage test: the same line again and again, so it compresses well. "
	b := make([]byte, n)
	for i := range b {
		b[i] = text[i%len(text)]
	}
	for i := 0; i < n; i += 4096 {
		b[i] = seed + byte(i>>12)
	}
	return b
}

// random is incompressible data, different for each seed.
func random(n int, seed byte) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{seed, 's', 't', 'a', 'g', 'e'}).Read(b)
	return b
}

// spy wraps a FileM: it counts Puts in flight and Gets, records the
// destinations of the Puts that succeeded in order, and lets a test act
// at the start of the n-th Put (1-based).
type spy struct {
	filem.Module
	mu       sync.Mutex
	n        int
	inflight int
	max      int
	gets     int
	done     []filem.Remote
	// target, when set, closes reached once that many Puts are in flight.
	target  int
	reached chan struct{}
	hook    func(ctx context.Context, n int, ts []filem.Transfer) error
}

func (s *spy) Put(ctx context.Context, ts []filem.Transfer) error {
	s.mu.Lock()
	s.n++
	n := s.n
	s.inflight++
	s.max = max(s.max, s.inflight)
	if s.target > 0 && s.inflight == s.target {
		select {
		case <-s.reached:
		default:
			close(s.reached)
		}
	}
	hook := s.hook
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}()
	if hook != nil {
		if err := hook(ctx, n, ts); err != nil {
			return err
		}
	}
	err := s.Module.Put(ctx, ts)
	if err == nil {
		s.mu.Lock()
		for _, t := range ts {
			s.done = append(s.done, t.Remote)
		}
		s.mu.Unlock()
	}
	return err
}

func (s *spy) Get(ctx context.Context, ts []filem.Transfer) error {
	s.mu.Lock()
	s.gets++
	s.mu.Unlock()
	return s.Module.Get(ctx, ts)
}

func (s *spy) counts() (puts, maxInflight, gets int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.max, s.gets
}

// tree lists the regular files under dir (relative paths), or nil when dir
// does not exist.
func tree(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// noTemporaries fails when the node folder holds a drain's or a fetch's
// temporary folder.
func noTemporaries(t testing.TB, nodeDir string) {
	t.Helper()
	ents, err := os.ReadDir(nodeDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary %s left in %s: %v", e.Name(), nodeDir, tree(t, filepath.Join(nodeDir, e.Name())))
		}
	}
}

// readTree reads every file under dir.
func readTree(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, rel := range tree(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		out[rel] = b
	}
	return out
}

// smoothField is n bytes of float64 values smooth in space with full
// mantissas and no zeros, as a simulation's temperature field is:
// incompressible to zstd alone, compressible once shuffled.
func smoothField(n int) []byte {
	side := int(math.Sqrt(float64(n / 8)))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		x, y := float64((i/8)%side), float64((i/8)/side)
		v := 20 + 80*math.Exp(-x/float64(side)) + math.Sin(x/17)*math.Cos(y/23)
		binary.LittleEndian.PutUint64(b[i:], math.Float64bits(v))
	}
	return b
}
