package e2e

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A job whose CRS is criu (--mca crs criu) runs each rank under the rank
// init that gompid starts by re-executing itself: PID 1 of a PID
// namespace of its own and its session's leader, with the rank its only
// child. gompi-ps lists the inits' PIDs; a rank's exit status, its death
// by a signal and a signal forwarded by gompirun end the job as they do
// for ranks started directly, and nothing is left behind.
func TestRunUnderRankInit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace needs root")
	}
	criu := append(criuParams(), "-np", "4", "--hostfile", hostfile(t, twoNodes), rankprog())
	t.Run("killed", func(t *testing.T) {
		j := start(t, append(criu, "-sleep")...)
		inner := j.waitReady(4)
		ranks := underInit(t, j, inner)
		if err := syscall.Kill(ranks[2], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		code, _, errs := j.wait()
		if code != 128+9 || !strings.Contains(errs, "gompirun: job aborted: rank 2 on node n2 was killed by signal 9 (killed)\n") {
			t.Errorf("exit status %d, stderr:\n%s\nwant 137 and a message naming rank 2, node n2 and the signal", code, errs)
		}
		noSurvivors(t, "after a rank under its init was killed", func() []int { return marked(j.mark) })
	})
	t.Run("exit status", func(t *testing.T) {
		code, _, errs := start(t, append(criu, "-exit-rank", "3", "-exit-code", "7")...).wait()
		if code != 7 || !strings.Contains(errs, "gompirun: job aborted: rank 3 on node n2 exited with status 7\n") {
			t.Errorf("exit status %d, stderr:\n%s\nwant 7 and a message naming rank 3", code, errs)
		}
	})
	t.Run("SIGTERM", func(t *testing.T) {
		j := start(t, append(criu, "-sleep")...)
		j.waitReady(4)
		j.signal(syscall.SIGTERM)
		code, _, errs := j.wait()
		if code != 128+int(syscall.SIGTERM) || strings.Contains(errs, "job aborted") {
			t.Errorf("exit status %d, stderr:\n%s\nwant 143 and the ranks ended by the forwarded signal", code, errs)
		}
		noSurvivors(t, "after SIGTERM", func() []int { return marked(j.mark) })
	})
}

// underInit checks that every rank of j runs under its init, as gompi-ps
// shows it, and returns each rank's own PID (in the machine's namespace)
// by rank. inner are the PIDs the ranks see themselves as.
func underInit(t *testing.T, j *job, inner map[int]int) map[int]int {
	t.Helper()
	var ranks map[int]int
	for _, js := range ps(t, "--json") {
		if js.PID != j.cmd.Process.Pid {
			continue
		}
		ranks = map[int]int{}
		for _, r := range js.Ranks {
			if ns := nsPIDs(t, r.PID); !slices.Equal(ns, []int{r.PID, 1}) {
				t.Errorf("rank %d's process %d (gompi-ps) has PIDs %v, want PID 1 of its own namespace (the init)", r.Rank, r.PID, ns)
			}
			kids := scanProcs(func(pid int) bool { p, _ := statOf(pid); return p == r.PID })
			if len(kids) != 1 {
				t.Fatalf("rank %d's init %d has children %v, want the rank alone", r.Rank, r.PID, kids)
			}
			if ns := nsPIDs(t, kids[0]); !slices.Equal(ns, []int{kids[0], inner[r.Rank]}) {
				t.Errorf("rank %d (pid %d in its namespace) is %v", r.Rank, inner[r.Rank], ns)
			}
			if _, sid := statOf(kids[0]); sid != r.PID {
				t.Errorf("rank %d's session %d, want its init's (%d)", r.Rank, sid, r.PID)
			}
			ranks[r.Rank] = kids[0]
		}
	}
	if len(ranks) != len(inner) {
		t.Fatalf("gompi-ps lists ranks %v of job %d, want %d", ranks, j.cmd.Process.Pid, len(inner))
	}
	return ranks
}

// nsPIDs is pid's NSpid: its PID in each PID namespace it is in, outermost
// first.
func nsPIDs(t *testing.T, pid int) []int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(l, "NSpid:"); ok {
			var out []int
			for _, f := range strings.Fields(rest) {
				n, _ := strconv.Atoi(f)
				out = append(out, n)
			}
			return out
		}
	}
	t.Fatalf("no NSpid in /proc/%d/status", pid)
	return nil
}

// statOf reads pid's parent and session from /proc/pid/stat (0, 0 when
// it is gone).
func statOf(pid int) (ppid, sid int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	// pid (comm) state ppid pgrp session ...: comm ends at the last ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 4 {
		return 0, 0
	}
	ppid, _ = strconv.Atoi(f[1])
	sid, _ = strconv.Atoi(f[3])
	return ppid, sid
}
