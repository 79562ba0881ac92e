package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gompi/rte"
	"gompi/rte/jobs"
)

func TestGompiPS(t *testing.T) {
	j := start(t, "-np", "3", "--host", "n1:2,n2", rankprog(), "-sleep")
	pids := j.waitReady(3)
	hnp := j.cmd.Process.Pid

	out, err := exec.Command(filepath.Join(bin, "gompi-ps")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("%d ", hnp)) || !strings.Contains(string(out), " running ") {
		t.Errorf("gompi-ps: %v\n%s\nwant a running job with pid %d", err, out, hnp)
	}
	js := ps(t, "--json")
	var mine *psJob
	for i := range js {
		if js[i].PID == hnp {
			mine = &js[i]
		}
	}
	if mine == nil {
		t.Fatalf("gompi-ps --json does not list pid %d: %+v", hnp, js)
	}
	if mine.NP != 3 || strings.Join(mine.Nodes, ",") != "n1,n2" || mine.State != "running" || len(mine.Ranks) != 3 || len(mine.Daemons) != 2 {
		t.Errorf("gompi-ps --json: %+v", mine)
	}
	for _, r := range mine.Ranks {
		if r.PID != pids[r.Rank] || r.State != "connected" {
			t.Errorf("rank %+v: want pid %d, connected", r, pids[r.Rank])
		}
	}
	out, err = exec.Command(filepath.Join(bin, "gompi-ps"), "--ranks", fmt.Sprint(hnp)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "RANK") || !strings.Contains(string(out), fmt.Sprint(pids[2])) {
		t.Errorf("gompi-ps --ranks: %v\n%s", err, out)
	}
	j.signal(2)
	j.wait()
	if js := ps(t, "--json", "--timeout", "10s"); len(js) != 0 {
		t.Errorf("gompi-ps still lists %+v after the job ended", js)
	}
	out, err = exec.Command(filepath.Join(bin, "gompi-ps"), fmt.Sprint(hnp)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no running gompi job") {
		t.Errorf("gompi-ps of an ended job: %v\n%s", err, out)
	}
}

// Records left by a gompirun killed outright, or whose pid now belongs to
// another process, are removed.
func TestGompiPSStale(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []jobs.Record{
		{Job: "dead0001", PID: dead.Process.Pid, NP: 1, Start: time.Now()},
		{Job: "reused01", PID: os.Getpid(), NP: 1, Start: time.Now(), ProcStart: 1}, // our pid, another start time
	} {
		dir := rte.HNPDir(r.PID)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := jobs.Write(dir, r); err != nil {
			t.Fatal(err)
		}
		if js := ps(t, "--json"); len(js) != 0 {
			t.Errorf("gompi-ps lists a stale record: %+v", js)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("stale directory %s not removed: %v", dir, err)
		}
	}
}
