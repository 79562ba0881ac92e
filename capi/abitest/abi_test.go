package abitest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gompi/capi/internal/cbuild"
)

func TestMain(m *testing.M) { cbuild.Main(m) }

// abiHeader returns the path of the standard's mpi_abi.h, fetching it.
func abiHeader(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("GOMPI_MPI_ABI_H"); h != "" {
		return h
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(cbuild.Root(), "scripts", "fetch-mpich-abi.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/fetch-mpich-abi.sh (needs apt-get and dpkg; as root it fetches): %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

var (
	defineRE = regexp.MustCompile(`(?m)^#define\s+(MPI_[A-Z0-9_]+)\s+\S`)
	enumRE   = regexp.MustCompile(`(?m)^\s+(MPI_[A-Z0-9_]+)\s*=`)
	typeRE   = regexp.MustCompile(`(?m)^(?:typedef\s+[^(;\n{]*?|\}\s*)\b(MPI_[A-Za-z_]+)\s*;`)
)

// names lists the constants and types a header declares (MPI_ names only:
// MPIX_ ones are an implementation's extensions).
func names(header []byte) (consts, types []string) {
	for _, m := range defineRE.FindAllSubmatch(header, -1) {
		consts = append(consts, string(m[1]))
	}
	for _, m := range enumRE.FindAllSubmatch(header, -1) {
		consts = append(consts, string(m[1]))
	}
	for _, m := range typeRE.FindAllSubmatch(header, -1) {
		types = append(types, string(m[1]))
	}
	slices.Sort(consts)
	slices.Sort(types)
	return slices.Compact(consts), slices.Compact(types)
}

// program writes a C program printing every name's value, every type's
// size, and MPI_Status's layout.
func program(consts, types []string) string {
	var b strings.Builder
	b.WriteString("#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n#include \"mpi.h\"\nint main(void) {\n")
	for _, c := range consts {
		if c == "MPI_H_ABI" {
			continue // the include guard
		}
		fmt.Fprintf(&b, "\tprintf(\"%s %%lld\\n\", (long long)(intptr_t)(%s));\n", c, c)
	}
	for _, ty := range types {
		fmt.Fprintf(&b, "\tprintf(\"sizeof(%s) %%zu\\n\", sizeof(%s));\n", ty, ty)
	}
	for _, f := range []string{"MPI_SOURCE", "MPI_TAG", "MPI_ERROR", "MPI_internal"} {
		fmt.Fprintf(&b, "\tprintf(\"offsetof(MPI_Status, %s) %%zu\\n\", offsetof(MPI_Status, %s));\n", f, f)
	}
	b.WriteString("\treturn 0;\n}\n")
	return b.String()
}

// compileRun compiles src with -I incdir first and runs it.
func compileRun(t *testing.T, src, incdir string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	c, exe := filepath.Join(dir, "p.c"), filepath.Join(dir, "p")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("cc", append([]string{"-Wall", "-I" + incdir, "-o", exe, c}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cc -I %s: %v\n%s", incdir, err, out)
	}
	out, err := exec.Command(exe).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", exe, err, out)
	}
	return string(out)
}

// abiIncludeDir makes a folder whose mpi.h is the standard's mpi_abi.h
// (the folder holding it also holds MPICH's own mpi.h, which is not it).
func abiIncludeDir(t *testing.T, abiH string) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mpi.h"), []byte(fmt.Sprintf("#include %q\n", abiH)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Every constant, handle, type and MPI_Status offset of the standard's
// header has the same value in gompi's.
func TestHeaderMatchesTheStandard(t *testing.T) {
	abiH := abiHeader(t)
	std, err := os.ReadFile(abiH)
	if err != nil {
		t.Fatal(err)
	}
	consts, types := names(std)
	if len(consts) < 300 || len(types) < 20 {
		t.Fatalf("%s: only %d constants and %d types found", abiH, len(consts), len(types))
	}
	prog := program(consts, types)
	want := compileRun(t, prog, abiIncludeDir(t, abiH))
	got := compileRun(t, prog, filepath.Join(cbuild.Root(), "capi", "include"))
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range w {
		if i >= len(g) || g[i] != w[i] {
			t.Errorf("gompi's mpi.h: %q, the standard's: %q", at(g, i), w[i])
		}
	}
	t.Logf("%d constants, %d types, 4 offsets compared", len(consts), len(types))
	// gompi's header has no MPI_ name the standard lacks, but its own
	// GOMPI marker.
	ours, err := os.ReadFile(filepath.Join(cbuild.Root(), "capi", "include", "mpi.h"))
	if err != nil {
		t.Fatal(err)
	}
	oc, ot := names(ours)
	for _, n := range append(oc, ot...) {
		if !slices.Contains(consts, n) && !slices.Contains(types, n) {
			t.Errorf("gompi's mpi.h declares %s, which the standard's does not", n)
		}
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(missing)"
}

// A program compiled against the standard's header alone, and linked to
// libmpi_abi.so.1 by its standard name, runs on gompi under gompirun.
func TestStandardBinaryRunsOnGompi(t *testing.T) {
	abiH := abiHeader(t)
	prefix := cbuild.Prefix(t)
	src, err := os.ReadFile(filepath.Join(cbuild.Root(), "capi", "testdata", "basic.c"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "basic")
	c := filepath.Join(dir, "basic.c")
	if err := os.WriteFile(c, src, 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(prefix, "lib")
	cmd := exec.Command("cc", "-I"+abiIncludeDir(t, abiH), "-o", exe, c, "-L"+lib, "-Wl,-rpath,"+lib, "-l:libmpi_abi.so.1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(prefix, "bin", "gompirun"), "--oversubscribe", "-np", "2", exe).CombinedOutput()
	if err != nil {
		t.Fatalf("gompirun -np 2: %v\n%s", err, out)
	}
	for _, line := range []string{
		"rank 0: ring = 1 source 1 tag 11 count 1 null 1", "rank 1: ring = 0 source 0 tag 10 count 1 null 1",
		"rank 0: allreduce sum = 3", "rank 1: allreduce sum = 3", "rank 0: reduce max = 2",
		"rank 1: split reversed rank = 0", "rank 0: win_fence = 55 (operation not supported)",
		"rank 1: initialized 1 finalized 1",
	} {
		if !strings.Contains(string(out), line+"\n") {
			t.Errorf("no %q in the output:\n%s", line, out)
		}
	}
}
