package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gompi/frameworks/sstore/snapshot"
	"gompi/rte/rankinit"
)

// TestCRIUTraffic checkpoints examples/traffic, a randomized program with
// no C/R code, as 4 real ranks under gompirun with crs=criu at random
// moments (checkpoint-and-continue; a few with --stop, when the stopped
// ranks' descriptors are checked, then SIGCONT): the program's ranks
// spend most of their time blocked in receives, Waits and collectives
// while the round's laggard is held, so that is where most moments find
// them. Each job must end with the digest of an uninterrupted run of the
// same seed (nothing lost, duplicated or reordered: the program checks
// every message as it arrives and the books of both ends at the end).
// Then a random sample of the sequences is restarted, each on another
// placement (one node: every pair over uds; four nodes: every pair over
// tcp; two nodes mapped by node: a mix) and must end with that digest
// again, reaching its peers over the transports of its new placement.
//
// Each job's ranks quiesce their channels with a CRCP drawn from bkmrk
// and flag (GOMPI_TRAFFIC_CRCP forces one). Everything random comes from
// one seed, logged: GOMPI_TRAFFIC_SEED replays a run.
// GOMPI_TRAFFIC_MOMENTS asks for more moments (default 50) for a long
// run.
func TestCRIUTraffic(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("CRIU and the rank init's PID namespace need root")
	}
	seed := envUint(t, "GOMPI_TRAFFIC_SEED", rand.Uint64())
	moments := int(envUint(t, "GOMPI_TRAFFIC_MOMENTS", 50))
	t.Logf("seed %d (GOMPI_TRAFFIC_SEED=%d replays this run), %d moments", seed, seed, moments)
	rng := rand.New(rand.NewPCG(seed, 21))
	begin := time.Now()
	var runs []trafficRun
	for done := 0; done < moments; {
		r := trafficJob(t, rng, moments-done)
		done += r.seqs
		runs = append(runs, r)
	}
	t.Logf("%d moments in %d job(s): %v", moments, len(runs), time.Since(begin).Round(time.Millisecond))
	restartSample(t, rng, runs)
}

// trafficRun is one checkpointed traffic job.
type trafficRun struct {
	seed   uint64
	rounds int
	ref    snapshot.Ref
	seqs   int    // sequences committed, 0 to seqs-1
	digest string // an uninterrupted run's
	crcp   string // how the ranks quiesce their channels ("": the default)
}

// trafficCRCPs are the ways of quiescing the channels a job draws from:
// bkmrk's counts (the default) and flag's flags (issue 21 item 8).
var trafficCRCPs = []string{"bkmrk", "flag"}

// trafficPace is the laggard's mean hold per round: with it a round takes
// about 10 ms, most of it spent by the other ranks inside the operation.
const trafficPace = "8ms"

// trafficRounds is enough rounds for want moments (measured: about 18
// rounds go by per checkpoint, each ~2 s on a loaded 2-core machine); a
// job whose rounds run out first leaves the rest to another job.
func trafficRounds(want int) int { return 200 + 25*want }

func (r trafficRun) args() []string {
	return []string{trafficProg(), "-seed", strconv.FormatUint(r.seed, 10), "-rounds", strconv.Itoa(r.rounds)}
}

func trafficProg() string { return filepath.Join(bin, "traffic") }

// trafficJob runs one paced job on two nodes and checkpoints it at up to
// want random moments, while its rounds last; it checks the job ends with
// the uninterrupted digest.
func trafficJob(t *testing.T, rng *rand.Rand, want int) trafficRun {
	t.Helper()
	run := trafficRun{seed: rng.Uint64(), rounds: trafficRounds(want), crcp: trafficCRCPs[rng.IntN(len(trafficCRCPs))]}
	if c := os.Getenv("GOMPI_TRAFFIC_CRCP"); c != "" {
		run.crcp = c
	}
	j, pace := pacedTraffic(t, &run, "-every", "20")
	// Two moments leave the ranks stopped after their dump, to look at
	// what they hold then: the first, and one drawn.
	stopAt := 1 + rng.IntN(max(want-1, 1))
	begin := time.Now()
	for run.seqs < want && lastRound(j.output()) < run.rounds*9/10 {
		// The moment: up to 150 ms more of the program.
		time.Sleep(time.Duration(rng.Int64N(int64(150 * time.Millisecond))))
		seq := strconv.Itoa(run.seqs)
		if run.seqs == 0 || run.seqs == stopAt {
			checkpointCRIU(t, j, run.ref.Name, seq, "--stop")
			quiescedFDs(t, j)
			j.signal(syscall.SIGCONT)
		} else {
			checkpointCRIU(t, j, run.ref.Name, seq)
		}
		run.seqs++
	}
	t.Logf("job of seed %d, crcp %s: %d checkpoints by round %d of %d in %v", run.seed, run.crcp, run.seqs, lastRound(j.output()), run.rounds, time.Since(begin).Round(time.Millisecond))
	if err := os.Remove(pace); err != nil {
		t.Fatal(err)
	}
	code, out, errs := j.wait()
	run.digest = trafficReference(t, run)
	if got := trafficDigest(out); code != 0 || got != run.digest {
		t.Fatalf("checkpointed traffic (seed %d): status %d, digest %q, want %q\n%s", run.seed, code, got, run.digest, errs)
	}
	checkTransports(t, out, []string{"n1", "n1", "n2", "n2"})
	t.Logf("where the ranks were when a checkpoint stopped them (parts of rounds that took 250 ms or more, over the 4 ranks): %s", stalls(out))
	noSurvivors(t, "after the checkpointed job", func() []int { return marked(j.mark) })
	return run
}

