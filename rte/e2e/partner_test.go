package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gompi/frameworks/sstore/snapshot"
)

// partnerCase is how the partner tests break storage once node n2 is lost.
type partnerCase struct {
	name string
	// breakStorage runs after the checkpoint, with n2 lost: ref is the
	// reference, local the stage root.
	breakStorage func(t *testing.T, ref snapshot.Ref, local string)
	// want is what gompi-restart's stderr must show.
	want string
	// none: the job runs with snapc_base_global_snapshot_dir none.
	none bool
	// fromNode: gompi-restart is given n1's copy of the reference's
	// metadata (<local>/n1/.refs/<name>), not the global folder's.
	fromNode bool
}

// TestPartnerNodeLost: heat on 4 ranks over two simulated nodes with
// sstore stage and partner copies (the default ring) is checkpointed; n2's
// gompid is killed and its node-local storage removed. The restart on n1
// alone ends with the checksum of an uninterrupted run: ranks 0 and 1 read
// n1's cache, ranks 2 and 3 n2's partner copy on n1 when there is no
// global storage from the start (snapc_base_global_snapshot_dir none),
// when global storage lost the sequence's data or its whole folder (the
// restart then reads n1's copy of the reference's metadata), or global
// storage when that partner copy is damaged.
func TestPartnerNodeLost(t *testing.T) {
	for _, c := range []partnerCase{
		{name: "global storage lost", breakStorage: func(t *testing.T, ref snapshot.Ref, _ string) {
			// The sequences' data goes; the reference's metadata (the
			// commit record) stays, the copies are found from it.
			seqs, _ := filepath.Glob(filepath.Join(ref.Path(), "[0-9]*"))
			if len(seqs) == 0 {
				t.Fatalf("no sequence on global storage in %s", ref.Path())
			}
			for _, s := range seqs {
				if err := os.RemoveAll(s); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "no global storage", none: true, fromNode: true, breakStorage: func(*testing.T, snapshot.Ref, string) {}},
		{name: "global folder removed", fromNode: true, breakStorage: func(t *testing.T, ref snapshot.Ref, _ string) {
			if err := os.RemoveAll(ref.Dir); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "damaged partner copy", breakStorage: func(t *testing.T, ref snapshot.Ref, local string) {
			copies, _ := filepath.Glob(filepath.Join(local, "n1", ref.Name, "*", ".partner", "n2", "gompi_snapshot_2.ckpt"))
			if len(copies) == 0 {
				t.Fatalf("no partner copy of rank 2 on n1 under %s", local)
			}
			for _, c := range copies {
				damageAFile(t, c)
			}
		}, want: "partner copy unusable"},
	} {
		t.Run(c.name, func(t *testing.T) { partnerNodeLost(t, c) })
	}
}

func partnerNodeLost(t *testing.T, c partnerCase) {
	heat := []string{filepath.Join(bin, "heat"), "-size", autorSize, "-steps", autorSteps}
	want := heatWant(t)
	dir, local := t.TempDir(), t.TempDir()
	global := dir
	if c.none {
		global = "none"
	}
	j := start(t, append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes), "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", global, "--mca", "sstore", "stage",
		"--mca", "sstore_stage_local_snapshot_dir", local}, append(heat, "-every", "1", "-sleep", "5ms")...)...)
	j.waitFor("heat's first step", func(lines []string, _ string) bool {
		return slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "step 1: residual") })
	})
	ref := refOf(t, j, dir)
	onNode := snapshot.Ref{Dir: snapshot.StageRefsDir(local, "n1"), Name: ref.Name}
	if c.none {
		ref = onNode
	}
	if code, out, errs := tool(t, "gompi-checkpoint", pidArg(j)); code != 0 || out != "Snapshot Ref.:   0 "+ref.Name+"\n" {
		t.Fatalf("checkpoint: status %d\n%s%s", code, out, errs)
	}
	// n2 is lost: its daemon dies, its node-local storage with it.
	var pid int
	j.waitFor("n2's daemon", func([]string, string) bool { pid = rankOrDaemonPID(t, j, -1, "n2"); return pid > 0 })
	kill(t, "n2's daemon", pid)
	if code, _, _ := j.wait(); code == 0 {
		t.Errorf("the job went on without n2")
	}
	if err := os.RemoveAll(filepath.Join(local, "n2")); err != nil {
		t.Fatal(err)
	}
	c.breakStorage(t, ref, local)

	from := ref
	if c.fromNode {
		from = onNode
	}
	r := startProg(t, "gompi-restart", "--hostfile", hostfile(t, "n1 slots=4\n"), from.Path())
	code, out, errs := r.wait()
	if got, _ := heatChecksum(out, ""); code != 0 || got != want {
		t.Errorf("restarted heat: status %d, checksum %q, want %q\n%s", code, got, want, errs)
	}
	if c.want != "" && !strings.Contains(errs, c.want) {
		t.Errorf("gompi-restart's stderr lacks %q:\n%s", c.want, errs)
	}
}

