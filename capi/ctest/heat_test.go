package ctest

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHeat checks examples/c/heat.c against examples/heat: for the same
// flags both print the same lines (progress, summary and checksum), the
// Go program under gompirun and the C one under Open MPI and under gompi,
// at several rank counts.
func TestHeat(t *testing.T) {
	t.Parallel()
	setup(t)
	dir := t.TempDir()
	goHeat := filepath.Join(dir, "heat-go")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", goHeat, "./examples/heat")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	src := filepath.Join(repoRoot, "examples", "c", "heat.c")
	refBin := ompi.compile(t, src, dir)
	goRun := &impl{name: "gompi-go", launcher: []string{filepath.Join(gompiBin, "gompirun"), "--oversubscribe", "-np"}}
	args := []string{"-size", "37", "-steps", "60", "-every", "20"}
	var cBin string
	mustPass := expectedPass(t)["heat"]
	fail := t.Logf
	if mustPass {
		fail = t.Errorf
	}
	cBin = gompi.compile(t, src, dir)
	if why, err := applicable(cBin); err != nil {
		t.Fatal(err)
	} else if why != "" {
		fail("heat.c %s", why)
		cBin = ""
	}
	for _, n := range []int{1, 2, 3, 5} {
		want, err := goRun.run(n, goHeat, args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, want)
		}
		if !strings.Contains(want, "checksum: ") {
			t.Fatalf("examples/heat at %d ranks printed no checksum:\n%s", n, want)
		}
		if got, err := ompi.run(n, refBin, args...); err != nil || got != want {
			t.Errorf("heat.c under Open MPI at %d ranks (%v):\n%s\nexamples/heat:\n%s", n, err, got, want)
		}
		if cBin == "" {
			continue
		}
		if got, err := gompi.run(n, cBin, args...); err != nil || got != want {
			fail("heat.c under gompi at %d ranks (%v):\n%s\nexamples/heat:\n%s", n, err, got, want)
		}
	}
}
