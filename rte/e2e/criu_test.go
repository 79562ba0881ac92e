package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gompi/mca"
)

// The crs=criu tests checkpoint examples/plainheat, a program with no line
// of C/R code, from outside: gompid quiesces each rank through its library
// (AppRequest Quiesce), dumps it with CRIU through gompi-plugin-criu and
// lets it go on (or ends the job with --term); gompi-restart restores the
// dumped processes, which finish with the checksum of an uninterrupted run.

// plainArgs slow plainheat down (about 8 s of steps) so that checkpoints
// land while it runs, and print a line every 20 steps to know it is running.
var plainArgs = []string{"-size", "96", "-steps", "400", "-every", "20", "-sleep", "20ms"}

func plainheat() string { return filepath.Join(bin, "plainheat") }

// criuParams are the settings of a crs=criu job: the CRS, and the folder
// the harness put gompi-plugin-criu in.
func criuParams() []string {
	return []string{"--mca", "crs", "criu", "--mca", "mca_base_component_path", plugins}
}

// plainSum is the checksum of an uninterrupted 4-rank plainheat run (with
// no -sleep: it does not change the numbers).
func plainSum(t *testing.T) string {
	t.Helper()
	args := append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes), plainheat()}, plainArgs[:4]...)
	code, out, errs := start(t, args...).wait()
	sum, ok := heatChecksum(out, "")
	if code != 0 || !ok {
		t.Fatalf("uninterrupted plainheat: status %d, output %q\n%s", code, out, errs)
	}
	return sum
}

// criuJob starts plainheat on 4 ranks over two nodes with crs=criu and C/R
// on, its snapshots in dir, and waits for its first progress line.
func criuJob(t *testing.T, dir string) *job {
	t.Helper()
	return criuJobWith(t, dir, criuParams())
}

// criuJobWith is criuJob with params in place of criuParams.
func criuJobWith(t *testing.T, dir string, params []string) *job {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("CRIU and the rank init's PID namespace need root")
	}
	args := append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes), "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", dir}, params...)
	j := start(t, append(append(args, plainheat()), plainArgs...)...)
	j.waitFor("plainheat's first progress line", func(lines []string, _ string) bool {
		return len(lines) > 0 && strings.HasPrefix(lines[0], "step ")
	})
	return j
}

// checkpointCRIU checkpoints j with gompi-checkpoint and flags, expecting
// sequence seq of ref.
func checkpointCRIU(t *testing.T, j *job, ref string, seq string, flags ...string) {
	t.Helper()
	begin := time.Now()
	code, out, errs := tool(t, "gompi-checkpoint", append(flags, pidArg(j))...)
	// A rank restored by a migration rejoins its daemon's checkpoint
	// coordination a moment after gompirun reports the migration; a
	// checkpoint requested in between is refused saying so, and a user
	// asks again (known; see issue 32's closing note).
	// Each refused attempt leaves its sequence uncommitted: the one that
	// commits has the next number.
	n, err := strconv.Atoi(seq)
	if err != nil {
		t.Fatalf("sequence %q: %v", seq, err)
	}
	for code != 0 && strings.Contains(errs, "no application coordinator") && time.Since(begin) < time.Minute {
		t.Logf("gompi-checkpoint refused, a rank has not rejoined yet: %s", strings.TrimSpace(errs))
		code, out, errs = tool(t, "gompi-checkpoint", append(flags, pidArg(j))...)
		n++
	}
	seq = strconv.Itoa(n)
	t.Logf("gompi-checkpoint %v: %v", flags, time.Since(begin).Round(time.Millisecond))
	if code != 0 || out != fmt.Sprintf("Snapshot Ref.: %3s %s\n", seq, ref) {
		t.Fatalf("gompi-checkpoint %v: status %d, want sequence %s\n%s%s\njob's stderr:\n%s", flags, code, seq, out, errs, j.errText())
	}
}

// restartCRIU restarts ref's last sequence and checks that the restored
// job finishes with want.
func restartCRIU(t *testing.T, refPath, want string) {
	t.Helper()
	restartCRIUWith(t, refPath, want, criuParams())
}

// restartCRIUWith is restartCRIU with params in place of criuParams.
func restartCRIUWith(t *testing.T, refPath, want string, params []string) {
	t.Helper()
	begin := time.Now()
	r := startProg(t, "gompi-restart", append(params, refPath)...)
	code, out, errs := r.wait()
	t.Logf("gompi-restart until the restored job ended: %v", time.Since(begin).Round(time.Millisecond))
	if got, _ := heatChecksum(out, ""); code != 0 || got != want {
		t.Errorf("restarted plainheat: status %d, checksum %q, want %q\noutput %q\n%s", code, got, want, out, errs)
	}
	noSurvivors(t, "after the restarted job", func() []int { return marked(r.mark) })
}

