package ctest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestCMakeFindMPI configures testdata/cmake, a CMake project that only
// says find_package(MPI), with gompi's wrappers folder first on PATH and
// Open MPI installed behind it, as a user who switches MPIs does. FindMPI
// must take gompi's header, library and mpiexec (not Open MPI's, which
// it finds when the folder lacks an mpiexec), report MPI 5.0, and the C
// and C++ programs it builds must run through that mpiexec.
func TestCMakeFindMPI(t *testing.T) {
	t.Parallel()
	setup(t)
	if _, err := exec.LookPath("cmake"); err != nil {
		t.Fatal("cmake is not on PATH (apt-get install cmake; .ci/run does as root)")
	}
	prefix := filepath.Dir(filepath.Dir(gompi.cc))
	wrappers := filepath.Join(prefix, "share", "gompi", "wrappers")
	build := filepath.Join(t.TempDir(), "build")
	env := append(os.Environ(), "PATH="+wrappers+string(os.PathListSeparator)+os.Getenv("PATH"))

	out := cmakeRun(t, env, "-S", filepath.Join("testdata", "cmake"), "-B", build)
	found := map[string]string{}
	for _, m := range regexp.MustCompile(`findmpi: (\w+)=(.*)`).FindAllStringSubmatch(out, -1) {
		found[m[1]] = strings.TrimSpace(m[2])
	}
	if found["C_VERSION"] != "5.0" {
		t.Errorf("FindMPI's MPI_C_VERSION = %q, want 5.0 (gompi's mpi.h)", found["C_VERSION"])
	}
	for _, k := range []string{"C_INCLUDE_DIRS", "C_LIBRARIES", "CXX_LIBRARIES"} {
		if v := found[k]; v == "" || !allUnder(v, prefix) {
			t.Errorf("FindMPI's MPI_%s = %q, want paths under gompi's prefix %s", k, v, prefix)
		}
	}
	cache, err := os.ReadFile(filepath.Join(build, "CMakeCache.txt"))
	if err != nil {
		t.Fatal(err)
	}
	mpiexec := cacheValue(string(cache), "MPIEXEC_EXECUTABLE")
	flag := cacheValue(string(cache), "MPIEXEC_NUMPROC_FLAG")
	if mpiexec != filepath.Join(wrappers, "mpiexec") {
		t.Errorf("FindMPI's MPIEXEC_EXECUTABLE = %q, want gompi's %s", mpiexec, filepath.Join(wrappers, "mpiexec"))
	}
	cmakeRun(t, env, "--build", build)

	for _, prog := range []string{"hello_c", "hello_cxx"} {
		ctx, cancel := context.WithTimeout(context.Background(), runBound)
		cmd := exec.CommandContext(ctx, mpiexec, flag, "3", filepath.Join(build, prog))
		got, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s %s 3 %s: %v\n%s", mpiexec, flag, prog, err, got)
		}
		lines := strings.Split(strings.TrimSpace(string(got)), "\n")
		sort.Strings(lines)
		lang := strings.TrimPrefix(prog, "hello_")
		want := []string{lang + " rank 0 of 3 sum 3", lang + " rank 1 of 3 sum 3", lang + " rank 2 of 3 sum 3"}
		if strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s printed\n%s\nwant\n%s", prog, got, strings.Join(want, "\n"))
		}
	}
}

// cmakeRun runs cmake with args and returns its output.
func cmakeRun(t *testing.T, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "cmake", args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cmake %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// cacheValue is a variable's value in a CMakeCache.txt ("NAME:TYPE=value").
func cacheValue(cache, name string) string {
	for _, line := range strings.Split(cache, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, name+":") {
			return v
		}
	}
	return ""
}

// allUnder reports whether every path of a CMake list is under dir.
func allUnder(list, dir string) bool {
	for _, p := range strings.Split(list, ";") {
		if rel, err := filepath.Rel(dir, p); err != nil || strings.HasPrefix(rel, "..") {
			return false
		}
	}
	return true
}