// pacedTraffic starts r's job with crs=criu on two nodes, paced while
// the returned file exists, with more of traffic's flags, sets r.ref, and
// waits for its first "round" line.
func pacedTraffic(t *testing.T, r *trafficRun, more ...string) (*job, string) {
	t.Helper()
	dir := t.TempDir()
	pace := filepath.Join(t.TempDir(), "pace")
	if err := os.WriteFile(pace, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes), "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", dir}, criuParams()...)
	if r.crcp != "" {
		args = append(args, "--mca", "crcp", r.crcp)
	}
	args = append(append(args, r.args()...), "-pace", trafficPace, "-pace-while", pace)
	j := start(t, append(args, more...)...)
	j.waitFor("the first rounds", func(lines []string, _ string) bool { return lastRound(lines) > 0 })
	r.ref = refOf(t, j, dir)
	return j, pace
}

// trafficReference is the digest of an uninterrupted, unpaced run of r's
// seed and rounds, without C/R, with more of traffic's flags.
func trafficReference(t *testing.T, r trafficRun, more ...string) string {
	t.Helper()
	code, out, errs := start(t, append(append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes)}, r.args()...), more...)...).wait()
	d := trafficDigest(out)
	if code != 0 || d == "" {
		t.Fatalf("uninterrupted traffic: status %d, output %q\n%s", code, out, errs)
	}
	return d
}

// placement is where a restart puts the ranks.
type placement struct {
	name   string
	hosts  string
	mpirun string   // gompi-restart's --mpirun_opts
	nodes  []string // each rank's node, for the transports
}

var placements = []placement{
	{"one node", "n1 slots=4\n", "", []string{"n1", "n1", "n1", "n1"}},
	{"four nodes", "a slots=1\nb slots=1\nc slots=1\nd slots=1\n", "", []string{"a", "b", "c", "d"}},
	{"two nodes by node", twoNodes, "--map-by node", []string{"n1", "n2", "n1", "n2"}},
}

// restartSample restarts two or three of the runs' sequences, drawn, each
// on another placement, and checks each ends with its run's digest.
func restartSample(t *testing.T, rng *rand.Rand, runs []trafficRun) {
	t.Helper()
	type pick struct{ run, seq int }
	var all []pick
	for i, r := range runs {
		for s := range r.seqs {
			all = append(all, pick{i, s})
		}
	}
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	order := rng.Perm(len(placements))
	for k, p := range all[:min(len(all), 2+rng.IntN(2))] {
		pl, r := placements[order[k]], runs[p.run]
		args := append(criuParams(), "-s", strconv.Itoa(p.seq), "--hostfile", hostfile(t, pl.hosts))
		if pl.mpirun != "" {
			args = append(args, "--mpirun_opts", pl.mpirun)
		}
		begin := time.Now()
		j := startProg(t, "gompi-restart", append(args, r.ref.Path())...)
		code, out, errs := j.wait()
		t.Logf("restart of seed %d's sequence %d on %s: %v", r.seed, p.seq, pl.name, time.Since(begin).Round(time.Millisecond))
		if got := trafficDigest(out); code != 0 || got != r.digest {
			t.Fatalf("traffic (seed %d) restarted from sequence %d on %s: status %d, digest %q, want %q\n%s", r.seed, p.seq, pl.name, code, got, r.digest, errs)
		}
		checkTransports(t, out, pl.nodes)
		noSurvivors(t, "after the restarted job", func() []int { return marked(j.mark) })
	}
}

// checkTransports checks each rank reached each peer over sm when on
// one node and tcp otherwise ("transports rank=R ..." lines).
func checkTransports(t *testing.T, out []string, nodes []string) {
	t.Helper()
	checkTransportsOver(t, out, nodes, "sm")
}

