package info

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"gompi/boot"
	"gompi/cli"
	"gompi/components/builtin"
	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/errmgr"
	"gompi/mca"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/info")

// fake is a component that answers with its configured priority, skips
// with a reason, or fails, as told. Its module is the zero module: these
// tests look at selection, never at what a module does.
type fake[M any] struct {
	info    mca.ComponentInfo
	skip    string    // skip with this reason
	fail    string    // fail with this error
	appOnly bool      // skip unless probed as a rank
	note    string    // note this when answering
	seen    *[]string // records each query, to show selection asked
}

func (f *fake[M]) Info() mca.ComponentInfo { return f.info }

func (f *fake[M]) Query(ctx context.Context, q mca.Query) (M, int, error) {
	var zero M
	if f.seen != nil {
		*f.seen = append(*f.seen, f.info.Framework+"/"+f.info.Name+"@"+q.Role.String())
	}
	place := f.info.Framework + "/" + f.info.Name
	switch {
	case f.skip != "":
		return zero, 0, fmt.Errorf("%s: %s: %w", place, f.skip, mca.ErrSkip)
	case f.fail != "":
		return zero, 0, fmt.Errorf("%s: %s", place, f.fail)
	case f.appOnly && q.Role != mca.RoleApp:
		return zero, 0, fmt.Errorf("%s: works in ranks only, not in a %s: %w", place, q.Role, mca.ErrSkip)
	}
	if f.note != "" && q.Note != nil {
		q.Note(f.note)
	}
	return zero, q.Priority, nil
}

var (
	_ mca.Component[crs.Module]    = (*fake[crs.Module])(nil)
	_ mca.Component[errmgr.Module] = (*fake[errmgr.Module])(nil)
)

// fakeSet is a crs and a stacked errmgr framework with fake components:
// crs has one that answers, one that answers only in ranks, one that skips
// and a plugin that fails; errmgr has two that answer. It is built here
// rather than with frameworks.New so that these golden files change only
// when gompi-info's output does, not whenever a framework gains a
// parameter (TestRealCommand covers the real set).
type fakeSet struct {
	Params *mca.Params
	CRS    *mca.Framework[crs.Module]
	ErrMgr *mca.Framework[errmgr.Module]
}

func (s *fakeSet) All() []mca.FrameworkInfo { return []mca.FrameworkInfo{s.CRS, s.ErrMgr} }

func newFakeSet(seen *[]string) *fakeSet {
	params := mca.NewParams()
	set := &fakeSet{
		Params: params,
		CRS:    mca.NewFramework[crs.Module](params, crs.Name, "Checkpoint/Restart Service: capture and restore one process"),
		ErrMgr: mca.NewFramework[errmgr.Module](params, errmgr.Name, "Error Manager: the stack of fault policies", mca.Stacked()),
	}
	ci := func(fw, name, desc string, prio int, params ...mca.ParamSpec) mca.ComponentInfo {
		return mca.ComponentInfo{Framework: fw, Name: name, Description: desc, Version: "1.0.0", Priority: prio, Origin: "built-in", Params: params}
	}
	set.CRS.Register(&fake[crs.Module]{seen: seen, note: "using fake tool 1.2 at /opt/fake", info: ci("crs", "answer", "Fake CRS that always answers", 30,
		mca.ParamSpec{Name: "crs_answer_dir", Type: mca.String, Default: "/tmp", Help: "Where the fake would write"},
		mca.ParamSpec{Name: "crs_answer_compress", Type: mca.Bool, Default: "0", Level: mca.LevelTuner, Help: "Compress, or not"},
		mca.ParamSpec{Name: "crs_answer_mode", Type: mca.String, Default: "fast", Level: mca.LevelDev + 2, Choices: []string{"fast", "safe"}, Help: "How careful to be"},
		mca.ParamSpec{Name: "crs_answer_timeout", Type: mca.Duration, Default: "30s", Level: mca.LevelTuner + 1, Help: "How long to wait"},
	)})
	set.CRS.Register(&fake[crs.Module]{seen: seen, appOnly: true, info: ci("crs", "low", "Fake CRS for ranks only", 5)})
	set.CRS.Register(&fake[crs.Module]{seen: seen, skip: "needs criu: not installed", info: ci("crs", "skip", "Fake CRS that never applies", 40)})
	failing := ci("crs", "fail", "Fake CRS plugin that breaks", 50,
		mca.ParamSpec{Name: "crs_fail_size", Type: mca.Size, Default: "64k", Level: mca.LevelUser + 1, Help: "A size"})
	failing.Origin = "/opt/gompi/plugins/gompi-plugin-fail"
	failing.Version = ""
	set.CRS.Register(&fake[crs.Module]{seen: seen, fail: "plugin handshake: exit status 1\nstderr: broken", info: failing})
	set.ErrMgr.Register(&fake[errmgr.Module]{seen: seen, info: ci("errmgr", "first", "Fake policy tried first", 20)})
	set.ErrMgr.Register(&fake[errmgr.Module]{seen: seen, info: ci("errmgr", "second", "Fake policy tried second", 10)})
	return set
}

