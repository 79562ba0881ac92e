package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// smTag is how a gompi-sm segment (a memfd) shows in /proc/PID/maps.
const smTag = "/memfd:gompi-sm"

// TestSMCleanupAfterKill runs traffic (every rank has shared-memory
// connections to its node's peer) and SIGKILLs a rank, a daemon or
// gompirun: afterwards no process of the job survives, the session folder
// is empty, /dev/shm holds nothing of gompi, and no process on the
// machine maps any of the job's segments.
func TestSMCleanupAfterKill(t *testing.T) {
	for _, victim := range []string{"rank", "daemon", "gompirun"} {
		t.Run(victim, func(t *testing.T) {
			sessions := t.TempDir()
			pace := filepath.Join(t.TempDir(), "pace")
			if err := os.WriteFile(pace, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			shm := devShm(t)
			j := start(t, "-np", "4", "--hostfile", hostfile(t, twoNodes), "--mca", "plm_base_session_dir", sessions,
				trafficProg(), "-seed", "11", "-rounds", "100000", "-every", "1", "-pace", trafficPace, "-pace-while", pace)
			j.waitFor("the first rounds", func(lines []string, _ string) bool { return lastRound(lines) > 0 })
			segs := map[string]bool{}
			var ranks []int
			for _, pid := range marked(j.mark) {
				if cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); filepath.Base(strings.Split(string(cl), "\x00")[0]) == "traffic" {
					ranks = append(ranks, pid)
					for ino := range smSegments(pid) {
						segs[ino] = true
					}
				}
			}
			// Two nodes of two ranks: a connection each way in each node,
			// at least one segment per connection.
			if len(ranks) != 4 || len(segs) < 2 {
				t.Fatalf("%d ranks map %d gompi-sm segments, want 4 ranks and 2 or more", len(ranks), len(segs))
			}
			switch victim {
			case "rank":
				syscall.Kill(ranks[0], syscall.SIGKILL)
			case "daemon":
				syscall.Kill(j.daemonPid("n2"), syscall.SIGKILL)
			case "gompirun":
				j.signal(syscall.SIGKILL)
			}
			if code, _, errs := j.wait(); code == 0 {
				t.Fatalf("the job ended well after its %s was killed:\n%s", victim, errs)
			}
			noSurvivors(t, "after SIGKILL to the job's "+victim, func() []int { return marked(j.mark) })
			for _, f := range leftFiles(t, sessions) {
				t.Errorf("session folder holds %s", f)
			}
			for name := range devShm(t) {
				if !shm[name] && strings.Contains(name, "gompi") {
					t.Errorf("/dev/shm/%s is left", name)
				}
			}
			for _, pid := range scanProcs(func(int) bool { return true }) {
				for ino := range smSegments(pid) {
					if segs[ino] {
						t.Errorf("process %d still maps the job's segment (inode %s)", pid, ino)
					}
				}
			}
		})
	}
}

// smSegments returns the inodes of the gompi-sm segments process pid maps.
func smSegments(pid int) map[string]bool {
	out := map[string]bool{}
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 6 && strings.HasPrefix(f[5], smTag) {
			out[f[4]] = true
		}
	}
	return out
}

// devShm lists /dev/shm.
func devShm(t *testing.T) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir("/dev/shm")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range ents {
		out[e.Name()] = true
	}
	return out
}

// leftFiles lists what is left under dir.
func leftFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if p != dir {
			out = append(out, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	return out
}