// checkTransportsOver is checkTransports with local the transport within
// a node.
func checkTransportsOver(t *testing.T, out []string, nodes []string, local string) {
	t.Helper()
	seen := 0
	for _, l := range out {
		rest, ok := strings.CutPrefix(l, "transports rank=")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		r, err := strconv.Atoi(f[0])
		if err != nil || r < 0 || r >= len(nodes) {
			t.Fatalf("line %q", l)
		}
		want := []string{}
		for q := range nodes {
			switch {
			case q == r:
				want = append(want, "self")
			case nodes[q] == nodes[r]:
				want = append(want, local)
			default:
				want = append(want, "tcp")
			}
		}
		if !slices.Equal(f[1:], want) {
			t.Errorf("rank %d on %v reached its peers over %v, want %v", r, nodes, f[1:], want)
		}
		seen++
	}
	if seen != len(nodes) {
		t.Errorf("%d ranks said their transports, want %d:\n%s", seen, len(nodes), strings.Join(out, "\n"))
	}
}

// stalls sums the ranks' "stalls rank=R part=N ..." lines, by part.
func stalls(out []string) string {
	var parts []string
	sum := map[string]int{}
	for _, l := range out {
		if !strings.HasPrefix(l, "stalls rank=") {
			continue
		}
		for _, f := range strings.Fields(l)[2:] {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.Atoi(v)
			if _, ok := sum[k]; !ok {
				parts = append(parts, k)
			}
			sum[k] += n
		}
	}
	for i, k := range parts {
		parts[i] = fmt.Sprintf("%s=%d", k, sum[k])
	}
	return strings.Join(parts, " ")
}

// trafficDigest finds traffic's closing line's digest.
func trafficDigest(out []string) string {
	for _, l := range out {
		if i := strings.Index(l, " digest="); strings.HasPrefix(l, "traffic: ") && i > 0 {
			return l[i+len(" digest="):]
		}
	}
	return ""
}

// lastRound is the last "round N" rank 0 printed.
func lastRound(lines []string) int {
	for i := len(lines) - 1; i >= 0; i-- {
		var n int
		if _, err := fmt.Sscanf(lines[i], "round %d", &n); err == nil {
			return n
		}
	}
	return 0
}

// envUint reads a knob from the environment, def when unset.
func envUint(t *testing.T, name string, def uint64) uint64 {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return v
}

// quiescedFDs checks what every rank and its init hold while stopped
// after their dump (--stop leaves them as CRIU found them): only pipes
// at the standard descriptors and at those gompid gave the init (3 to 6:
// the secret, the lifeline's two, the init's status), /dev/null, files
// open read-only (the Go runtime's cgroup limits), and the Go runtime's
// own epoll, eventfd and pidfd. A socket, a pipe anywhere else (one
// inherited from whoever started gompirun) or a file open for writing
// fails.
func quiescedFDs(t *testing.T, j *job) {
	t.Helper()
	ranks, inits := 0, 0
	for _, pid := range marked(j.mark) {
		cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(string(cl), "\x00")
		switch {
		case len(args) > 1 && args[1] == rankinit.Arg:
			inits++
		case filepath.Base(args[0]) == "traffic":
			ranks++
		default:
			continue
		}
		if st := procState(pid); st != 'T' {
			t.Errorf("pid %d (%s) is in state %c after --stop, want T", pid, args[0], st)
		}
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if why := strayFD(pid, e.Name()); why != "" {
				t.Errorf("pid %d (%s) holds descriptor %s at its dump: %s", pid, filepath.Base(args[0]), e.Name(), why)
			}
		}
	}
	if ranks != 4 || inits != 4 {
		t.Errorf("found %d ranks and %d rank inits, want 4 of each", ranks, inits)
	}
}

// strayFD says what is wrong with descriptor fd of pid at a dump, or "".
func strayFD(pid int, fd string) string {
	target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd))
	if err != nil {
		return ""
	}
	n, _ := strconv.Atoi(fd)
	switch {
	case strings.HasPrefix(target, "socket:"):
		return "a socket, " + target
	case strings.HasPrefix(target, "pipe:"):
		if n > 6 {
			return "a pipe gompid did not give it, " + target
		}
		return ""
	case slices.Contains([]string{"anon_inode:[eventpoll]", "anon_inode:[eventfd]", "anon_inode:[pidfd]", os.DevNull}, target):
		return ""
	case strings.HasPrefix(target, "/"):
		info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd))
		for _, l := range strings.Split(string(info), "\n") {
			var flags int
			if _, err := fmt.Sscanf(l, "flags:\t%o", &flags); err == nil && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
				return "a file open for writing, " + target
			}
		}
		return ""
	}
	return "not a descriptor a rank holds at its dump: " + target
}

// procState is pid's state letter from /proc (the one after the command).
func procState(pid int) byte {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if i := bytes.LastIndexByte(st, ')'); err == nil && i >= 0 && i+2 < len(st) {
		return st[i+2]
	}
	return '?'
}