// env is an isolated parameter environment: a home with a user file and a
// yaml file, a system folder with a system file, and a work folder with an
// AMCA set; no GOMPI_ variables from outside.
type env struct {
	home, sysconf, work string
}

// clearEnv removes every GOMPI_ variable for the test.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "GOMPI_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

func newEnv(t *testing.T) env {
	t.Helper()
	clearEnv(t)
	e := env{home: t.TempDir(), sysconf: t.TempDir(), work: t.TempDir()}
	write := func(path, text string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(e.sysconf, "mca-params.conf"), "# system\ncrs_answer_dir = /scratch\nerrmgr_base_verbose = 2\ncrs_answer_timeout = 1m\n")
	write(filepath.Join(e.home, ".gompi", "mca-params.conf"), "# user\n\ncrs_answer_timeout = 90\n")
	write(filepath.Join(e.home, ".gompi", "config.yaml"), "crs:\n  fail:\n    size: 1MiB\n")
	write(filepath.Join(e.work, "tuned"), "crs_answer_mode = safe\ncrs_answer_dir = /fast\n")
	return e
}

func (e env) load(ctx context.Context, opts boot.Options) (Input, func() error, error) {
	set := newFakeSet(nil)
	so := opts.Sources
	so.Home, so.SysconfDir, so.WorkDir, so.AMCAPath = e.home, e.sysconf, e.work, []string{}
	src, err := mca.LoadSources(so)
	if err != nil {
		return Input{}, nil, err
	}
	vals, err := set.Params.Resolve(src)
	if err != nil {
		return Input{}, nil, err
	}
	in := Input{Version: "test", Frameworks: set.All(), Params: set.Params, Values: vals, AMCASets: src.AMCASets()}
	return in, func() error { return nil }, nil
}

// run runs a command line through cli.Execute, as main does.
func run(t *testing.T, cmd *cobra.Command, args []string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	code = cli.Execute(context.Background(), cmd, args, false)
	return out.String(), errb.String(), code
}

