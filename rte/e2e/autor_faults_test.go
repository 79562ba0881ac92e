package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"gompi/components/snapc/full"
	"gompi/components/sstore/stage"
	"gompi/frameworks/sstore/compress"
	"gompi/frameworks/sstore/snapshot"
	"gompi/rte"
)

// The autor tests run examples/heat under errmgr autor and hit it with
// faults at chosen moments: during a checkpoint, during a recovery, and
// one node after another. Each must end with the checksum of a run that
// never failed, leave no process behind, and leave the committed
// sequences of its reference as they were.

// Heat's size and steps for the autor tests: small, slowed down (-sleep)
// so the faults land while it runs; its "step" lines wake the tests' waits.
const autorSize, autorSteps = "48", "400"

var autorHeat = []string{"-size", autorSize, "-steps", autorSteps, "-sleep", "5ms", "-every", "10"}

// heatSums caches the checksum of uninterrupted heat runs by size and steps.
var heatSums = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// heatWant is the checksum of heat on autorSize and autorSteps run without
// a fault: it does not depend on the rank count (rank 0 hashes the whole
// grid in row order), so one rank computes it, once for all tests.
func heatWant(t *testing.T) string {
	t.Helper()
	return heatWantSteps(t, autorSteps)
}

// autorJob is heat on 4 ranks under errmgr autor with C/R on and sstore
// stage: global snapshots in dir, the nodes' local copies under local.
type autorJob struct {
	*job
	dir, local string
}

// startAutor starts an autorJob over the nodes of the hostfile text hosts,
// with more gompirun arguments (--mca settings) in extra.
func startAutor(t *testing.T, hosts string, extra ...string) *autorJob {
	t.Helper()
	a := &autorJob{dir: t.TempDir(), local: t.TempDir()}
	args := []string{"-np", "4", "--hostfile", hostfile(t, hosts), "-am", "ft-enable-cr",
		"--mca", "errmgr", "autor,default", "--mca", "snapc_base_global_snapshot_dir", a.dir,
		"--mca", "sstore", "stage", "--mca", "sstore_stage_local_snapshot_dir", a.local}
	args = append(append(args, extra...), filepath.Join(bin, "heat"))
	a.job = start(t, append(args, autorHeat...)...)
	return a
}

// waitErr waits until gompirun's stderr holds s.
func (j *job) waitErr(s string) {
	j.t.Helper()
	j.waitFor(fmt.Sprintf("%q on stderr", s), func(_ []string, stderr string) bool { return strings.Contains(stderr, s) })
}

// waitPID waits (woken by the job's output) until gompi-ps shows rank
// (rank >= 0, connected) or node's daemon (rank < 0) with its pid.
func (j *job) waitPID(rank int, node string) int {
	j.t.Helper()
	what := fmt.Sprintf("rank %d connected", rank)
	if rank < 0 {
		what = "the daemon of " + node
	}
	var pid int
	j.waitFor(what, func([]string, string) bool {
		pid = rankOrDaemonPID(j.t, j, rank, node)
		return pid != 0
	})
	return pid
}

// checkpoint runs gompi-checkpoint on the job and wants sequence seq.
func (a *autorJob) checkpoint(seq int) {
	a.t.Helper()
	ref := refOf(a.t, a.job, a.dir)
	cmd := quickTool("gompi-checkpoint", pidArg(a.job))
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	if want := fmt.Sprintf("Snapshot Ref.: %3d %s\n", seq, ref.Name); err != nil || out.String() != want {
		a.t.Fatalf("gompi-checkpoint: %v, stdout %q (want %q)\n%s", err, out.String(), want, errs.String())
	}
	if strings.Contains(errs.String(), "WARNING: DATA RACE") {
		a.t.Errorf("the race detector found a race in gompi-checkpoint:\n%s", errs.String())
	}
}

