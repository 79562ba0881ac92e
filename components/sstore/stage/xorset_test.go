package stage

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
)

func TestXORSetOf(t *testing.T) {
	nodes := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, string(rune('a'+i)))
		}
		return out
	}
	for _, tc := range []struct {
		n, k int
		node string
		want string
	}{
		{3, 3, "a", "abc"},
		{3, 3, "c", "abc"},
		{4, 3, "d", "abcd"}, // a last set of one joins the one before
		{5, 3, "e", "abcde"},
		{6, 3, "d", "def"},
		{7, 3, "g", "defg"},
		{8, 3, "g", "defgh"}, // sets abc, defgh: the last two join
		{2, 3, "a", ""},      // too few nodes
		{9, 4, "i", "efghi"},
		{3, 0, "a", ""},
		{3, 3, "z", ""},
	} {
		got := strings.Join(xorSetOf(nodes(tc.n), tc.node, tc.k), "")
		if got != tc.want {
			t.Errorf("%d nodes, sets of %d, node %s: set %q, want %q", tc.n, tc.k, tc.node, got, tc.want)
		}
	}
}

// TestXORRebuild: with XOR sets and no partner copies, the snapshots of
// a lost node are rebuilt on any other member of its set from the others'
// copies and parity, for sets of 3 and of 4 (3 nodes and a last one that
// joins them).
func TestXORRebuild(t *testing.T) {
	for _, n := range []int{3, 4} {
		t.Run(strings.Repeat("n", n), func(t *testing.T) {
			c := newCluster(t, n, ParamPartner+"=none", ParamXORSet+"=3", ParamCompress+"=zstd")
			snaps := c.checkpoint(t, 5)
			for _, f := range c.nodes {
				rec, err := readXORRecord(f.nodeDir(), f.ref, 5)
				if err != nil || rec == nil || len(rec.Members) != n || rec.Members[rec.Self].Node != f.node {
					t.Fatalf("node %s's XOR record: %+v, %v", f.node, rec, err)
				}
				if _, err := os.Stat(filepath.Join(xorDir(f.nodeDir(), f.ref, 5), "in")); !os.IsNotExist(err) {
					t.Errorf("node %s kept its received chunks: %v", f.node, err)
				}
			}
			// No global storage: what is rebuilt comes from the set.
			if err := os.RemoveAll(c.nodes[0].global); err != nil {
				t.Fatal(err)
			}
			lost := 1
			c.lose(t, lost)
			for i, f := range c.nodes {
				if i == lost {
					continue
				}
				for _, r := range []int{2 * lost, 2*lost + 1} {
					dir, err := f.m.Fetch(context.Background(), f.ref, 5, r)
					if err != nil {
						t.Fatalf("rebuild of rank %d on %s: %v", r, f.node, err)
					}
					sameSnapshot(t, dir, r, snaps[r])
					if err := os.RemoveAll(dir); err != nil { // the next member rebuilds it again
						t.Fatal(err)
					}
				}
			}
			if !strings.Contains(c.log.String(), "rebuilt from its XOR set") {
				t.Errorf("no rebuild logged:\n%s", c.log)
			}
		})
	}
}