// transcript is what a golden file holds: the command line, its output,
// its error output and its exit status, with temporary paths named.
func transcript(envs []string, args []string, stdout, stderr string, code int, paths map[string]string) string {
	var b strings.Builder
	b.WriteString("$ ")
	for _, e := range envs {
		b.WriteString(e + " ")
	}
	b.WriteString("gompi-info " + strings.Join(args, " ") + "\n")
	b.WriteString(stdout)
	if stderr != "" {
		b.WriteString("[stderr]\n" + stderr)
	}
	fmt.Fprintf(&b, "[exit %d]\n", code)
	s := b.String()
	for path, name := range paths {
		s = strings.ReplaceAll(s, path, name)
	}
	return s
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("..", "..", "testdata", "info", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./tools/info -update writes it)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("%s differs from the golden file at line %d:\n got: %s\nwant: %s\n(go test ./tools/info -update rewrites it)\nfull output:\n%s", path, i+1, g, w, got)
				return
			}
		}
	}
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name string
		env  []string // NAME=value
		args string
		code int
	}{
		{"overview", nil, "", 0},
		{"all", nil, "--all", 0},
		{"all-json", nil, "--all --json", 0},
		{"all-parsable", nil, "--all -p", 0},
		{"param-crs-all", nil, "--param crs all", 0},
		{"param-crs-answer-level4", []string{"GOMPI_MCA_crs_answer_compress=yes"}, "--param crs answer --level 4", 0},
		{"param-errmgr", nil, "--param errmgr", 0},
		{"param-mca", nil, "--param mca all -l 1", 0},
		{"command-line", []string{"GOMPI_MCA_crs_low_priority=70"}, "-mca crs answer,low --mca crs_answer_dir=/cli -am tuned,ft-enable-cr --param crs all --level 1", 0},
		{"exclude", nil, "--mca crs ^fail,low", 0},
		{"role-hnp", nil, "--param crs low --role hnp", 0},
		{"role-daemon", nil, "--role daemon", 0},
		{"help", nil, "--help", 0},
		{"err-bogus-selection", []string{"GOMPI_MCA_crs=bogus"}, "--param crs all", cli.ExitFailure},
		{"err-bad-value", []string{"GOMPI_MCA_crs_answer_compress=maybe"}, "", cli.ExitFailure},
		{"err-unknown-param", nil, "--mca crs_answer_dirr /x", cli.ExitFailure},
		{"err-unknown-framework", nil, "--param crss", cli.ExitUsage},
		{"err-unknown-component", nil, "--param crs nosuch", cli.ExitUsage},
		{"err-bad-level", nil, "--level 10", cli.ExitUsage},
		{"err-arg-without-param", nil, "crs", cli.ExitUsage},
		{"err-all-and-param", nil, "--all --param crs", cli.ExitUsage},
		{"err-mca-without-value", nil, "--param crs -mca", cli.ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			for _, kv := range tt.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			args := strings.Fields(tt.args)
			stdout, stderr, code := run(t, newCommand(&Options{Version: "test", load: e.load}), args)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			checkGolden(t, tt.name, transcript(tt.env, args, stdout, stderr, code,
				map[string]string{e.home: "$HOME", e.sysconf: "$SYSCONFDIR", e.work: "$PWD"}))
		})
	}
}

