package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The crs=criu tests of a C program (issue 24 item 1): examples/c/mixloop.c,
// with no line of C/R code, built with gompicc against gompi's libmpi, is
// checkpointed from outside as plainheat and traffic are. The Go runtime
// inside libmpi answers the quiesce as a Go rank's library does, wherever
// the C program is: inside a blocking or non-blocking collective, in a
// point-to-point wait, between calls, with its own pthread computing.

// cMixloop is the compiled mixloop (built once, by cProgram), as C and,
// with gompicxx, as C++.
var cMixloop struct {
	once    sync.Once
	path    string
	cxxPath string
	prefix  string // of the C interface it links
	err     error
	skip    string
}

// cProgram returns mixloop built with gompicc: against GOMPI_C_PREFIX's C
// interface when set (.ci/run builds it once for the C tests), else
// against one scripts/build-c.sh builds into the tests' tree, next to the
// harness's commands (so the script builds none of its own). The
// library is never a race build: a rank is not, under CRIU.
func cProgram(t *testing.T) string {
	t.Helper()
	cMixloop.once.Do(func() {
		if _, err := exec.LookPath("gcc"); err != nil {
			cMixloop.skip = "no gcc to build the C program with"
			return
		}
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			cMixloop.err = err
			return
		}
		modRoot := filepath.Dir(strings.TrimSpace(string(out)))
		prefix := os.Getenv("GOMPI_C_PREFIX")
		if _, err := os.Stat(filepath.Join(prefix, "lib", "libmpi_abi.so.1")); prefix == "" || err != nil {
			prefix = filepath.Join(root, "c")
			cMixloop.err = buildC(modRoot, prefix)
			if cMixloop.err != nil {
				return
			}
		}
		cMixloop.prefix = prefix
		cMixloop.path, cMixloop.cxxPath = filepath.Join(bin, "mixloop"), filepath.Join(bin, "mixloop++")
		src := filepath.Join(modRoot, "examples", "c", "mixloop.c")
		for _, b := range []struct{ cc, out, lang string }{{"gompicc", cMixloop.path, "c"}, {"gompicxx", cMixloop.cxxPath, "c++"}} {
			cc := exec.Command(filepath.Join(prefix, "bin", b.cc), "-O2", "-o", b.out, "-x", b.lang, src, "-x", "none", "-lpthread")
			if out, err := cc.CombinedOutput(); err != nil {
				cMixloop.err = fmt.Errorf("%s mixloop.c: %w\n%s", b.cc, err, out)
				return
			}
		}
	})
	if cMixloop.skip != "" {
		t.Skip(cMixloop.skip)
	}
	if cMixloop.err != nil {
		t.Fatal(cMixloop.err)
	}
	return cMixloop.path
}

// cxxProgram returns mixloop built as C++ with gompicxx (see cProgram).
func cxxProgram(t *testing.T) string {
	t.Helper()
	cProgram(t)
	return cMixloop.cxxPath
}

// buildC installs gompi's C interface into prefix with scripts/build-c.sh,
// its bin/ holding links to the harness's commands first (the script
// builds only those missing: gompi, the umbrella, and gompi-info).
func buildC(modRoot, prefix string) error {
	if err := os.MkdirAll(filepath.Join(prefix, "bin"), 0o755); err != nil {
		return err
	}
	for _, c := range []string{"gompirun", "gompid", "gompi-checkpoint", "gompi-restart", "gompi-migrate", "gompi-ps"} {
		if err := os.Symlink(filepath.Join(bin, c), filepath.Join(prefix, "bin", c)); err != nil {
			return err
		}
	}
	cmd := exec.Command("bash", "scripts/build-c.sh", prefix)
	cmd.Dir = modRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("scripts/build-c.sh: %w\n%s", err, out)
	}
	return nil
}

// mixPace is the laggard's hold per iteration while the pace file exists:
// most of an iteration is then spent by the other ranks inside the
// collectives that follow it.
const mixPace = "8000"