// waitConnected waits (woken by the job's output) until every rank of
// the job (4) is connected.
func (j *job) waitConnected() {
	j.t.Helper()
	j.waitFor("every rank connected", func([]string, string) bool {
		js := psNow(j)
		if js == nil || len(js.Ranks) != 4 {
			return false
		}
		for _, r := range js.Ranks {
			if r.State != "connected" {
				return false
			}
		}
		return true
	})
}

// finish waits for the job and checks it ended well: status 0, the
// uninterrupted checksum, each of reports on stderr, no process left.
func (a *autorJob) finish(want string, reports ...string) string {
	a.t.Helper()
	code, lines, errs := a.wait()
	if code != 0 {
		a.t.Fatalf("heat under autor: status %d\nstderr:\n%s", code, errs)
	}
	if got, _ := heatChecksum(lines, ""); got != want {
		a.t.Errorf("checksum %q after the recoveries, want %q (uninterrupted)\nstderr:\n%s", got, want, errs)
	}
	for _, r := range reports {
		if !strings.Contains(errs, r) {
			a.t.Errorf("gompirun's report lacks %q:\n%s", r, errs)
		}
	}
	noSurvivors(a.t, "after the recoveries", func() []int { return marked(a.mark) })
	return errs
}

// kill sends SIGKILL to pid, which must be a process of the test's (never
// 0 or less: that would signal the test's own process group).
func kill(t *testing.T, what string, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Fatalf("no pid for %s", what)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s (pid %d): %v", what, pid, err)
	}
}

