package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gompi/rte/hnp"
)

// The daemon tree (routed_radix): jobs whose daemons attach to one
// another rather than all to gompirun, with the traffic on each link
// counted (routed_stats) and checked message by message.

// sevenNodes are simulated nodes enough for a tree of three levels at
// radix 2: gompirun - n1,n2 - n3..n6 - n7.
const sevenNodes = "n1,n2,n3,n4,n5,n6,n7"

// readTree reads the routed_stats file of a job.
func readTree(t *testing.T, file string) hnp.TreeReport {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rep hnp.TreeReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return rep
}

// checkTree checks a job's tree against its radix and counts every link's
// messages: gompirun is linked to at most radix daemons and each daemon
// has at most radix children; down each link go one launch and one
// shutdown, the same fence completions as down every other, and one
// welcome per daemon of the subtree below it; up it come one hello and one
// start per daemon (one rank each) of that subtree, and one contribution
// per fence: the fences are gathered on the way up. It returns the number
// of fences.
func checkTree(t *testing.T, rep hnp.TreeReport, radix, nodes int) uint64 {
	t.Helper()
	children := map[string][]string{}
	for _, d := range rep.Daemons {
		children[d.Parent] = append(children[d.Parent], d.Node)
	}
	if len(rep.Daemons) != nodes || rep.Radix != radix {
		t.Fatalf("tree of %d daemons at radix %d, want %d at %d", len(rep.Daemons), rep.Radix, nodes, radix)
	}
	for p, cs := range children {
		if len(cs) > radix {
			t.Errorf("%q has %d children, more than the radix %d", p, len(cs), radix)
		}
	}
	var subtree func(n string) uint64
	subtree = func(n string) uint64 {
		s := uint64(1)
		for _, c := range children[n] {
			s += subtree(c)
		}
		return s
	}
	fences := rep.Daemons[0].Link.GetKindsDown()["fence"]
	if fences == 0 {
		t.Fatalf("no fence went down to %s", rep.Daemons[0].Node)
	}
	for _, d := range rep.Daemons {
		l := d.Link
		if l == nil {
			t.Errorf("no traffic counted on the link to %s", d.Node)
			continue
		}
		s := subtree(d.Node)
		down, up := l.GetKindsDown(), l.GetKindsUp()
		for kind, want := range map[string]uint64{"launch": 1, "shutdown": 1, "fence": fences, "welcome": s} {
			if down[kind] != want {
				t.Errorf("link to %s (subtree of %d): %d %s down, want %d", d.Node, s, down[kind], kind, want)
			}
		}
		for kind, want := range map[string]uint64{"hello": s, "started": s, "fence": fences} {
			if up[kind] != want {
				t.Errorf("link to %s (subtree of %d): %d %s up, want %d", d.Node, s, up[kind], kind, want)
			}
		}
	}
	return fences
}

// heat on seven simulated nodes in a tree of radix 2 (three levels):
// launch, output, the modex and barriers and the end all pass through the
// tree, the checksum is that of one rank, and each link carried exactly
// its subtree's messages.
func TestTreeHeat(t *testing.T) {
	stats := filepath.Join(t.TempDir(), "tree.json")
	code, out, errs := start(t, "-np", "7", "--host", sevenNodes, "--mca", "routed_radix", "2", "--mca", "routed_stats", stats,
		filepath.Join(bin, "heat"), "-size", autorSize, "-steps", "40").wait()
	if code != 0 {
		t.Fatalf("status %d\n%s", code, errs)
	}
	want := heatWantSteps(t, "40")
	if sum, _ := heatChecksum(out, ""); sum != want {
		t.Errorf("checksum %q, want %q (one rank)", sum, want)
	}
	rep := readTree(t, stats)
	if rep.Depth != 3 {
		t.Errorf("depth %d, want 3", rep.Depth)
	}
	checkTree(t, rep, 2, 7)
}

// The same over ssh and TCP: the second daemon's parent is the first, it
// asks gompirun where that one listens and attaches there over TLS with
// the first daemon's pinned certificate.
func TestTreeSSH(t *testing.T) {
	sshArgs := startSSHD(t)
	stats := filepath.Join(t.TempDir(), "tree.json")
	code, out, errs := start(t, "-np", "2", "--host", "127.0.0.1,localhost", "--mca", "plm", "ssh", "--mca", "plm_ssh_args", sshArgs,
		"--mca", "routed_radix", "1", "--mca", "routed_stats", stats, filepath.Join(bin, "heat"), "-size", autorSize, "-steps", "40").wait()
	if code != 0 {
		t.Fatalf("status %d\n%s", code, errs)
	}
	if sum, _ := heatChecksum(out, ""); sum != heatWantSteps(t, "40") {
		t.Errorf("checksum %q, want one rank's", sum)
	}
	rep := readTree(t, stats)
	if len(rep.Daemons) != 2 || rep.Daemons[1].Parent != rep.Daemons[0].Node {
		t.Fatalf("tree %+v: want localhost below 127.0.0.1", rep.Daemons)
	}
	checkTree(t, rep, 1, 2)
}