// mixIters is enough iterations for want checkpoints and the migration
// and recovery after them, with room (measured: 8 to 15 paced iterations
// go by per checkpoint on a 2-core machine, at load 12 under -race, but 50
// at load 20); the rest run unpaced, about 3 ms each. TestCRIUCProgram
// also holds the job at three quarters of them until its checkpoints are
// done (mixloop's -hold-at), so a slower machine costs time, not
// checkpoints.
func mixIters(want int) int { return 300 + 30*want }

// mixSum is the checksum of an uninterrupted 4-rank run of iters
// iterations, without C/R, with mt as mixloop's -mt.
func mixSum(t *testing.T, prog string, iters int, mt string) string {
	t.Helper()
	code, out, errs := start(t, "-np", "4", "--hostfile", hostfile(t, twoNodes), prog, "-iters", strconv.Itoa(iters), "-mt", mt).wait()
	sum, ok := heatChecksum(out, "")
	if code != 0 || !ok {
		t.Fatalf("uninterrupted mixloop: status %d, output %q\n%s", code, out, errs)
	}
	return sum
}

// lastIter is the last "iter N" mixloop's rank 0 printed.
func lastIter(lines []string) int {
	for i := len(lines) - 1; i >= 0; i-- {
		var n int
		if _, err := fmt.Sscanf(lines[i], "iter %d", &n); err == nil {
			return n
		}
	}
	return 0
}

// TestCRIUCProgram checkpoints mixloop, a C program with no C/R code, as 4
// ranks on two nodes with crs=criu: at random moments (GOMPI_CCRIU_MOMENTS,
// default 20; the first with --stop: every rank stays stopped until
// SIGCONT), most inside its collectives while the iteration's laggard is
// held, its pthread computing (and, with -mt 1, drawn, in an Allreduce
// of its own), the job held at three quarters of its iterations while
// they last; then gompi-migrate moves node n2's ranks to n1, a checkpoint
// saves them there, a rank is killed and errmgr autor restores every rank
// from that checkpoint, and the restored ranks are checkpointed again.
// The job must end with the checksum of an uninterrupted run, never
// started anew. A random sample of the first sequences is restarted, each
// on another placement (hence other transports: every pair on one node
// over sm, on four nodes over tcp), and must end with that checksum
// again; one more, paced again, ends on SIGTERM to its gompirun, which
// the restored inits forward to the ranks. Everything random comes from
// one seed, logged (GOMPI_CCRIU_SEED replays a run).
func TestCRIUCProgram(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("CRIU and the rank init's PID namespace need root")
	}
	prog := cProgram(t)
	seed := envUint(t, "GOMPI_CCRIU_SEED", rand.Uint64())
	moments := int(envUint(t, "GOMPI_CCRIU_MOMENTS", 20))
	t.Logf("seed %d (GOMPI_CCRIU_SEED=%d replays this run), %d moments", seed, seed, moments)
	rng := rand.New(rand.NewPCG(seed, 24))
	iters := mixIters(moments)
	// With -mt 1 the program's pthread is in MPI calls of its own too
	// (an Allreduce on a duplicate of MPI_COMM_WORLD) when the checkpoints
	// come; drawn, as the CRCP is.
	mt := strconv.Itoa(rng.IntN(2))
	want := mixSum(t, prog, iters, mt)

	dir := t.TempDir()
	pace := filepath.Join(t.TempDir(), "pace")
	if err := os.WriteFile(pace, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	crcp := trafficCRCPs[rng.IntN(len(trafficCRCPs))]
	args := append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes), "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", dir, "--mca", "crcp", crcp,
		"--mca", "errmgr", "crmig,autor,default"}, criuParams()...)
	j := start(t, append(args, prog, "-iters", strconv.Itoa(iters), "-every", "25", "-pace-us", mixPace, "-pace-while", pace,
		"-hold-at", strconv.Itoa(iters*3/4), "-stalls", "1", "-mt", mt)...)
	j.waitFor("the first iterations", func(lines []string, _ string) bool { return lastIter(lines) > 0 })
	first := j.output()[0]
	ref := refOf(t, j, dir)

	begin := time.Now()
	seqs := 0
	for seqs < moments && lastIter(j.output()) < iters*9/10 {
		time.Sleep(time.Duration(rng.Int64N(int64(150 * time.Millisecond))))
		if seqs == 0 {
			checkpointCRIU(t, j, ref.Name, "0", "--stop")
			cRanksStopped(t, j, filepath.Base(prog))
			j.signal(syscall.SIGCONT)
		} else {
			checkpointCRIU(t, j, ref.Name, strconv.Itoa(seqs))
		}
		seqs++
	}
	t.Logf("crcp %s, -mt %s: %d checkpoints by iteration %d of %d in %v", crcp, mt, seqs, lastIter(j.output()), iters, time.Since(begin).Round(time.Millisecond))
	if seqs < moments {
		t.Fatalf("only %d of %d checkpoints before the iterations ran out", seqs, moments)
	}
	next := migrateC(t, j, ref.Name)
	recoverC(t, j, ref.Name, next)
	if err := os.Remove(pace); err != nil {
		t.Fatal(err)
	}
	code, out, errs := j.wait()
	if got, _ := heatChecksum(out, ""); code != 0 || got != want {
		t.Fatalf("checkpointed, migrated and recovered mixloop: status %d, checksum %q, want %q\n%s", code, got, want, errs)
	}
	t.Logf("where the ranks were when something held them 250 ms or more (checkpoints, the migration, the recovery), over the 4 ranks: %s", stalls(out))
	if n := strings.Count("\n"+strings.Join(out, "\n")+"\n", "\n"+first+"\n"); n != 1 {
		t.Errorf("mixloop's first progress line %q printed %d times: the job started anew", first, n)
	}
	noSurvivors(t, "after the checkpointed job", func() []int { return marked(j.mark) })

	order := rng.Perm(len(placements))
	picked := rng.Perm(seqs)
	for k := range min(2, seqs) {
		restartC(t, ref.Path(), picked[k], placements[order[k]], want)
	}
	// The same pace file again holds the restored ranks, so they are
	// still running when gompirun is signalled.
	if err := os.WriteFile(pace, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	signalRestoredC(t, ref.Path(), picked[len(picked)-1])
}

