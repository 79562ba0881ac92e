package stage

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// lockedBuffer is a log sink several goroutines write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// cluster is several simulated nodes' stages on one root and one global
// folder, as gompid runs them under plm local.
type cluster struct {
	nodes []*fixture
	log   *lockedBuffer
}

// newCluster makes the stages of nodes n1..nN with settings.
func newCluster(t *testing.T, n int, settings ...string) *cluster {
	t.Helper()
	c := &cluster{log: &lockedBuffer{}}
	first := newFixture(t, nil, settings...)
	for i := range n {
		f := first
		if i > 0 {
			f = newFixture(t, nil, append([]string{ParamLocalDir + "=" + first.root}, settings...)...)
			f.root, f.global, f.ref = first.root, first.global, first.ref
		}
		f.node = "n" + string(rune('1'+i))
		log := slog.New(slog.NewTextHandler(c.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
		if err := f.m.Provision(context.Background(), sstore.Host{Node: f.node, FileM: f.fm, Log: log}); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, f)
	}
	return c
}

func (c *cluster) names() []string {
	var out []string
	for _, f := range c.nodes {
		out = append(out, f.node)
	}
	return out
}

// checkpoint has node i write ranks 2i and 2i+1 of seq and syncs every
// node at once, as the global coordinator asks them; it returns what each
// rank wrote.
func (c *cluster) checkpoint(t *testing.T, seq int) map[int]rankFiles {
	t.Helper()
	ctx := sstore.WithNodes(context.Background(), c.names())
	snaps := map[int]rankFiles{}
	// Every node writes before any syncs: the coordinator's sync round
	// follows the round in which every rank wrote.
	locals := make([][]sstore.Local, len(c.nodes))
	for i, f := range c.nodes {
		for _, r := range []int{2 * i, 2*i + 1} {
			snaps[r] = rankFiles{"state": random(3000+100*r+seq, byte(r+10*seq)), "small": compressible(500, byte(r))}
			locals[i] = append(locals[i], f.write(t, seq, r, snaps[r]))
		}
	}
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, f := range c.nodes {
		wg.Go(func() { errs[i] = f.m.Sync(ctx, f.ref, seq, locals[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("sync of node %s: %v", c.nodes[i].node, err)
		}
	}
	return snaps
}

// lose removes node i's local storage, as a node that died takes it.
func (c *cluster) lose(t *testing.T, i int) {
	t.Helper()
	if err := os.RemoveAll(c.nodes[i].nodeDir()); err != nil {
		t.Fatal(err)
	}
}

func TestPartnerOf(t *testing.T) {
	for _, tc := range []struct {
		nodes []string
		node  string
		want  string
	}{
		{[]string{"a", "b"}, "a", "b"},
		{[]string{"a", "b"}, "b", "a"},
		{[]string{"a", "b", "c"}, "c", "a"},
		{[]string{"a", "b", "c"}, "b", "c"},
		{[]string{"a"}, "a", ""},
		{nil, "a", ""},
		{[]string{"a", "b"}, "z", ""},
	} {
		if got := partnerOf(tc.nodes, tc.node); got != tc.want {
			t.Errorf("partnerOf(%v, %s) = %q, want %q", tc.nodes, tc.node, got, tc.want)
		}
	}
	if got := sstore.NodesOf([]string{"n1", "n1", "n2", "n1", "n3", "n2"}); strings.Join(got, " ") != "n1 n2 n3" {
		t.Errorf("NodesOf: %v", got)
	}
}

// TestPartnerRestart: n1's snapshots are copied to n2 while they drain;
// with n1 and global storage gone, a restart on n2 reads the partner copy.
func TestPartnerRestart(t *testing.T) {
	c := newCluster(t, 2)
	snaps := c.checkpoint(t, 0)
	n1, n2 := c.nodes[0], c.nodes[1]
	for r := range 2 {
		if err := checkCopy(partnerCopyDir(n2.nodeDir(), n2.ref, 0, "n1", r), r); err != nil {
			t.Errorf("n2's partner copy of rank %d: %v", r, err)
		}
		if err := checkCopy(partnerCopyDir(n1.nodeDir(), n1.ref, 0, "n2", r+2), r+2); err != nil {
			t.Errorf("n1's partner copy of rank %d: %v", r+2, err)
		}
	}
	c.lose(t, 0)
	if err := os.RemoveAll(n1.global); err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		dir, err := n2.m.Fetch(context.Background(), n2.ref, 0, r)
		if err != nil {
			t.Fatalf("fetch of rank %d on n2: %v", r, err)
		}
		sameSnapshot(t, dir, r, snaps[r])
	}
	if !strings.Contains(c.log.String(), "restart reads a partner copy") {
		t.Errorf("no log of the partner copy read:\n%s", c.log)
	}
}

// TestPartnerDamaged: a partner copy whose file changed is passed over,
// logged with the copy and why, and the restart reads global storage; with
// global storage gone too the error names both.
func TestPartnerDamaged(t *testing.T) {
	c := newCluster(t, 2, ParamCompress+"=zstd")
	snaps := c.checkpoint(t, 3)
	c.lose(t, 0)
	n2 := c.nodes[1]
	copyDir := partnerCopyDir(n2.nodeDir(), n2.ref, 3, "n1", 1)
	state := filepath.Join(copyDir, "state")
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	b[17] ^= 0x40
	if err := os.WriteFile(state, b, 0o600); err != nil {
		t.Fatal(err)
	}
	dir, err := n2.m.Fetch(context.Background(), n2.ref, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, dir, 1, snaps[1])
	if dir == copyDir {
		t.Errorf("the damaged partner copy was used")
	}
	log := c.log.String()
	for _, want := range []string{"partner copy unusable", copyDir, "checksum", "restart reads a copy fetched from global storage"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}

	// Rank 0: its partner copy damaged and global storage gone.
	copy0 := partnerCopyDir(n2.nodeDir(), n2.ref, 3, "n1", 0)
	if err := os.WriteFile(filepath.Join(copy0, "small"), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(n2.global); err != nil {
		t.Fatal(err)
	}
	_, err = n2.m.Fetch(context.Background(), n2.ref, 3, 0)
	if err == nil || !strings.Contains(err.Error(), copy0) || !strings.Contains(err.Error(), "global storage") {
		t.Errorf("fetch with no intact copy: %v", err)
	}
}

// TestPartnerHostile: what is planted among the partner copies (a link
// out of the tree, a stray file, a copy of another rank) is never used.
func TestPartnerHostile(t *testing.T) {
	c := newCluster(t, 2)
	c.checkpoint(t, 0)
	n2 := c.nodes[1]
	// A snapshot of rank 0 outside the tree, reached by a link.
	outside := t.TempDir()
	evil := filepath.Join(outside, snapshot.LocalName(0))
	writeLocal(t, mkdir(t, evil), 0, rankFiles{"state": []byte("not yours")})
	base := filepath.Join(snapshot.StageSeqDir(n2.nodeDir(), n2.ref, 0), partnerDirName)
	if err := os.Symlink(outside, filepath.Join(base, "aaa")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "stray"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// n1's real copies are damaged: rank 0's is another rank's.
	real0 := partnerCopyDir(n2.nodeDir(), n2.ref, 0, "n1", 0)
	if err := os.RemoveAll(real0); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(partnerCopyDir(n2.nodeDir(), n2.ref, 0, "n1", 1), real0); err != nil {
		t.Fatal(err)
	}
	c.lose(t, 0)
	dirs, err := partnerCopies(n2.nodeDir(), n2.ref, 0, 0)
	if err != nil || len(dirs) != 1 || dirs[0] != real0 {
		t.Errorf("partner copies of rank 0: %v, %v; want only %s", dirs, err, real0)
	}
	dir, err := n2.m.Fetch(context.Background(), n2.ref, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(dir, outside) || dir == real0 {
		t.Errorf("fetch used %s", dir)
	}
	if !strings.Contains(c.log.String(), "records rank 1") {
		t.Errorf("the wrong rank's copy was not named:\n%s", c.log)
	}
}

// TestPartnerOff: sstore_stage_partner none, and a job of one node, copy
// nothing.
func TestPartnerOff(t *testing.T) {
	c := newCluster(t, 2, ParamPartner+"=none")
	c.checkpoint(t, 0)
	alone := newCluster(t, 1)
	alone.checkpoint(t, 0)
	for _, f := range append(c.nodes, alone.nodes...) {
		for _, p := range tree(t, f.nodeDir()) {
			if strings.Contains(p, partnerDirName) {
				t.Errorf("node %s holds a partner copy: %s", f.node, p)
			}
		}
	}
}

func mkdir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestNoGlobal: with snapc_base_global_snapshot_dir none nothing goes to
// global storage; the partner copy restarts a lost node's ranks, and
// with that copy damaged the error says there is nothing else.
func TestNoGlobal(t *testing.T) {
	c := newCluster(t, 2, "snapc_base_global_snapshot_dir=none", ParamCache+"=0")
	snaps := c.checkpoint(t, 0)
	c.checkpoint(t, 1)
	n2 := c.nodes[1]
	if got := tree(t, n2.ref.Path()); len(got) != 0 {
		t.Errorf("global storage holds %v", got)
	}
	// Two sequences stay on each node whatever the cache, so the one
	// being synced never evicts the last committed.
	if got := tree(t, snapshot.StageLocalDir(n2.nodeDir(), n2.ref, 0, 2)); len(got) == 0 {
		t.Errorf("n2 evicted seq 0 with no global storage")
	}
	c.lose(t, 0)
	dir, err := n2.m.Fetch(context.Background(), n2.ref, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, dir, 0, snaps[0])
	damageFile(t, filepath.Join(partnerCopyDir(n2.nodeDir(), n2.ref, 0, "n1", 1), "state"))
	_, err = n2.m.Fetch(context.Background(), n2.ref, 0, 1)
	if err == nil || !strings.Contains(err.Error(), "no global storage") || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("fetch of a damaged copy with no global storage: %v", err)
	}

	// XOR sets with no cache are refused: nothing would be left to
	// rebuild from.
	_, vals := resolve(t, "sstore=stage", ParamXORSet+"=3", ParamCache+"=0")
	if _, _, err := New().Query(context.Background(), mca.Query{Values: vals, Priority: Priority}); err == nil || !strings.Contains(err.Error(), ParamCache+" 1 or more") {
		t.Errorf("XOR sets with no cache: %v", err)
	}
	// none with nothing but the node's own copy is refused.
	_, vals = resolve(t, "sstore=stage", "snapc_base_global_snapshot_dir=none", ParamPartner+"=none")
	if _, _, err := New().Query(context.Background(), mca.Query{Values: vals, Priority: Priority}); err == nil || !strings.Contains(err.Error(), ParamXORSet) {
		t.Errorf("none with no partner and no XOR set: %v", err)
	}
}

// damageFile flips a byte of path.
func damageFile(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestPartnerMissing: a partner node whose storage is gone fails the
// node's sync, naming the partner, instead of losing the copy silently.
func TestPartnerMissing(t *testing.T) {
	c := newCluster(t, 2)
	n1 := c.nodes[0]
	l := n1.write(t, 0, 0, rankFiles{"state": random(100, 1)})
	c.lose(t, 1)
	err := n1.m.Sync(sstore.WithNodes(context.Background(), c.names()), n1.ref, 0, []sstore.Local{l})
	if err == nil || !strings.Contains(err.Error(), "partner copy") || !strings.Contains(err.Error(), "node n2") {
		t.Errorf("sync with the partner gone: %v", err)
	}
}

// TestPartnerOnAnotherNode: a restart places n2's rank on n1, which is
// not n2's partner: n1 learns from its copy of the reference's metadata
// that n3 keeps the partner copy, and gets it from there; a damaged one
// is passed over for global storage.
func TestPartnerOnAnotherNode(t *testing.T) {
	c := newCluster(t, 3)
	snaps := c.checkpoint(t, 4)
	n1, n3 := c.nodes[0], c.nodes[2]
	var procs []snapshot.ProcRecord
	for r := range 6 {
		procs = append(procs, snapshot.ProcRecord{Rank: r, Node: c.nodes[r/2].node, CRS: "self"})
	}
	replica := snapshot.Ref{Dir: snapshot.StageRefsDir(n1.root, "n1"), Name: n1.ref.Name}
	if err := os.MkdirAll(replica.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	g := &snapshot.GlobalMeta{Job: "4711", Ranks: 6, Seqs: []snapshot.SeqRecord{{Seq: 4, Committed: true, Procs: procs}}}
	if err := snapshot.ThisNode.WriteGlobal(context.Background(), replica, g); err != nil {
		t.Fatal(err)
	}
	c.lose(t, 1)
	dir, err := n1.m.Fetch(context.Background(), n1.ref, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, dir, 2, snaps[2])
	if !strings.Contains(c.log.String(), "restart reads a partner copy from its partner node") {
		t.Errorf("no log of the copy from n3:\n%s", c.log)
	}
	damageFile(t, filepath.Join(partnerCopyDir(n3.nodeDir(), n3.ref, 4, "n2", 3), "state"))
	dir, err = n1.m.Fetch(context.Background(), n1.ref, 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, dir, 3, snaps[3])
	if log := c.log.String(); !strings.Contains(log, "partner copy on the partner node unusable") || !strings.Contains(log, "fetched from global storage") {
		t.Errorf("the damaged copy on n3 and the fallback are not logged:\n%s", log)
	}
}

// TestPartnerHostileMetadata: a copy of the reference's metadata that
// names a node which is no plain name (a path out of the stage tree) is
// refused, logged, and the restart reads global storage.
func TestPartnerHostileMetadata(t *testing.T) {
	c := newCluster(t, 3)
	snaps := c.checkpoint(t, 0)
	n1 := c.nodes[0]
	procs := []snapshot.ProcRecord{{Rank: 0, Node: "n1"}, {Rank: 1, Node: "n1"}, {Rank: 2, Node: "../../evil"}, {Rank: 3, Node: "../../evil"}, {Rank: 4, Node: "n3"}, {Rank: 5, Node: "n3"}}
	replica := snapshot.Ref{Dir: snapshot.StageRefsDir(n1.root, "n1"), Name: n1.ref.Name}
	if err := os.MkdirAll(replica.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	g := &snapshot.GlobalMeta{Job: "4711", Ranks: 6, Seqs: []snapshot.SeqRecord{{Seq: 0, Committed: true, Procs: procs}}}
	if err := snapshot.ThisNode.WriteGlobal(context.Background(), replica, g); err != nil {
		t.Fatal(err)
	}
	c.lose(t, 1)
	dir, err := n1.m.Fetch(context.Background(), n1.ref, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, dir, 2, snaps[2])
	if log := c.log.String(); !strings.Contains(log, "cannot name a folder") || !strings.Contains(log, "fetched from global storage") {
		t.Errorf("the hostile node name is not refused in the log:\n%s", log)
	}
}