// heatWantSteps is the checksum of heat on autorSize and steps run
// without a fault: it does not depend on the rank count (rank 0 hashes the
// whole grid in row order), so one rank computes it, once for all tests.
func heatWantSteps(t *testing.T, steps string) string {
	t.Helper()
	heatSums.Lock()
	defer heatSums.Unlock()
	key := autorSize + "x" + steps
	if s, ok := heatSums.m[key]; ok {
		return s
	}
	code, out, errs := start(t, "-np", "1", filepath.Join(bin, "heat"), "-size", autorSize, "-steps", steps).wait()
	sum, ok := heatChecksum(out, "")
	if code != 0 || !ok {
		t.Fatalf("uninterrupted heat: status %d, output %q\n%s", code, out, errs)
	}
	heatSums.m[key] = sum
	return sum
}

// sevenHosts is sevenNodes as a hostfile (one slot each).
const sevenHosts = "n1\nn2\nn3\nn4\nn5\nn6\nn7\n"

// Heat under autor on the seven-node tree of radix 2 (four ranks on
// n1..n4): the daemon of n4, a leaf, is killed, then, after the recovery
// (a new tree of six nodes), the daemon of n1, the parent of two daemons.
// Each loss is a node loss the job recovers from; the daemons below n1
// attach to gompirun and are not lost with it; the checksum is that of a
// run without fault.
func TestTreeAutor(t *testing.T) {
	want := heatWant(t)
	j := startAutor(t, sevenHosts, "--mca", "routed_radix", "2")
	for i, node := range []string{"n4", "n1"} {
		j.waitConnected()
		pid := j.waitPID(-1, node)
		j.checkpoint(i)
		kill(t, "the daemon of "+node, pid)
		j.waitErr(fmt.Sprintf("gompirun: recovery %d: every rank runs again", i+1))
	}
	errs := j.finish(want,
		"node n4 was lost",
		"autor: recovery 1 of 5: every rank restarts from sequence 0",
		"node n1 was lost",
		"gompirun: the daemon of node n3 lost its parent daemon and attached to gompirun",
		"gompirun: the daemon of node n5 lost its parent daemon and attached to gompirun",
		"autor: recovery 2 of 5: every rank restarts from sequence 1",
	)
	for _, n := range []string{"n3", "n5"} {
		if strings.Contains(errs, "node "+n+" was lost") {
			t.Errorf("%s, below the lost n1, was lost with it:\n%s", n, errs)
		}
	}
}

// gompirun starting many simulated daemons (plm local: each its own
// gompid) of one tiny rank each (examples/noop) in a tree: it succeeds,
// gompirun is linked to radix daemons, every link carries exactly its
// subtree's messages (checkTree), and what gompirun itself receives and
// sends for the job's collectives is bounded by the radix, not the node
// count: one contribution per fence and one copy of each message to all
// per link of its own. CI runs 32 daemons at radix 4 (three levels);
// GOMPI_TREE_DAEMONS and GOMPI_TREE_RADIX ask for more (128 and 8:
// scripts/bench-tree.sh -c runs it).
func TestTreeManyDaemons(t *testing.T) {
	n, radix := envInt(t, "GOMPI_TREE_DAEMONS", 32), envInt(t, "GOMPI_TREE_RADIX", 4)
	var hosts []string
	for i := 1; i <= n; i++ {
		hosts = append(hosts, fmt.Sprintf("n%d", i))
	}
	stats := filepath.Join(t.TempDir(), "tree.json")
	code, _, errs := start(t, "-np", fmt.Sprint(n), "--host", strings.Join(hosts, ","), "--mca", "routed_radix", fmt.Sprint(radix),
		"--mca", "routed_stats", stats, "--mca", "plm_base_launch_timeout", "4m", filepath.Join(bin, "noop"), "-seconds", "0.001", "-mib", "0").wait()
	if code != 0 {
		t.Fatalf("status %d\n%s", code, errs)
	}
	rep := readTree(t, stats)
	fences := checkTree(t, rep, radix, n)
	var top int
	var fenceIn, launchOut uint64
	for _, d := range rep.Daemons {
		if d.Parent == "" {
			top++
			fenceIn += d.Link.GetKindsUp()["fence"]
			launchOut += d.Link.GetKindsDown()["launch"]
		}
	}
	if top != min(radix, n) {
		t.Errorf("gompirun is linked to %d daemons, want %d (the radix)", top, min(radix, n))
	}
	if fenceIn != uint64(top)*fences || launchOut != uint64(top) {
		t.Errorf("gompirun got %d fence contributions for %d fences and sent %d launches over %d links: want one per link each", fenceIn, fences, launchOut, top)
	}
	t.Logf("%d daemons at radix %d: depth %d, all attached after %.2f s, modex done after %.2f s", n, radix, rep.Depth, rep.AttachedSeconds, rep.ModexSeconds)
}

// envInt is the positive integer in the environment variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