// committedData hashes, for each committed sequence of ref, every file
// global storage holds of it.
func committedData(t *testing.T, ref snapshot.Ref) map[int]string {
	t.Helper()
	meta, err := snapshot.ReadGlobal(ref)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, s := range meta.Committed() {
		h := sha256.New()
		err := filepath.WalkDir(ref.SeqDir(s), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(ref.SeqDir(s), p)
			fmt.Fprintf(h, "%s %d\n", rel, len(b))
			h.Write(b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		out[s] = hex.EncodeToString(h.Sum(nil))
	}
	return out
}

// checkIntact checks that the sequences of before are still committed
// with the same data, and that every committed sequence of ref verifies
// (each file of each rank against the checksum its snapshot_meta records).
func checkIntact(t *testing.T, ref snapshot.Ref, before map[int]string) {
	t.Helper()
	after := committedData(t, ref)
	for s, h := range before {
		if after[s] != h {
			t.Errorf("committed sequence %d of %s changed (or was uncommitted) during the recoveries", s, ref.Name)
		}
	}
	meta, err := snapshot.ReadGlobal(ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range meta.Committed() {
		p, err := snapshot.ChooseSeq(ref, meta, s)
		if err == nil {
			err = p.VerifyAllWith(func(dir string, l *snapshot.LocalMeta) error { return compress.Verify(t.Context(), dir, l) })
		}
		if err != nil {
			t.Errorf("committed sequence %d: %v", s, err)
		}
	}
}

// TestAutorKillDuringCheckpoint kills a rank while a periodic checkpoint
// (sequence 1) is held at a point of its state machine: at seq, recorded
// uncommitted, nothing written, every rank held at its target safe point
// (so the job cannot end first); at commit, every local snapshot written,
// cached on its node and drained to global storage, but no commit mark
// (the ranks compute on; they are far from done when the test kills).
// Sequence 1 stays uncommitted, every rank restarts from sequence 0 though
// its node caches the newer 1 (ranks restarting from different sequences
// would not give the uninterrupted checksum), and sequence 0 is untouched.
func TestAutorKillDuringCheckpoint(t *testing.T) {
	want := heatWant(t)
	for _, c := range []struct {
		point  string
		victim int
	}{
		{full.PauseSeq, 1},
		{full.PauseCommit, 2},
	} {
		t.Run(c.point, func(t *testing.T) {
			j := startAutor(t, twoNodes, "--mca", "snapc_base_periodic", "0.2", "--mca", full.ParamPauseAt, c.point+":1")
			pid := j.waitPID(c.victim, "")
			ref := refOf(t, j.job, j.dir)
			j.waitErr(full.PauseMessage(c.point, 1))
			before := committedData(t, ref)
			if got := slices.Sorted(maps.Keys(before)); !reflect.DeepEqual(got, []int{0}) {
				t.Fatalf("committed before the fault: %v, want [0]", got)
			}
			kill(t, fmt.Sprintf("rank %d", c.victim), pid)
			j.finish(want,
				fmt.Sprintf("rank %d on node %s was killed by signal 9 (killed); autor: recovery 1 of 5: every rank restarts from sequence 0", c.victim, []string{"n1", "n1", "n2", "n2"}[c.victim]),
				"gompirun: recovery 1: restarting 4 ranks from sequence 0 of "+ref.Name,
				"gompirun: recovery 1: every rank runs again")
			yes, no := committed(t, ref)
			if !slices.Contains(yes, 0) || slices.Contains(yes, 1) || !slices.Contains(no, 1) {
				t.Errorf("committed %v, uncommitted %v: want 0 committed and the interrupted 1 not", yes, no)
			}
			checkIntact(t, ref, before)
		})
	}
}

// fetchHold holds a restarting daemon in its fetch of one rank's snapshot
// with stage's test hook (sstore_stage_test_hold_fetch NODE:RANK:FIFO):
// the daemon reads a named pipe to its end before it fetches. The moment
// its open meets the test's is the event the test waits for: the recovery
// is under way (the daemon attached, its ranks being started) and cannot
// be over. (The snapshot's own files cannot hold it: they are opened
// without blocking, and a pipe in their place is refused as damaged.)
type fetchHold struct {
	t      *testing.T
	fifo   string
	opened chan *os.File // the pipe's write end once a reader opened it (nil: failed)
	w      *os.File      // received from opened
	got    bool
	once   sync.Once
}

// newFetchHold makes the pipe that will hold node's fetch of rank, and
// returns the options that set the hook for the job.
func newFetchHold(t *testing.T, node string, rank int) (*fetchHold, []string) {
	t.Helper()
	h := &fetchHold{t: t, fifo: filepath.Join(t.TempDir(), "hold"), opened: make(chan *os.File, 1)}
	if err := unix.Mkfifo(h.fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		f, err := os.OpenFile(h.fifo, os.O_WRONLY, 0) // returns once a reader opened the pipe
		if err != nil {
			f = nil
		}
		h.opened <- f
	}()
	t.Cleanup(func() {
		if !h.got {
			// Nobody came: let the writer's open return.
			if r, err := os.OpenFile(h.fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				h.w, h.got = <-h.opened, true
				r.Close()
			}
		}
		h.release()
	})
	return h, []string{"--mca", stage.ParamHoldFetch, fmt.Sprintf("%s:%d:%s", node, rank, h.fifo)}
}

// wait waits until a daemon arrived at the hold.
func (h *fetchHold) wait(j *job) {
	h.t.Helper()
	select {
	case h.w = <-h.opened:
		h.got = true
		if h.w == nil {
			h.t.Fatal("could not open the hold's pipe")
		}
	case <-j.done:
		h.t.Fatalf("the job ended (status %d) before a daemon fetched the held snapshot; stderr:\n%s", j.code, j.errText())
	case <-time.After(runBound):
		h.t.Fatalf("no daemon fetched the held snapshot within %v; stderr:\n%s", runBound, j.errText())
	}
}

// release ends the hold: the pipe is removed, so the fetches of later
// recoveries pass, and its write end closed, so a daemon still reading it
// goes on (one that died meanwhile reads nothing).
func (h *fetchHold) release() {
	h.once.Do(func() {
		os.Remove(h.fifo)
		if h.w != nil {
			h.w.Close()
		}
	})
}

// newRankPID finds the process of rank of a restarted run of the job
// marked mark, started by its daemon but perhaps not connected yet.
func newRankPID(t *testing.T, mark string, rank int) int {
	t.Helper()
	pids := scanProcs(func(pid int) bool {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		return err == nil && bytes.Contains(env, []byte("GOMPI_E2E_MARK="+mark+"\x00")) &&
			bytes.Contains(env, []byte("\x00"+rte.EnvRank+"="+fmt.Sprint(rank)+"\x00")) &&
			bytes.Contains(env, []byte("\x00"+rte.EnvRestartSeq+"="))
	})
	if len(pids) != 1 {
		t.Fatalf("restarted processes of rank %d: %v, want one", rank, pids)
	}
	return pids[0]
}

// TestAutorFaultDuringRecovery: a second fault while the job recovers from
// a first one (rank 2 on n2 killed after sequence 0 was committed) is
// absorbed, and the job ends as if it never failed. Each second fault is
// placed by a hold, not by timing:
//   - old-daemon: n1's daemon is stopped (SIGSTOP) before the first
//     fault, so the recovery waits for n1's ranks to end; once gompirun
//     reports the recovery, the daemon is killed: n1 is lost while the
//     recovery is under way, and joins it.
//   - new-daemon: n2's fetch of rank 3 is held (fetchHold): once the new
//     run's daemon of n2 waits there, that daemon is killed.
//   - new-rank: n1's fetch of rank 1 is held: n1's new daemon has started
//     rank 0 and waits before fetching rank 1; rank 0 is killed.
func TestAutorFaultDuringRecovery(t *testing.T) {
	want := heatWant(t)
	for _, c := range []struct {
		name    string
		reports []string
		extra   []string
	}{
		{"old-daemon", []string{
			"gompirun: recovery 1: restarting 4 ranks from sequence 0",
			"(rank 0 n1 -> n2, rank 1 n1 -> n2)",
			"node n1 was lost",
			"it joins recovery 1 under way",
			"gompirun: recovery 1: every rank runs again",
		}, nil},
		// The joining fault is no second recovery: with a limit of one,
		// the job still recovers once, its lost node included.
		{"old-daemon-limit", []string{
			"gompirun: recovery 1: restarting 4 ranks from sequence 0",
			"(rank 0 n1 -> n2, rank 1 n1 -> n2)",
			"it joins recovery 1 under way",
			"gompirun: recovery 1: every rank runs again",
		}, []string{"--mca", "errmgr_autor_max_recoveries", "1"}},
		{"new-daemon", []string{
			"gompirun: recovery 1: restarting 4 ranks from sequence 0",
			"(rank 2 n2 -> n1)",
			"node n2 was lost",
			"autor: recovery 2 of 5: every rank restarts from sequence 0",
			"gompirun: recovery 2: restarting 4 ranks from sequence 0",
			"(rank 3 n2 -> n1)",
			"gompirun: recovery 2: every rank runs again",
		}, nil},
		{"new-rank", []string{
			"gompirun: recovery 1: restarting 4 ranks from sequence 0",
			"(rank 2 n2 -> n1)",
			"rank 0 on node n1 was killed by signal 9 (killed); autor: recovery 2 of 5: every rank restarts from sequence 0",
			"gompirun: recovery 2: restarting 4 ranks from sequence 0",
			"(rank 0 n1 -> n2)",
			"gompirun: recovery 2: every rank runs again",
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h *fetchHold
			extra := c.extra
			if c.name == "new-daemon" || c.name == "new-rank" {
				node, rank := "n2", 3
				if c.name == "new-rank" {
					node, rank = "n1", 1
				}
				var opts []string
				h, opts = newFetchHold(t, node, rank)
				extra = append(extra, opts...)
			}
			j := startAutor(t, twoNodes, extra...)
			victim := j.waitPID(2, "")
			j.waitConnected()
			j.checkpoint(0)
			ref := refOf(t, j.job, j.dir)
			before := committedData(t, ref)

			switch c.name {
			case "old-daemon", "old-daemon-limit":
				d1 := j.waitPID(-1, "n1")
				if err := syscall.Kill(d1, syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				stopped := true
				t.Cleanup(func() {
					if stopped { // the test failed before killing it
						syscall.Kill(d1, syscall.SIGKILL)
					}
				})
				kill(t, "rank 2", victim)
				j.waitErr("autor: recovery 1 of ")
				if strings.Contains(j.errText(), "recovery 1: restarting") {
					t.Fatalf("the recovery went on without n1's daemon:\n%s", j.errText())
				}
				kill(t, "the daemon of n1", d1)
				stopped = false
			case "new-daemon", "new-rank":
				kill(t, "rank 2", victim)
				h.wait(j.job)
				j.waitErr("gompirun: recovery 1: restarting")
				if c.name == "new-daemon" {
					kill(t, "the new daemon of n2", rankOrDaemonPID(t, j.job, -1, "n2"))
				} else {
					kill(t, "the new rank 0", newRankPID(t, j.mark, 0))
				}
				h.release()
			}
			errs := j.finish(want, c.reports...)
			if strings.Contains(errs, "recovery 1: every rank runs again") != strings.HasPrefix(c.name, "old-daemon") {
				t.Errorf("the second fault did not land inside recovery 1:\n%s", errs)
			}
			checkIntact(t, ref, before)
		})
	}
}

// TestAutorDaemonsKilled kills the daemon of one node, then, once the job
// runs again, of another: ranks 2 and 3 end on n1. With
// errmgr_autor_max_recoveries 2 the job ends well; with 1 the second loss
// aborts it, saying why, and nothing is left running.
func TestAutorDaemonsKilled(t *testing.T) {
	want := heatWant(t)
	const uneven = "n1 slots=2\nn2 slots=1\nn3 slots=1\n" // ranks 0 and 1 on n1, 2 on n2, 3 on n3
	for _, max := range []int{2, 1} {
		t.Run(fmt.Sprint("max-", max), func(t *testing.T) {
			j := startAutor(t, uneven, "--mca", "errmgr_autor_max_recoveries", fmt.Sprint(max))
			j.waitConnected()
			ref := refOf(t, j.job, j.dir)
			var before map[int]string
			for i, node := range []string{"n2", "n3"} {
				pid := j.waitPID(-1, node)
				j.checkpoint(i)
				before = committedData(t, ref)
				kill(t, "the daemon of "+node, pid)
				if i == 0 {
					j.waitErr("gompirun: recovery 1: every rank runs again")
				}
			}
			if max == 2 {
				j.finish(want,
					"node n2 was lost",
					"autor: recovery 1 of 2: every rank restarts from sequence 0",
					"gompirun: recovery 1: restarting 4 ranks from sequence 0 of "+ref.Name+" (rank 2 n2 -> n3)",
					"node n3 was lost",
					"autor: recovery 2 of 2: every rank restarts from sequence 1",
					"gompirun: recovery 2: restarting 4 ranks from sequence 1 of "+ref.Name+" (rank 2 n3 -> n1, rank 3 n3 -> n1)",
					"gompirun: recovery 2: every rank runs again")
				checkIntact(t, ref, before)
				return
			}
			code, _, errs := j.wait()
			if code != 1 {
				t.Errorf("job ended with status %d after a loss past its recovery limit, want 1\n%s", code, errs)
			}
			for _, w := range []string{
				"autor: recovery 1 of 1: every rank restarts from sequence 0",
				"gompirun: job aborted",
				"node n3 was lost",
				"autor: the job went through 1 recoveries, its limit (errmgr_autor_max_recoveries); not recovering again",
			} {
				if !strings.Contains(errs, w) {
					t.Errorf("gompirun's report lacks %q:\n%s", w, errs)
				}
			}
			if strings.Contains(errs, "recovery 2") {
				t.Errorf("a recovery past the limit:\n%s", errs)
			}
			noSurvivors(t, "after the abort", func() []int { return marked(j.mark) })
			checkIntact(t, ref, before)
		})
	}
}