// TestSelectionIsProbed checks that --param probes the framework asked
// about (so a bad selection cannot pass unseen) and only that one.
func TestSelectionIsProbed(t *testing.T) {
	newEnv(t)
	var seen []string
	set := newFakeSet(&seen)
	src, err := mca.LoadSources(mca.SourceOptions{NoUserFiles: true, SysconfDir: t.TempDir(), AMCAPath: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	vals, err := set.Params.Resolve(src)
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Version: "test", Frameworks: set.All(), Params: set.Params, Values: vals}
	rep, err := Collect(context.Background(), in, Query{Framework: "errmgr", Component: "all", Level: 9, Role: mca.RoleHNP})
	if err != nil {
		t.Fatal(err)
	}
	if want := "[errmgr/first@hnp errmgr/second@hnp]"; fmt.Sprint(seen) != want {
		t.Errorf("queried %v, want %s", seen, want)
	}
	if len(rep.Frameworks) != 1 || len(rep.Frameworks[0].Components) != 2 {
		t.Fatalf("report: %+v", rep)
	}
	for _, c := range rep.Frameworks[0].Components {
		if c.Status != StatusSelected {
			t.Errorf("stacked errmgr: %s is %s, want selected", c.Name, c.Status)
		}
	}

	t.Setenv("GOMPI_MCA_crs", "answer,bogus")
	src, err = mca.LoadSources(mca.SourceOptions{NoUserFiles: true, SysconfDir: t.TempDir(), AMCAPath: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if in.Values, err = set.Params.Resolve(src); err != nil {
		t.Fatal(err)
	}
	_, err = Collect(context.Background(), in, Query{Framework: "crs", Level: 9, Role: mca.RoleApp})
	if !errors.Is(err, mca.ErrUnknownComponent) || !strings.Contains(err.Error(), "known crs components: answer, fail, low, skip") {
		t.Errorf("bad selection: err = %v, want ErrUnknownComponent listing the crs components", err)
	}
	var unknown *UnknownError
	if _, err := Collect(context.Background(), in, Query{Framework: "crs", Component: "nope", Level: 9}); !errors.As(err, &unknown) || unknown.What != "crs component" {
		t.Errorf("unknown component: err = %v", err)
	}
}

// TestJSONRoundTrip checks that --json is one valid object with the
// documented fields filled in.
func TestJSONRoundTrip(t *testing.T) {
	e := newEnv(t)
	t.Setenv("GOMPI_MCA_crs_answer_compress", "on")
	stdout, stderr, code := run(t, newCommand(&Options{Version: "test", load: e.load}), []string{"--all", "--json"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep Report
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if rep.Version != "test" || rep.Level != 9 || rep.Role != "app" || len(rep.Params) == 0 {
		t.Errorf("report header: %+v", rep)
	}
	var found bool
	for _, f := range rep.Frameworks {
		for _, c := range f.Components {
			for _, p := range c.Params {
				if p.Name == "crs_answer_compress" {
					found = true
					if p.Value != "on" || p.Origin != (mca.Origin{Source: mca.SourceEnv, Where: "GOMPI_MCA_crs_answer_compress"}) || p.Type != "bool" || p.Level != 4 {
						t.Errorf("crs_answer_compress: %+v", p)
					}
				}
			}
		}
	}
	if !found {
		t.Error("crs_answer_compress missing from the JSON output")
	}
}

// FuzzCommand runs arbitrary command lines (words separated by NUL)
// against the fake frameworks: nothing may panic and the exit status is
// 0, 1 or 2, with something said on failure.
func FuzzCommand(f *testing.F) {
	for _, s := range []string{"", "--all", "--param\x00crs\x00all", "--param\x00mca\x00base", "--param\x00all\x00x",
		"-mca\x00crs\x00^answer\x00--json", "--level\x000", "-p\x00--param\x00errmgr\x00first", "--role\x00daemon\x00-a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		e := newEnv(t)
		stdout, stderr, code := run(t, newCommand(&Options{Version: "test", load: e.load}), strings.Split(line, "\x00"))
		switch {
		case code == 0 && stderr != "" && !strings.Contains(line, "-h"):
			t.Fatalf("exit 0 with error output %q", stderr)
		case code != 0 && (code > 2 || stderr == ""):
			t.Fatalf("exit %d, stderr %q", code, stderr)
		case code == 0 && stdout == "":
			t.Fatal("exit 0 with no output")
		}
	})
}

// TestRealCommand runs the real gompi-info, started by boot.Load over the
// built-in components, in an isolated home and system folder. When the
// built-in list changes, go test ./tools/info -update rewrites its golden
// file.
func TestRealCommand(t *testing.T) {
	clearEnv(t)
	home, sysconf := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("GOMPI_SYSCONFDIR", sysconf)
	if err := os.WriteFile(filepath.Join(sysconf, "mca-params.conf"), []byte("crs_base_verbose = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{home: "$HOME", sysconf: "$SYSCONFDIR"}
	for _, tt := range []struct{ name, args string }{
		{"real-all", "--all"},
		{"real-overview-ft", "-am ft-enable-cr"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := strings.Fields(tt.args)
			stdout, stderr, code := run(t, NewCommand("test"), args)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			checkGolden(t, tt.name, transcript(nil, args, stdout, stderr, code, paths))
		})
	}

	// The acceptance check: a selection naming no CRS component fails,
	// naming the ones that exist.
	t.Setenv("GOMPI_MCA_crs", "bogus")
	_, stderr, code := run(t, NewCommand("test"), []string{"--param", "crs", "all"})
	params := mca.NewParams()
	set := frameworks.New(params)
	builtin.Register(set)
	want := fmt.Sprintf("gompi-info: mca: crs = \"bogus\" (from environment (GOMPI_MCA_crs)): unknown component \"bogus\"; known crs components: %s\n",
		strings.Join(set.CRS.Names(), ", "))
	if code != cli.ExitFailure || stderr != want {
		t.Errorf("GOMPI_MCA_crs=bogus gompi-info --param crs all: exit %d, stderr:\n%s\nwant exit 1 and\n%s", code, stderr, want)
	}
}