// signalRestoredC restarts sequence seq and, once the restored ranks run,
// sends SIGTERM to gompirun: it reaches each restored C rank through its
// restored init, the job ends with 128+15 and leaves nothing behind.
func signalRestoredC(t *testing.T, refPath string, seq int) {
	t.Helper()
	r := startProg(t, "gompi-restart", append(criuParams(), "-s", strconv.Itoa(seq), "--hostfile", hostfile(t, twoNodes), refPath)...)
	r.waitFor("the restored ranks' iterations", func(lines []string, _ string) bool { return lastIter(lines) > 0 })
	r.waitConnected()
	r.signal(syscall.SIGTERM)
	if code, _, errs := r.wait(); code != 128+int(syscall.SIGTERM) {
		t.Errorf("restored mixloop after SIGTERM to gompirun: status %d, want 143\n%s", code, errs)
	}
	noSurvivors(t, "after SIGTERM to the restored job", func() []int { return marked(r.mark) })
}

// cRanksStopped checks that every rank of j (a process named name) is
// stopped, as gompi-checkpoint --stop leaves them.
func cRanksStopped(t *testing.T, j *job, name string) {
	t.Helper()
	var stopped, ranks int
	for _, pid := range marked(j.mark) {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.TrimSpace(string(comm)) != name {
			continue
		}
		ranks++
		if procState(pid) == 'T' {
			stopped++
		}
	}
	if ranks != 4 || stopped != 4 {
		t.Fatalf("after --stop: %d of %d ranks stopped, want all 4", stopped, ranks)
	}
}

// migrationSeq finds the sequence a migration took in gompi-migrate's
// report.
var migrationSeq = regexp.MustCompile(`migration sequence (\d+)`)

