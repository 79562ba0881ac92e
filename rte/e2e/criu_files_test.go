package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"gompi/frameworks/sstore/snapshot"
)

// TestCRIUOutputFiles: examples/traffic with -out, each rank keeping a
// file open for writing from start to end, is checkpointed with crs=criu
// and left running. Its ranks go on writing (the files grow past what
// the dump saw) and rank 0's file is then cut short; the job is ended.
// The snapshot of every rank holds its file as a file of its own (sizes
// and checksum in the metadata); the restart puts the files back as they
// were at the dump (CRIU refuses a file whose size changed), the
// restored ranks write on, and the job ends with the digest and, byte for
// byte, the files of an uninterrupted run.
func TestCRIUOutputFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("CRIU and the rank init's PID namespace need root")
	}
	run := trafficRun{seed: envUint(t, "GOMPI_TRAFFIC_SEED", rand.Uint64()), rounds: 400}
	t.Logf("seed %d (GOMPI_TRAFFIC_SEED=%d replays this run)", run.seed, run.seed)
	outs := t.TempDir()
	out, want := filepath.Join(outs, "out"), filepath.Join(outs, "want")
	j, pace := pacedTraffic(t, &run, "-every", "10", "-out", out)
	ref := run.ref
	checkpointCRIU(t, j, ref.Name, "0")
	after := lastRound(j.output()) + 30
	j.waitFor("30 more rounds", func(lines []string, _ string) bool { return lastRound(lines) >= after })
	grown, err := os.Stat(out + ".1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(out+".0", 7); err != nil {
		t.Fatal(err)
	}
	j.signal(syscall.SIGTERM)
	if code, _, _ := j.wait(); code == 0 {
		t.Fatal("the job ended well after SIGTERM, before its rounds were done")
	}
	noSurvivors(t, "after SIGTERM", func() []int { return marked(j.mark) })
	for _, p := range info(t, ref).Seqs[0].Procs {
		if !slices.ContainsFunc(p.Files, func(f snapshot.FileRecord) bool { return f.Name == "gompi-file-0" && f.Size > 0 }) {
			t.Errorf("rank %d's snapshot lacks its saved output file: %+v", p.Rank, p.Files)
		}
	}
	if err := os.Remove(pace); err != nil {
		t.Fatal(err)
	}
	r := startProg(t, "gompi-restart", append(criuParams(), ref.Path())...)
	code, lines, errs := r.wait()
	digest := trafficReference(t, run, "-out", want)
	if got := trafficDigest(lines); code != 0 || got != digest {
		t.Fatalf("restarted traffic: status %d, digest %q, want %q\n%s", code, got, digest, errs)
	}
	noSurvivors(t, "after the restarted job", func() []int { return marked(r.mark) })
	for rank := range 4 {
		got, gerr := os.ReadFile(fmt.Sprintf("%s.%d", out, rank))
		w, werr := os.ReadFile(fmt.Sprintf("%s.%d", want, rank))
		if gerr != nil || werr != nil {
			t.Fatal(gerr, werr)
		}
		if n := strings.Count(string(w), "\n"); !bytes.Equal(got, w) || n != run.rounds {
			t.Errorf("rank %d's output file after the restart (%d bytes) is not the uninterrupted run's (%d bytes, %d lines for %d rounds)", rank, len(got), len(w), n, run.rounds)
		}
	}
	t.Logf("rank 1's file had %d bytes when the job was ended", grown.Size())
}
