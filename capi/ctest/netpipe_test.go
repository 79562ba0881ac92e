package ctest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNetPIPE builds NetPIPE's NPmpi with scripts/netpipe.sh (Debian's
// netpipe source, fetched at test time) with Open MPI's mpicc and with
// gompicc, and runs each briefly at 2 ranks: 1 B to 64 KiB, 20 round
// trips a size. Its output file must reach the largest size.
func TestNetPIPE(t *testing.T) {
	t.Parallel()
	setup(t)
	dir := t.TempDir()
	ref := buildNetPIPE(t, ompi, dir)
	runNetPIPE(t, ompi, ref, dir)
	mustPass := expectedPass(t)["netpipe"]
	fail := t.Logf
	if mustPass {
		fail = t.Errorf
	}
	bin := buildNetPIPE(t, gompi, dir)
	if why, err := applicable(bin); err != nil {
		t.Fatal(err)
	} else if why != "" {
		fail("NPmpi %s", why)
		return
	}
	if err := tryNetPIPE(gompi, bin, dir); err != nil {
		fail("%v", err)
	}
}

func buildNetPIPE(t *testing.T, im *impl, dir string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot, "scripts", "netpipe.sh"), "-c", im.cc, "-o", filepath.Join(dir, im.name))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/netpipe.sh -c %s: %v\n%s", im.cc, err, exitStderr(err))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

func runNetPIPE(t *testing.T, im *impl, bin, dir string) {
	t.Helper()
	if err := tryNetPIPE(im, bin, dir); err != nil {
		t.Fatal(err)
	}
}

func tryNetPIPE(im *impl, bin, dir string) error {
	res := filepath.Join(dir, im.name+".np.out")
	if out, err := im.run(2, bin, "-u", "65536", "-n", "20", "-o", res); err != nil {
		return fmt.Errorf("%w\n%s", err, tail(out))
	}
	data, err := os.ReadFile(res)
	if err != nil {
		return fmt.Errorf("NPmpi under %s wrote no results: %w", im.name, err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "65536" {
			return nil
		}
	}
	return fmt.Errorf("NPmpi under %s did not reach 64 KiB:\n%s", im.name, tail(string(data)))
}

func exitStderr(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