// TestCRIUCheckpointContinueRestart: plainheat is checkpointed twice while
// it runs and finishes with the uninterrupted checksum; its last sequence,
// restarted after it ended, finishes with it again. Once with the ranks
// quiescing their channels by bkmrk's counts (ft-enable-cr's crcp), once
// by flags (--mca crcp flag: mpi.Proc.Suspend's crcp.QuiesceFlags), which
// the snapshot records.
func TestCRIUCheckpointContinueRestart(t *testing.T) {
	for _, crcp := range []string{"bkmrk", "flag"} {
		t.Run(crcp, func(t *testing.T) {
			dir := t.TempDir()
			j := criuJobWith(t, dir, append(criuParams(), "--mca", "crcp", crcp))
			ref := refOf(t, j, dir)
			checkpointCRIU(t, j, ref.Name, "0")
			checkpointCRIU(t, j, ref.Name, "1")
			code, out, errs := j.wait()
			want := plainSum(t)
			if got, _ := heatChecksum(out, ""); code != 0 || got != want {
				t.Fatalf("checkpointed plainheat: status %d, checksum %q, want %q\n%s", code, got, want, errs)
			}
			noSurvivors(t, "after the checkpointed job", func() []int { return marked(j.mark) })
			in := info(t, ref)
			if yes, no := committed(t, ref); !reflect.DeepEqual(yes, []int{0, 1}) || len(no) != 0 {
				t.Errorf("committed %v, uncommitted %v", yes, no)
			}
			for _, p := range in.Seqs[len(in.Seqs)-1].Procs {
				if want := []string{"n1", "n1", "n2", "n2"}[p.Rank]; p.Node != want || p.CRS != "criu" || len(p.Files) == 0 {
					t.Errorf("rank %d of the last sequence: %+v", p.Rank, p)
				}
			}
			if i := slices.IndexFunc(in.Params, func(s mca.Setting) bool { return s.Name == "crcp" }); i < 0 || in.Params[i].Value != crcp {
				t.Errorf("the snapshot does not record crcp %s: params %v", crcp, in.Params)
			}
			restartCRIU(t, ref.Path(), want)
		})
	}
}

// TestCRIUTerm: gompi-checkpoint --term ends plainheat once its ranks are
// saved, without a checksum: their gompids end the dumped ranks at the
// commit (gompirun never has to end them after its grace); the restart
// finishes with the uninterrupted one. The job names no CRS: -am
// ft-enable-cr alone picks criu for a program without package cr.
func TestCRIUTerm(t *testing.T) {
	dir := t.TempDir()
	j := criuJobWith(t, dir, []string{"--mca", "mca_base_component_path", plugins})
	ref := refOf(t, j, dir)
	checkpointCRIU(t, j, ref.Name, "0", "--term")
	for _, p := range info(t, ref).Seqs[0].Procs {
		if p.CRS != "criu" {
			t.Errorf("rank %d saved by crs %q, want criu (chosen by ft-enable-cr for a program without package cr)", p.Rank, p.CRS)
		}
	}
	begin := time.Now()
	code, out, errs := j.wait()
	t.Logf("job ended %v after gompi-checkpoint --term returned", time.Since(begin).Round(time.Millisecond))
	if _, ok := heatChecksum(out, ""); code != 0 || ok {
		t.Fatalf("job after --term: status %d, output %q\n%s", code, out, errs)
	}
	if strings.Contains(errs, "did not end within a grace") {
		t.Fatalf("gompirun had to end the saved ranks itself:\n%s", errs)
	}
	noSurvivors(t, "after --term", func() []int { return marked(j.mark) })
	// Nor does the restart: the snapshot's CRS restores it.
	restartCRIUWith(t, ref.Path(), plainSum(t), []string{"--mca", "mca_base_component_path", plugins})
}

// TestCRIUStop: gompi-checkpoint --stop leaves every rank stopped once
// saved; SIGCONT to gompirun resumes the job, which finishes with the
// uninterrupted checksum.
func TestCRIUStop(t *testing.T) {
	dir := t.TempDir()
	j := criuJob(t, dir)
	ref := refOf(t, j, dir)
	checkpointCRIU(t, j, ref.Name, "0", "--stop")
	var stopped, ranks int
	for _, pid := range marked(j.mark) {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.TrimSpace(string(comm)) != "plainheat" {
			continue
		}
		ranks++
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// The state follows the command's closing parenthesis.
		if i := bytes.LastIndexByte(stat, ')'); err == nil && i >= 0 && i+2 < len(stat) && stat[i+2] == 'T' {
			stopped++
		}
	}
	if ranks != 4 || stopped != 4 {
		t.Fatalf("after --stop: %d of %d ranks stopped, want all 4", stopped, ranks)
	}
	if code, out, errs := tool(t, "gompi-ps", pidArg(j)); code != 0 || !strings.Contains(out, "stopped by gompi-checkpoint --stop (kill -CONT "+pidArg(j)+" resumes)") {
		t.Errorf("gompi-ps after --stop: status %d\n%s%s", code, out, errs)
	}
	if err := j.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	code, out, errs := j.wait()
	if got, _ := heatChecksum(out, ""); code != 0 || got != plainSum(t) {
		t.Fatalf("plainheat continued after --stop: status %d, checksum %q\n%s", code, got, errs)
	}
	noSurvivors(t, "after the continued job", func() []int { return marked(j.mark) })
}
