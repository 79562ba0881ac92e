package ctest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gompi/capi/internal/cbuild"
)

// impl is one MPI the programs are built and run with.
type impl struct {
	name     string
	cc, cxx  string
	launcher []string // the command before the program: mpirun ... -np
	env      []string
	// api is the set of C functions the implementation provides (gompi-info
	// --c-api); nil for the reference, which provides them all.
	api map[string]bool
}

var (
	setupOnce sync.Once
	workDir   string // removed by TestMain
	repoRoot  string
	ompi      *impl
	ompiWhy   string // why ompi is nil
	gompi     *impl
	gompiErr  error  // the gompi build failed
	gompiBin  string // gompirun, gompid and gompi-info
	buildLock sync.Mutex
)

func TestMain(m *testing.M) {
	code := m.Run()
	if workDir != "" {
		os.RemoveAll(workDir)
	}
	cbuild.Cleanup()
	os.Exit(code)
}

// setup finds both MPIs once per test binary: Open MPI on PATH; gompi in
// $GOMPI_C_PREFIX, or built with scripts/build-c.sh into a temporary
// prefix (package cbuild, as capi's other tests).
func setup(t *testing.T) {
	t.Helper()
	setupOnce.Do(func() {
		var err error
		if repoRoot, err = filepath.Abs("../.."); err != nil {
			gompiErr = err
			return
		}
		if workDir, err = os.MkdirTemp("", "gompi-ctest-"); err != nil {
			gompiErr = err
			return
		}
		setupOpenMPI()
		gompiErr = setupGompi()
	})
	if gompiErr != nil {
		t.Fatalf("gompi's C build: %v", gompiErr)
	}
	if ompi == nil {
		t.Fatalf("the reference MPI: %s", ompiWhy)
	}
}

func setupOpenMPI() {
	for _, c := range []string{"mpicc", "mpicxx", "mpirun"} {
		if _, err := exec.LookPath(c); err != nil {
			ompiWhy = fmt.Sprintf("Open MPI's %s is not on PATH (apt-get install openmpi-bin libopenmpi-dev g++; .ci/run does as root)", c)
			return
		}
	}
	ompi = &impl{
		name: "openmpi", cc: "mpicc", cxx: "mpicxx",
		// vader's single-copy path needs ptrace rights a container may
		// lack; the copy-in/copy-out path is what remains, and the same.
		launcher: []string{"mpirun", "--oversubscribe", "--bind-to", "none",
			"--mca", "btl_vader_single_copy_mechanism", "none", "-np"},
		env: []string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_rmaps_base_oversubscribe=1"},
	}
}

// setupGompi sets gompi (or gompiWhy when the repository has no C build
// yet) and gompiBin. An error is a build that should have worked.
func setupGompi() error {
	gompiBin = filepath.Join(workDir, "bin")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", gompiBin+"/", "./cmd/gompirun", "./cmd/gompid", "./cmd/gompi-info")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	prefix, err := cbuild.Build()
	if err != nil {
		return err
	}
	api, err := cAPI(ctx, filepath.Join(gompiBin, "gompi-info"))
	if err != nil {
		return err
	}
	gompi = &impl{
		name: "gompi", cc: filepath.Join(prefix, "bin", "gompicc"), cxx: filepath.Join(prefix, "bin", "gompicxx"),
		launcher: []string{filepath.Join(gompiBin, "gompirun"), "--oversubscribe", "-np"},
		api:      api,
	}
	return nil
}

var apiName = regexp.MustCompile(`\bP?MPI_[A-Za-z0-9_]+\b`)

// cAPI is the set of functions `gompi-info --c-api` lists.
func cAPI(ctx context.Context, info string) (map[string]bool, error) {
	out, err := exec.CommandContext(ctx, info, "--c-api").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("gompi-info --c-api: %w: %s", err, firstLine(out))
	}
	api := map[string]bool{}
	for _, n := range apiName.FindAllString(string(out), -1) {
		api[strings.TrimPrefix(n, "P")] = true
	}
	return api, nil
}

// missing lists the MPI functions binary leaves undefined that im does
// not provide (none for the reference).
func (im *impl) missing(binary string) ([]string, error) {
	if im.api == nil {
		return nil, nil
	}
	out, err := exec.Command("nm", "-u", "-D", binary).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("nm -u %s: %w\n%s", binary, err, out)
	}
	var miss []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		sym, _, _ := strings.Cut(f[len(f)-1], "@")
		name := strings.TrimPrefix(sym, "P")
		if strings.HasPrefix(name, "MPI_") && !im.api[name] {
			miss = append(miss, name)
		}
	}
	sort.Strings(miss)
	return miss, nil
}

// compile builds src with im's wrapper (C or C++ by the suffix) into dir.
func (im *impl) compile(t *testing.T, src, dir string) string {
	t.Helper()
	cc := im.cc
	if strings.HasSuffix(src, ".cpp") {
		cc = im.cxx
	}
	bin := filepath.Join(dir, strings.TrimSuffix(filepath.Base(src), filepath.Ext(src))+"."+im.name)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cc, "-O1", "-g", "-Wall", "-I", filepath.Join(repoRoot, "capi", "ctest", "testdata"), "-o", bin, src, "-lm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, src, err, out)
	}
	return bin
}

// runBound bounds one job: 8 ranks of a program take seconds on a loaded
// 2-core machine.
const runBound = 90 * time.Second

// run starts bin at n ranks under im and returns its combined output.
func (im *impl) run(n int, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), runBound)
	defer cancel()
	argv := append(append(append([]string{}, im.launcher...), fmt.Sprint(n), bin), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), im.env...)
	// On the bound the launcher gets SIGTERM, which both forward to the
	// ranks, so none is left behind; SIGKILL 10 s later if it lingers.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (bounded at %v)", ctx.Err(), runBound)
	}
	if err != nil {
		return string(out), fmt.Errorf("%s at %d ranks under %s: %w", filepath.Base(bin), n, im.name, err)
	}
	return string(out), nil
}

// expectedPass reads testdata/expected-pass: the programs (file names
// without suffix, or "heat") that must pass on gompi.
func expectedPass(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "expected-pass"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line != "" {
			want[line] = true
		}
	}
	return want
}

func firstLine(b []byte) string {
	l, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return l
}

// applicable says why bin cannot run on gompi ("" when it can): it needs
// functions gompi-info --c-api does not list.
func applicable(bin string) (string, error) {
	miss, err := gompi.missing(bin)
	if err != nil || len(miss) == 0 {
		return "", err
	}
	return "not applicable to gompi: gompi-info --c-api lacks " + strings.Join(miss, " "), nil
}