// migrateC moves node n2's ranks of j to n1 with gompi-migrate, waits for
// them to run there, checkpoints every rank on n1, and returns the
// sequence that checkpoint took.
func migrateC(t *testing.T, j *job, ref string) int {
	t.Helper()
	begin := time.Now()
	code, out, errs := tool(t, "gompi-migrate", pidArg(j), "--off", "n2")
	m := migrationSeq.FindStringSubmatch(out)
	if code != 0 || m == nil || !strings.Contains(out, "Rank 2: n2 -> n1") || !strings.Contains(out, "Rank 3: n2 -> n1") {
		t.Fatalf("gompi-migrate --off n2: status %d\n%s%s\ngompirun:\n%s", code, out, errs, j.errText())
	}
	t.Logf("gompi-migrate --off n2: %v", time.Since(begin).Round(time.Millisecond))
	j.waitFor("ranks 2 and 3 connected on n1", func([]string, string) bool {
		js := psNow(j)
		if js == nil {
			return false
		}
		on := 0
		for _, r := range js.Ranks {
			if (r.Rank == 2 || r.Rank == 3) && r.Node == "n1" && r.State == "connected" {
				on++
			}
		}
		return on == 2
	})
	seq, _ := strconv.Atoi(m[1])
	checkpointCRIU(t, j, ref, strconv.Itoa(seq+1))
	return seq + 1
}

// recoverC kills rank 1's init (its whole PID namespace) and waits for
// autor to restore every rank from sequence last; the restored ranks are
// then checkpointed.
func recoverC(t *testing.T, j *job, ref string, last int) {
	t.Helper()
	kill(t, "rank 1", j.waitPID(1, ""))
	j.waitFor("autor's recovery", func(_ []string, errs string) bool {
		return strings.Contains(errs, "gompirun: recovery 1: every rank runs again")
	})
	if errs := j.errText(); !strings.Contains(errs, fmt.Sprintf("every rank restarts from sequence %d", last)) {
		t.Fatalf("autor did not restore from sequence %d:\n%s", last, errs)
	}
	j.waitConnected()
	checkpointCRIU(t, j, ref, strconv.Itoa(last+1))
}

// restartC restarts sequence seq of the snapshot at refPath on pl and
// checks the restored job ends with want.
func restartC(t *testing.T, refPath string, seq int, pl placement, want string) {
	t.Helper()
	args := append(criuParams(), "-s", strconv.Itoa(seq), "--hostfile", hostfile(t, pl.hosts))
	if pl.mpirun != "" {
		args = append(args, "--mpirun_opts", pl.mpirun)
	}
	begin := time.Now()
	r := startProg(t, "gompi-restart", append(args, refPath)...)
	code, out, errs := r.wait()
	t.Logf("restart of sequence %d on %s: %v", seq, pl.name, time.Since(begin).Round(time.Millisecond))
	if got, _ := heatChecksum(out, ""); code != 0 || got != want {
		t.Errorf("mixloop restarted from sequence %d on %s: status %d, checksum %q, want %q\n%s", seq, pl.name, code, got, want, errs)
	}
	noSurvivors(t, "after the restarted job", func() []int { return marked(r.mark) })
}