// damageAFile flips a byte of the largest file of a local snapshot.
func damageAFile(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var big string
	var size int64 = -1
	for _, e := range ents {
		fi, err := e.Info()
		if err == nil && e.Name() != snapshot.LocalMetaFile && fi.Mode().IsRegular() && fi.Size() > size {
			big, size = filepath.Join(dir, e.Name()), fi.Size()
		}
	}
	if size <= 0 {
		t.Fatalf("no file to damage in %s", dir)
	}
	b, err := os.ReadFile(big)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x5a
	if err := os.WriteFile(big, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// threeNodesLost runs heat on 6 ranks over three simulated nodes with no
// global storage and the protection of mca, checkpoints it, kills n2's
// gompid and removes its node-local storage, and restarts it on the nodes
// of hosts: n2's ranks must come back from the other nodes' copies, and
// heat ends with the checksum of an uninterrupted run.
func threeNodesLost(t *testing.T, hosts string, check func(local string, ref snapshot.Ref), mca ...string) {
	heat := []string{filepath.Join(bin, "heat"), "-size", autorSize, "-steps", autorSteps}
	want := heatWant(t)
	local := t.TempDir()
	args := append([]string{"-np", "6", "--hostfile", hostfile(t, "n1 slots=2\nn2 slots=2\nn3 slots=2\n"), "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", "none", "--mca", "sstore", "stage",
		"--mca", "sstore_stage_local_snapshot_dir", local}, mca...)
	j := start(t, append(args, append(heat, "-every", "1", "-sleep", "5ms")...)...)
	j.waitFor("heat's first step", func(lines []string, _ string) bool {
		return slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "step 1: residual") })
	})
	ref := snapshot.Ref{Dir: snapshot.StageRefsDir(local, "n1"), Name: refOf(t, j, "").Name}
	if code, out, errs := tool(t, "gompi-checkpoint", pidArg(j)); code != 0 || out != "Snapshot Ref.:   0 "+ref.Name+"\n" {
		t.Fatalf("checkpoint: status %d\n%s%s", code, out, errs)
	}
	check(local, ref)
	var pid int
	j.waitFor("n2's daemon", func([]string, string) bool { pid = rankOrDaemonPID(t, j, -1, "n2"); return pid > 0 })
	kill(t, "n2's daemon", pid)
	if code, _, _ := j.wait(); code == 0 {
		t.Errorf("the job went on without n2")
	}
	if err := os.RemoveAll(filepath.Join(local, "n2")); err != nil {
		t.Fatal(err)
	}
	r := startProg(t, "gompi-restart", "--hostfile", hostfile(t, hosts), ref.Path())
	code, out, errs := r.wait()
	if got, _ := heatChecksum(out, ""); code != 0 || got != want {
		t.Errorf("restarted heat: status %d, checksum %q, want %q\n%s", code, got, want, errs)
	}
}

// TestXORSetNodeLost: with no partner copies, only an XOR set of the
// three nodes (sstore_stage_xor_set 3), n2's ranks are rebuilt on n1 and
// n3 from the other two members' copies and parity.
func TestXORSetNodeLost(t *testing.T) {
	threeNodesLost(t, "n1 slots=3\nn3 slots=3\n", func(local string, ref snapshot.Ref) {
		for _, n := range []string{"n1", "n2", "n3"} {
			if _, err := os.Stat(filepath.Join(local, n, ref.Name, "0", ".xor", "parity")); err != nil {
				t.Errorf("node %s keeps no parity segment: %v", n, err)
			}
		}
	}, "--mca", "sstore_stage_partner", "none", "--mca", "sstore_stage_xor_set", "3")
}

// TestPartnerOnOtherNode: the restart puts n2's ranks on n1, which is
// not n2's partner (n3 is, in the ring): n1 gets their copies from n3.
func TestPartnerOnOtherNode(t *testing.T) {
	threeNodesLost(t, "n1 slots=4\nn3 slots=2\n", func(local string, ref snapshot.Ref) {
		if _, err := os.Stat(filepath.Join(local, "n3", ref.Name, "0", ".partner", "n2", "gompi_snapshot_2.ckpt")); err != nil {
			t.Errorf("n3 keeps no partner copy of rank 2: %v", err)
		}
	})
}