// TestXORDamaged: a member's copy changed since the parity was made gives
// a rebuild that does not verify: it is logged and the restart reads
// global storage; a planted record is refused.
func TestXORDamaged(t *testing.T) {
	c := newCluster(t, 3, ParamPartner+"=none", ParamXORSet+"=3")
	snaps := c.checkpoint(t, 0)
	c.lose(t, 0)
	n2, n3 := c.nodes[1], c.nodes[2]
	// n3's parity segment changed since it was made.
	parity := filepath.Join(xorDir(n3.nodeDir(), n3.ref, 0), xorParityFile)
	b, err := os.ReadFile(parity)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(parity, b, 0o600); err != nil {
		t.Fatal(err)
	}
	dir, err := n2.m.Fetch(context.Background(), n2.ref, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, dir, 1, snaps[1])
	if log := c.log.String(); !strings.Contains(log, "XOR rebuild failed") || !strings.Contains(log, "fetched from global storage") {
		t.Errorf("the failed rebuild and the fallback are not logged:\n%s", log)
	}

	// A record naming a member outside the tree is refused.
	recPath := filepath.Join(xorDir(n2.nodeDir(), n2.ref, 0), xorRecordFile)
	rec, err := readXORRecord(n2.nodeDir(), n2.ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec.Members[0].Node = "../../etc"
	bad, _ := json.Marshal(rec)
	if err := os.WriteFile(recPath, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readXORRecord(n2.nodeDir(), n2.ref, 0); err == nil || !strings.Contains(err.Error(), "bad or repeated member") {
		t.Errorf("hostile record: %v", err)
	}
}

// FuzzXORRecord: whatever a node folder's record holds, reading it never
// panics, and what it accepts names only plain members and files.
func FuzzXORRecord(f *testing.F) {
	f.Add([]byte(`{"seq":0,"self":1,"members":[{"node":"a","files":[{"rank":0,"name":"x","size":3}]},{"node":"b"},{"node":"c"}]}`))
	f.Add([]byte(`{"seq":0,"self":0,"members":[{"node":".."},{"node":"b"},{"node":"c"}]}`))
	f.Add([]byte(`{"seq":0,"self":9}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		ref := snapshot.Ref{Dir: dir, Name: "r"}
		x := xorDir(dir, ref, 0)
		if err := os.MkdirAll(x, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(x, xorRecordFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
		rec, err := readXORRecord(dir, ref, 0)
		if err != nil || rec == nil {
			return
		}
		for _, m := range rec.Members {
			if checkName("node", m.Node) != nil || slices.ContainsFunc(m.Files, func(f xorFile) bool { return checkName("file", f.Name) != nil || f.Size < 0 }) {
				t.Fatalf("accepted %+v", rec)
			}
		}
		_ = rec.set().SegmentSize(0)
	})
}

// TestMigrationUnprotected: a migration's Sync, which only the nodes of
// the moving ranks run, neither waits for the XOR set's other members
// nor copies to the partner.
func TestMigrationUnprotected(t *testing.T) {
	c := newCluster(t, 3, ParamXORSet+"=3")
	n1 := c.nodes[0]
	l := n1.write(t, 2, 0, rankFiles{"state": random(1000, 1)})
	ctx := sstore.ForMigration(sstore.WithNodes(context.Background(), c.names()))
	if err := n1.m.Sync(ctx, n1.ref, 2, []sstore.Local{l}); err != nil {
		t.Fatal(err)
	}
	for _, f := range c.nodes {
		for _, p := range tree(t, snapshot.StageSeqDir(f.nodeDir(), f.ref, 2)) {
			if strings.HasPrefix(p, xorDirName) || strings.HasPrefix(p, partnerDirName) {
				t.Errorf("node %s holds %s of a migration's sequence", f.node, p)
			}
		}
	}
}

// TestXOROutsideSet: a restart puts the lost n2's rank on n4, of the
// other set: n4 learns the set from its copy of the reference's metadata,
// reads a surviving member's record and rebuilds the rank from n1 and n3.
func TestXOROutsideSet(t *testing.T) {
	c := newCluster(t, 6, ParamPartner+"=none", ParamXORSet+"=3")
	snaps := c.checkpoint(t, 1)
	n4 := c.nodes[3]
	var procs []snapshot.ProcRecord
	for r := range 12 {
		procs = append(procs, snapshot.ProcRecord{Rank: r, Node: c.nodes[r/2].node, CRS: "self"})
	}
	replica := snapshot.Ref{Dir: snapshot.StageRefsDir(n4.root, "n4"), Name: n4.ref.Name}
	if err := os.MkdirAll(replica.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	g := &snapshot.GlobalMeta{Job: "4711", Ranks: 12, Seqs: []snapshot.SeqRecord{{Seq: 1, Committed: true, Procs: procs}}}
	if err := snapshot.ThisNode.WriteGlobal(context.Background(), replica, g); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(n4.global); err != nil {
		t.Fatal(err)
	}
	c.lose(t, 1)
	dir, err := n4.m.Fetch(context.Background(), n4.ref, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, dir, 3, snaps[3])
	if !strings.Contains(c.log.String(), "lost=n2") {
		t.Errorf("no rebuild of n2's rank logged:\n%s", c.log)
	}
}

// TestXORStaleChunks: what a failed attempt at a sequence left in a
// node's XOR folder (a manifest and chunk of another member) is cleared
// when the sequence is written again, so the parity is this attempt's.
func TestXORStaleChunks(t *testing.T) {
	c := newCluster(t, 3, ParamPartner+"=none", ParamXORSet+"=3")
	n1 := c.nodes[0]
	in := filepath.Join(xorDir(n1.nodeDir(), n1.ref, 7), "in")
	stale, _ := json.Marshal(xorMember{Node: "n2", Files: []xorFile{{Rank: 2, Name: "state", Size: 10}}})
	if err := os.MkdirAll(in, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"n2.json": stale, "n2.chunk": []byte("stale")} {
		if err := os.WriteFile(filepath.Join(in, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	snaps := c.checkpoint(t, 7)
	if err := os.RemoveAll(n1.global); err != nil {
		t.Fatal(err)
	}
	c.lose(t, 1)
	dir, err := n1.m.Fetch(context.Background(), n1.ref, 7, 2)
	if err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, dir, 2, snaps[2])
}