// TestCRIUCSignal: a C++ rank restored from its CRIU images still ends on
// a signal it does not handle. mixloop built as C++ (which handles none)
// runs as one rank with crs=criu and -mt 1 (its pthread in MPI calls
// too), paced so it outlasts the test, and is checkpointed
// with --term; gompi-restart restores it, and SIGTERM to the restored C
// process (the only child of its restored init) ends it: gompirun reports
// the rank killed by signal 15 and exits with 128+15, as for a rank never
// checkpointed. One rank, so no peer's report of the loss comes first.
func TestCRIUCSignal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("CRIU and the rank init's PID namespace need root")
	}
	prog := cxxProgram(t)
	dir := t.TempDir()
	j := start(t, append([]string{"-np", "1", "--host", "n1", "-am", "ft-enable-cr", "--mca", "snapc_base_global_snapshot_dir", dir},
		append(criuParams(), prog, "-iters", "1000000", "-every", "10", "-pace-us", mixPace, "-mt", "1")...)...)
	j.waitFor("the first iterations", func(lines []string, _ string) bool { return lastIter(lines) > 0 })
	ref := refOf(t, j, dir)
	checkpointCRIU(t, j, ref.Name, "0", "--term")
	if code, _, errs := j.wait(); code != 0 {
		t.Fatalf("job after --term: status %d\n%s", code, errs)
	}
	// The rank maps gompi's library: the snapshot records it, so that a
	// restore after it changed is refused naming it (crs/criu's libs.go).
	meta, err := os.ReadFile(filepath.Join(ref.Path(), "0", "gompi_snapshot_0.ckpt", "snapshot_meta"))
	if err != nil || !regexp.MustCompile(`criu_lib_\d+ value="\d+ /\S*/libmpi_abi\.so\.1"`).Match(meta) {
		t.Errorf("the snapshot does not record libmpi_abi.so.1 (%v):\n%s", err, meta)
	}
	if !regexp.MustCompile(`criu_lib_\d+ value="\d+ /\S*/libstdc\+\+\.so\.6[.\d]*"`).Match(meta) {
		t.Errorf("the snapshot of the C++ rank does not record libstdc++:\n%s", meta)
	}
	r := startProg(t, "gompi-restart", append(criuParams(), ref.Path())...)
	at := lastIter(j.output())
	r.waitFor("the restored rank's iterations", func(lines []string, _ string) bool { return lastIter(lines) > at })
	init := r.waitPID(0, "")
	kids := scanProcs(func(pid int) bool { p, _ := statOf(pid); return p == init })
	if len(kids) != 1 {
		t.Fatalf("the restored init %d has children %v, want the rank alone", init, kids)
	}
	if err := syscall.Kill(kids[0], syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, _, errs := r.wait()
	if code != 128+int(syscall.SIGTERM) || !strings.Contains(errs, "rank 0 on node ") || !strings.Contains(errs, "was killed by signal 15 (terminated)") {
		t.Errorf("restored C rank after SIGTERM: gompirun's status %d, want 143 and the rank reported killed by signal 15:\n%s", code, errs)
	}
	noSurvivors(t, "after SIGTERM to the restored rank", func() []int { return marked(r.mark) })
}

// TestCRIUCLibraryChanged: a C rank maps gompi's library, and CRIU maps it
// again from its path at a restore: one rebuilt since the checkpoint is
// refused before CRIU runs, naming the library. mixloop runs as one rank
// with its own copy of libmpi_abi.so.1 (LD_LIBRARY_PATH), is checkpointed
// with --term, the copy grows a byte, and gompi-restart fails saying so.
func TestCRIUCLibraryChanged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("CRIU and the rank init's PID namespace need root")
	}
	prog := cProgram(t)
	libs := t.TempDir()
	lib := filepath.Join(libs, "libmpi_abi.so.1")
	b, err := os.ReadFile(filepath.Join(cMixloop.prefix, "lib", "libmpi_abi.so.1"))
	if err == nil {
		err = os.WriteFile(lib, b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LD_LIBRARY_PATH", libs)
	dir := t.TempDir()
	j := start(t, append([]string{"-np", "1", "--host", "n1", "-am", "ft-enable-cr", "--mca", "snapc_base_global_snapshot_dir", dir},
		append(criuParams(), prog, "-iters", "1000000", "-every", "10", "-pace-us", mixPace)...)...)
	j.waitFor("the first iterations", func(lines []string, _ string) bool { return lastIter(lines) > 0 })
	ref := refOf(t, j, dir)
	checkpointCRIU(t, j, ref.Name, "0", "--term")
	if code, _, errs := j.wait(); code != 0 {
		t.Fatalf("job after --term: status %d\n%s", code, errs)
	}
	if err := os.WriteFile(lib, append(b, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	r := startProg(t, "gompi-restart", append(criuParams(), ref.Path())...)
	code, _, errs := r.wait()
	if want := fmt.Sprintf("the library %s changed since the checkpoint (%d bytes then, %d now)", lib, len(b), len(b)+1); code == 0 ||
		!strings.Contains(errs, want) || strings.Contains(errs, "CRIU's restore failed") {
		t.Errorf("restart after libmpi_abi.so.1 changed: status %d, want a refusal saying %q before CRIU runs:\n%s", code, want, errs)
	}
	noSurvivors(t, "after the refused restart", func() []int { return marked(r.mark) })
}
