package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gompi/cli"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/rte/jobs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	cmd := NewCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	code := cli.Execute(context.Background(), cmd, args, false)
	return code, out.String(), errb.String()
}

func TestHelpGolden(t *testing.T) {
	code, out, errs := run("--help")
	got := out + errs
	path := filepath.Join("testdata", "help.golden")
	if *update {
		os.WriteFile(path, []byte(got), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./tools/checkpoint -update)", err)
	}
	if code != 0 || got != string(want) {
		t.Errorf("status %d; --help differs from %s (go test ./tools/checkpoint -update rewrites it):\n%s", code, path, got)
	}
}

func TestUsage(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	tests := []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "which job? give the PID of its gompirun"},
		{[]string{"abc"}, 2, `"abc" is not a process id`},
		{[]string{"-5"}, 2, "unknown shorthand flag"},
		{[]string{"12", "--hnp-pid", "13"}, 2, "give the job once"},
		{[]string{"--term", "--stop", "12"}, 2, "--term and --stop both given"},
		{[]string{"--list", "--term", "12"}, 2, "--list takes no checkpoint"},
		{[]string{"1", "2"}, 2, "accepts at most 1 arg"},
		{[]string{"--hnp-jobid", "feedf00d"}, 1, "job feedf00d: no running gompi job"},
		{[]string{"--remove", "1", "--prune", "12"}, 2, "--remove and --prune both given"},
		{[]string{"--remove", "-3", "12"}, 2, "--remove -3 is not a sequence number"},
		{[]string{"--keep", "2", "12"}, 2, "--keep goes with --prune"},
		{[]string{"--prune", "--keep", "-2", "12"}, 2, "--keep -2: give 0 or more"},
		{[]string{"--dry-run", "12"}, 2, "--dry-run goes with --remove or --prune"},
		{[]string{"--prune", "--list", "12"}, 2, "drop --list, --term and --stop"},
		{[]string{"--prune"}, 2, "which job? give the PID of its gompirun"},
	}
	for _, tt := range tests {
		code, _, errs := run(tt.args...)
		if code != tt.code || !strings.Contains(errs, tt.want) {
			t.Errorf("%v: status %d, stderr:\n%s\nwant %d and %q", tt.args, code, errs, tt.code, tt.want)
		}
	}
}

// The PID of a process that is gone, and of one that is not a gompirun.
func TestNotAGompirun(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run(fmt.Sprint(dead.Process.Pid))
	if code != 1 || !strings.Contains(errs, fmt.Sprintf("no process with pid %d", dead.Process.Pid)) {
		t.Errorf("dead pid: status %d: %s", code, errs)
	}
	code, _, errs = run("--status", fmt.Sprint(os.Getpid()))
	if code != 1 || !strings.Contains(errs, fmt.Sprintf("process %d (checkpoint.test) is not a gompirun", os.Getpid())) {
		t.Errorf("our own pid: status %d: %s", code, errs)
	}
	if err := jobs.FindHNP(os.Getpid()); !errors.Is(err, jobs.ErrNoJob) {
		t.Errorf("FindHNP: %v, want ErrNoJob", err)
	}
}

func TestStatusLines(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var w bytes.Buffer
	var s statusPrinter
	for _, e := range []snapc.Event{
		{Phase: snapc.PhaseRequested, Time: t0},
		{Phase: snapc.PhaseQuery, Time: t0.Add(20 * time.Millisecond), Detail: "4 ranks"},
		{Phase: snapc.PhaseLocalWrite, Node: "n1", Time: t0.Add(1250 * time.Millisecond), Detail: "2 local snapshots written"},
		{Phase: snapc.PhaseCommit, Time: t0.Add(1300 * time.Millisecond), Detail: "sequence 0 committed"},
	} {
		s.print(&w, e)
	}
	want := "[  0.00 /   0.00]                 Requested - ...\n" +
		"[  0.02 /   0.02]                     Query - 4 ranks\n" +
		"[  1.23 /   1.25]          Local Write (n1) - 2 local snapshots written\n" +
		"[  0.05 /   1.30]                    Commit - sequence 0 committed\n"
	if w.String() != want {
		t.Errorf("status lines:\n%s\nwant\n%s", w.String(), want)
	}
}

// --list -v says which sequences were migrations: committed, but only of
// the ranks they moved, so not restart points.
func TestListingMigrations(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 3, 0, 0, 0, time.UTC)
	ref := snapshot.Ref{Dir: "/g", Name: "gompi_global_snapshot_1.ckpt"}
	meta := &snapshot.GlobalMeta{Job: "1", Ranks: 3, Seqs: []snapshot.SeqRecord{
		{Seq: 0, Started: t0, Finished: t0.Add(time.Second), Committed: true},
		{Seq: 1, Migrate: true, Started: t0.Add(time.Minute), Finished: t0.Add(time.Minute + time.Second), Committed: true,
			Procs: []snapshot.ProcRecord{{Rank: 1, Node: "n3"}, {Rank: 2, Node: "n3"}}},
		{Seq: 2, Migrate: true, Started: t0.Add(2 * time.Minute)},
	}}
	l := Listing{Ref: ref.Name, Dir: ref.Dir, Committed: meta.Committed(), Uncommitted: []int{2}}
	var b bytes.Buffer
	renderListing(&b, l, ref, meta, true)
	want := "Snapshot Ref.: gompi_global_snapshot_1.ckpt\t[0]\n" +
		"Snapshot Location: /g/gompi_global_snapshot_1.ckpt\n" +
		"\tSeq 0: begun 2026-11-21 03:00:00.000 UTC, committed 2026-11-21 03:00:01.000 UTC\n" +
		"\tSeq 1: begun 2026-11-21 03:01:00.000 UTC, migration of ranks 1,2 (not a restart point), committed 2026-11-21 03:01:01.000 UTC\n" +
		"\tSeq 2: begun 2026-11-21 03:02:00.000 UTC, migration, not committed (it did not finish)\n"
	if b.String() != want {
		t.Errorf("listing:\n%s\nwant:\n%s", b.String(), want)
	}
}
