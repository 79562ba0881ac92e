package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	crsnone "gompi/components/crs/none"
	"gompi/components/filem/raw"
	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/crs/crstest"
	"gompi/frameworks/filem"
	"gompi/frameworks/filem/filemtest"
	"gompi/mca"
	"gompi/testdata/plugins/fixtures"
)

const kitName = "gompi-plugin-kit"

var (
	buildMu   sync.Mutex
	buildDir  string
	buildErrs = map[string]error{}
)

// buildPlugin builds the kit plugin once per test binary run and returns
// the binary's path.
func buildPlugin(t *testing.T) string { return buildNamed(t, kitName) }

// buildNamed builds the plugin of testdata/plugins/<name> once per test
// binary run and returns the binary's path.
func buildNamed(t *testing.T, name string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	err, built := buildErrs[name]
	if !built {
		if buildDir == "" {
			buildDir, err = os.MkdirTemp("", "gompi-plugin-build-")
		}
		if err == nil {
			out, berr := exec.Command("go", "build", "-o", filepath.Join(buildDir, name), "gompi/testdata/plugins/"+name).CombinedOutput()
			if berr != nil {
				err = fmt.Errorf("go build the plugin %s: %v\n%s", name, berr, out)
			}
		}
		buildErrs[name] = err
	}
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(buildDir, name)
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(envHostDir); dir != "" {
		os.Exit(hostProcess(dir))
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// installKit places the kit plugin as name in a fresh folder and returns
// the folder.
func installKit(t *testing.T, names ...string) string {
	t.Helper()
	return install(t, buildPlugin(t), names...)
}

// install places the plugin binary bin under names (its own by default)
// in a fresh folder and returns the folder.
func install(t *testing.T, bin string, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	if len(names) == 0 {
		names = []string{filepath.Base(bin)}
	}
	for _, n := range names {
		dst := filepath.Join(dir, n)
		if err := os.Link(bin, dst); err != nil {
			copyFile(t, bin, dst)
		}
	}
	return dir
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func sumOf(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// syncBuffer collects log output from go-plugin's goroutines.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

// waitFor waits until a line holding every part has been written, or fails
// after a generous bound.
func (s *syncBuffer) waitFor(t *testing.T, parts ...string) string {
	t.Helper()
	bound := time.NewTimer(30 * time.Second)
	defer bound.Stop()
	for {
		s.mu.Lock()
		for _, line := range strings.Split(s.b.String(), "\n") {
			if containsAll(line, parts) {
				s.mu.Unlock()
				return line
			}
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-bound.C:
			t.Fatalf("no log line with %q in:\n%s", parts, s.String())
		}
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// loaded is a process whose plugins were loaded the way a gompi process
// loads them.
type loaded struct {
	host   *Host
	set    *frameworks.Set
	params *mca.Params
	vals   *mca.Values
	log    *syncBuffer
}

// load sets env (GOMPI_MCA_ names without the prefix) and the plugin path,
// gathers the sources, loads the plugins and resolves the values.
func load(t *testing.T, dir string, env map[string]string) *loaded {
	t.Helper()
	return loadAt(t, dir, env, slog.LevelDebug)
}

func loadAt(t *testing.T, dir string, env map[string]string, level slog.Level) *loaded {
	t.Helper()
	t.Setenv(mca.EnvPrefix+ParamPath, dir)
	for k, v := range env {
		t.Setenv(mca.EnvPrefix+k, v)
	}
	src, err := mca.LoadSources(mca.SourceOptions{NoUserFiles: true, SysconfDir: t.TempDir(), AMCAPath: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	l := &loaded{params: mca.NewParams(), log: &syncBuffer{}}
	RegisterParams(l.params)
	l.set = frameworks.New(l.params)
	log := slog.New(slog.NewTextHandler(l.log, &slog.HandlerOptions{Level: level}))
	l.host, err = Load(t.Context(), l.set, src, log)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() {
		l.host.Close()
		if t.Failed() {
			t.Logf("host log:\n%s", l.log.String())
		}
	})
	l.vals, err = l.params.Resolve(src)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	return l
}

// choose returns the values with framework selection set to name only.
func (l *loaded) choose(t *testing.T, framework, name string) *mca.Values {
	t.Helper()
	vals, err := l.params.ResolveSettings(append(l.vals.All(), mca.Setting{Name: framework, Value: name}))
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

func (l *loaded) filem(t *testing.T, name string) filem.Module {
	t.Helper()
	c, err := l.set.FileM.SelectOne(t.Context(), l.choose(t, filem.Name, name), mca.RoleDaemon, nil)
	if err != nil {
		t.Fatalf("select filem %s: %v", name, err)
	}
	return c.Module
}

func (l *loaded) crs(t *testing.T, name string) crs.Module {
	t.Helper()
	c, err := l.set.CRS.SelectOne(t.Context(), l.choose(t, crs.Name, name), mca.RoleApp, nil)
	if err != nil {
		t.Fatalf("select crs %s: %v", name, err)
	}
	return c.Module
}

// inProcess returns a module of a component registered in a fresh set.
func inProcess[M any](t *testing.T, reg func(*frameworks.Set) *mca.Framework[M], c mca.Component[M]) M {
	t.Helper()
	params := mca.NewParams()
	set := frameworks.New(params)
	fw := reg(set)
	fw.Register(c)
	vals, err := params.ResolveSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	cand, err := fw.SelectOne(t.Context(), vals, mca.RoleDaemon, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cand.Module
}

func TestFileMConformance(t *testing.T) {
	l := load(t, installKit(t), nil)
	t.Run("plugin", func(t *testing.T) {
		filemtest.Run(t, func(t *testing.T) filem.Module { return l.filem(t, "plugraw") })
	})
	t.Run("in-process", func(t *testing.T) {
		filemtest.Run(t, func(t *testing.T) filem.Module {
			return inProcess(t, func(s *frameworks.Set) *mca.Framework[filem.Module] { return s.FileM }, raw.New())
		})
	})
}

func TestCRSConformance(t *testing.T) {
	l := load(t, installKit(t), nil)
	crsOf := func(s *frameworks.Set) *mca.Framework[crs.Module] { return s.CRS }
	for _, tc := range []struct {
		name   string
		module func(t *testing.T) crs.Module
		can    bool
	}{
		{"plugin/context", func(t *testing.T) crs.Module { return l.crs(t, "context") }, true},
		{"in-process/context", func(t *testing.T) crs.Module { return inProcess(t, crsOf, fixtures.ContextCRS()) }, true},
		{"plugin/plugnone", func(t *testing.T) crs.Module { return l.crs(t, "plugnone") }, false},
		{"in-process/none", func(t *testing.T) crs.Module { return inProcess(t, crsOf, crsnone.New()) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) { crstest.Run(t, tc.module, crstest.Options{CanCheckpoint: tc.can}) })
	}
}

func TestDescribe(t *testing.T) {
	dir := installKit(t)
	l := load(t, dir, nil)
	if errs := l.host.Errors(); len(errs) != 0 {
		t.Fatalf("load errors: %v", errs)
	}
	plugins := l.host.Plugins()
	if len(plugins) != 1 {
		t.Fatalf("%d plugins running, want 1", len(plugins))
	}
	path := filepath.Join(dir, kitName)
	if plugins[0].Path != path || plugins[0].PID <= 0 {
		t.Errorf("plugin %+v, want path %s and a pid", plugins[0], path)
	}
	want := map[string]string{"filem/plugraw": "", "crs/plugnone": "", "crs/context": "", "filem/plugcrash": "",
		"filem/plughang": "", "filem/plugorphan": ""}
	for _, c := range plugins[0].Components {
		delete(want, c.Framework+"/"+c.Name)
		if c.Origin != path {
			t.Errorf("%s/%s origin %q, want %s", c.Framework, c.Name, c.Origin, path)
		}
	}
	if len(want) != 0 {
		t.Errorf("components not added: %v", want)
	}
	for _, c := range l.set.FileM.Components() {
		if c.Name == "plugraw" && (c.Priority != 20 || c.Version == "" || c.Description == "") {
			t.Errorf("plugraw info %+v: want priority 20, a version and a description", c)
		}
	}
	p, ok := l.params.Lookup("filem_plugraw_max_concurrent")
	if !ok || p.Default != "4" || p.Type != mca.Int || p.Owner != "filem/plugraw" {
		t.Fatalf("parameter filem_plugraw_max_concurrent = %+v (%v), want the plugin's Int default 4 owned by filem/plugraw", p, ok)
	}
	if _, ok := l.params.Lookup("filem_plugraw_priority"); !ok {
		t.Error("filem_plugraw_priority not registered")
	}
}

// TestSettingsReachPlugin sets a plugin component's parameter on the host:
// the plugin resolves it from the forwarded settings.
func TestSettingsReachPlugin(t *testing.T) {
	l := load(t, installKit(t), map[string]string{"filem_plugraw_max_concurrent": "0"})
	probes, err := l.set.FileM.Probe(t.Context(), l.vals, mca.RoleDaemon)
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, p := range probes {
		if p.Info.Name == "plugraw" {
			seen = true
			if !strings.Contains(p.Failed, "filem_raw_max_concurrent = 0: must be at least 1") {
				t.Errorf("probe of plugraw: %+v, want it failed on its own parameter", p)
			}
		}
	}
	if !seen {
		t.Error("plugraw not probed")
	}
}

func TestChecksums(t *testing.T) {
	dir := installKit(t)
	right := sumOf(t, filepath.Join(dir, kitName))
	wrong := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name    string
		env     map[string]string
		loads   bool
		errText []string
	}{
		{"pinned right", map[string]string{ParamChecksums: kitName + "=sha256:" + right}, true, nil},
		{"pinned right, required", map[string]string{ParamChecksums: "other=sha256:" + wrong + "," + kitName + "=sha256:" + right, ParamRequireChecksum: "1"}, true, nil},
		{"pinned wrong", map[string]string{ParamChecksums: kitName + "=sha256:" + wrong}, false,
			[]string{"checksum mismatch", "sha256:" + wrong, "sha256:" + right, kitName}},
		{"required, not pinned", map[string]string{ParamRequireChecksum: "yes"}, false,
			[]string{ParamRequireChecksum, kitName + "=sha256:" + right}},
		{"pinned for another file", map[string]string{ParamChecksums: "gompi-plugin-other=sha256:" + wrong}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := load(t, dir, tc.env)
			errs := l.host.Errors()
			names := l.set.FileM.Names()
			if tc.loads {
				if len(errs) != 0 || len(l.host.Plugins()) != 1 || !contains(names, "plugraw") {
					t.Fatalf("plugin not loaded: errors %v, filem components %v", errs, names)
				}
				return
			}
			if len(l.host.Plugins()) != 0 || contains(names, "plugraw") {
				t.Errorf("refused plugin is running or registered (filem components %v)", names)
			}
			if len(errs) != 1 {
				t.Fatalf("%d load errors, want 1: %v", len(errs), errs)
			}
			var le *LoadError
			if !errors.As(errs[0], &le) || le.Path != filepath.Join(dir, kitName) {
				t.Errorf("error %v is not a LoadError naming the plugin", errs[0])
			}
			for _, w := range tc.errText {
				if !strings.Contains(errs[0].Error(), w) {
					t.Errorf("error %q does not say %q", errs[0], w)
				}
			}
			if !strings.Contains(l.log.String(), "plugin not loaded") {
				t.Errorf("refusal not logged (mca_base_component_show_load_errors is on): %s", l.log.String())
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestBadChecksumParameter(t *testing.T) {
	t.Setenv(mca.EnvPrefix+ParamChecksums, "gompi-plugin-kit=md5:abc")
	src, err := mca.LoadSources(mca.SourceOptions{NoUserFiles: true, SysconfDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	params := mca.NewParams()
	RegisterParams(params)
	_, err = Load(t.Context(), frameworks.New(params), src, nil)
	if err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("load with a malformed pin: %v, want an error explaining the format", err)
	}
}

func TestShowLoadErrorsOff(t *testing.T) {
	l := load(t, installKit(t), map[string]string{ParamRequireChecksum: "1", ParamShowLoadErrors: "0"})
	if len(l.host.Errors()) != 1 {
		t.Fatalf("errors %v, want the refusal recorded", l.host.Errors())
	}
	if strings.Contains(l.log.String(), "level=WARN") {
		t.Errorf("warning logged with %s off:\n%s", ParamShowLoadErrors, l.log.String())
	}
}

func TestCrashedPlugin(t *testing.T) {
	dir := installKit(t)
	l := load(t, dir, nil)
	crash := l.filem(t, "plugcrash")
	rawm := l.filem(t, "plugraw")
	err := crash.Put(t.Context(), []filem.Transfer{{Local: "/nonexistent", Remote: filem.Remote{Path: "/nonexistent2"}}})
	if !errors.Is(err, ErrPluginDied) {
		t.Fatalf("put on a crashing plugin: %v, want ErrPluginDied", err)
	}
	t.Logf("crash: %v", err)
	for _, w := range []string{filepath.Join(dir, kitName), "filem/plugcrash", "exit status 3"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}
	// Every component of the dead process now fails the same way, at once.
	err = rawm.Remove(t.Context(), []filem.Remote{{Path: filepath.Join(t.TempDir(), "x")}})
	if !errors.Is(err, ErrPluginDied) || !strings.Contains(err.Error(), "filem/plugraw") {
		t.Errorf("call to another component of the dead plugin: %v, want ErrPluginDied naming filem/plugraw", err)
	}
	_, err = l.set.CRS.SelectOne(t.Context(), l.choose(t, crs.Name, "context"), mca.RoleApp, nil)
	if !errors.Is(err, mca.ErrNoComponent) {
		t.Errorf("selecting a component of the dead plugin: %v, want no component available", err)
	}
}

func TestHungPlugin(t *testing.T) {
	dir := installKit(t)
	l := load(t, dir, map[string]string{ParamIOTimeout: "2s"})
	hang := l.filem(t, "plughang")
	err := hang.Get(t.Context(), []filem.Transfer{{Local: "/a", Remote: filem.Remote{Path: "/b"}}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("get on a hung plugin: %v, want context.DeadlineExceeded", err)
	}
	t.Logf("hang: %v", err)
	for _, w := range []string{filepath.Join(dir, kitName), "filem/plughang", ParamIOTimeout} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}
	// The plugin process itself still serves its other components.
	if err := l.filem(t, "plugraw").Remove(t.Context(), nil); err != nil {
		t.Errorf("other component of the plugin after a hung call: %v", err)
	}
}

// TestHostContext shows the host's own deadline and cancellation reach the
// caller as context errors, not as plugin failures.
func TestHostContext(t *testing.T) {
	l := load(t, installKit(t), nil)
	hang := l.filem(t, "plughang")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := hang.Put(ctx, nil)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrPluginDied) {
		t.Errorf("put with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestClose(t *testing.T) {
	l := load(t, installKit(t, kitName, "gompi-plugin-kit2"), nil)
	m := l.filem(t, "plugraw")
	plugins := l.host.Plugins()
	// The second copy carries the same component names: it is refused and
	// must not keep running.
	if len(plugins) != 1 || len(l.host.Errors()) != 6 {
		t.Fatalf("%d plugins, errors %v; want 1 plugin and the second copy's 6 duplicate components refused", len(plugins), l.host.Errors())
	}
	if err := l.host.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range plugins {
		if err := unix.Kill(p.PID, 0); !errors.Is(err, unix.ESRCH) {
			t.Errorf("plugin pid %d still exists after Close (kill 0: %v)", p.PID, err)
		}
	}
	if stray := kitProcesses(t, filepath.Dir(plugins[0].Path)); len(stray) != 0 {
		t.Errorf("plugin processes left after Close: %v", stray)
	}
	err := m.Put(t.Context(), nil)
	if !errors.Is(err, ErrPluginDied) {
		t.Errorf("call after Close: %v, want ErrPluginDied", err)
	}
	if err := l.host.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// kitProcesses lists the PIDs of processes running a binary from dir.
func kitProcesses(t *testing.T, dir string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && strings.HasPrefix(exe, dir+string(filepath.Separator)) {
			out = append(out, pid)
		}
	}
	return out
}

func TestNotPlugins(t *testing.T) {
	dir := installKit(t)
	write := func(name, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("gompi-plugin-garbage", "#!/bin/sh\necho not a plugin\n", 0o755)
	write("gompi-plugin-exits", "#!/bin/sh\nexit 7\n", 0o755)
	write("gompi-plugin-notes.txt", "not executable", 0o644)
	write("other-tool", "#!/bin/sh\nexit 1\n", 0o755)
	if err := os.Mkdir(filepath.Join(dir, "gompi-plugin-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	l := load(t, missing+":"+dir, nil)
	errs := l.host.Errors()
	if len(errs) != 2 {
		t.Fatalf("load errors %v, want the two broken executables", errs)
	}
	for i, name := range []string{"gompi-plugin-exits", "gompi-plugin-garbage"} {
		var le *LoadError
		if !errors.As(errs[i], &le) || le.Path != filepath.Join(dir, name) {
			t.Errorf("error %d: %v, want a LoadError for %s", i, errs[i], name)
		}
	}
	if len(l.host.Plugins()) != 1 || !contains(l.set.FileM.Names(), "plugraw") {
		t.Errorf("the good plugin did not load beside the broken ones")
	}
}

func TestAddRefusesBadDescriptions(t *testing.T) {
	set := frameworks.New(mca.NewParams())
	p := &proc{path: "/x/gompi-plugin-test"}
	for _, tc := range []struct {
		name string
		desc string
		d    *describedComponent
	}{
		{"unsupported framework", "cannot be carried", &describedComponent{fw: "crcp", name: "x"}},
		{"bad default", "bad parameter", &describedComponent{fw: "filem", name: "bad", param: "filem_bad_n", typ: mca.Int, def: "many"}},
		{"bad name", "parameter", &describedComponent{fw: "filem", name: "bad2", param: "filem_bad2_N!", typ: mca.String}},
		{"foreign parameter", "must start with", &describedComponent{fw: "filem", name: "bad3", param: "crs_self_x", typ: mca.String}},
		{"priority parameter", "bad parameter", &describedComponent{fw: "crs", name: "bad4", param: "crs_bad4_priority", typ: mca.Int, def: "1"}},
		{"bad component name", "component name", &describedComponent{fw: "crs", name: "Bad-Name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.add(set, tc.d.pb())
			if err == nil || !strings.Contains(err.Error(), tc.desc) {
				t.Errorf("add: %v, want an error saying %q", err, tc.desc)
			}
		})
	}
}

// TestPluginLogs shows a plugin component's records reaching the host's
// log at their level, with the plugin and component named, and records
// below the host's level not sent at all.
func TestPluginLogs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		level slog.Level
	}{{"debug", slog.LevelDebug}, {"warn", slog.LevelWarn}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := installKit(t)
			l := loadAt(t, dir, nil, tc.level)
			l.filem(t, "plughang")
			line := l.log.waitFor(t, "test fixture: misbehaves on every call")
			for _, w := range []string{"level=WARN", "component=plughang", "fixture=plughang", "plugin=" + filepath.Join(dir, kitName)} {
				if !strings.Contains(line, w) {
					t.Errorf("relayed record %q lacks %q", line, w)
				}
			}
			if tc.level == slog.LevelDebug {
				l.log.waitFor(t, "level=DEBUG", "test fixture: debug detail")
				return
			}
			// Records are relayed in order: once a later warning is in, an
			// earlier debug record would be too.
			l.filem(t, "plugcrash")
			l.log.waitFor(t, "fixture=plugcrash", "level=WARN")
			if strings.Contains(l.log.String(), "level=DEBUG") {
				t.Errorf("debug records reached a host logging at warn:\n%s", l.log.String())
			}
		})
	}
}

// TestOrphanedChild crashes a plugin that left a child holding its stderr:
// the crash is still reported as such, and Close kills the child too.
func TestOrphanedChild(t *testing.T) {
	l := load(t, installKit(t), nil)
	pid := l.host.Plugins()[0].PID
	err := l.filem(t, "plugorphan").Put(t.Context(), nil)
	if !errors.Is(err, ErrPluginDied) || !strings.Contains(err.Error(), "exit status 4") && !strings.Contains(err.Error(), "exited") {
		t.Fatalf("put on a plugin that exited leaving a child: %v, want ErrPluginDied", err)
	}
	if len(groupMembers(t, pid)) == 0 {
		t.Fatal("the fixture's child is not running; the test proves nothing")
	}
	l.host.Close()
	// SIGKILL is delivered asynchronously: wait (bounded) for each member
	// still listed to end, through its pidfd, before judging.
	for _, p := range groupMembers(t, pid) {
		waitGone(p, 10*time.Second)
	}
	if left := groupMembers(t, pid); len(left) != 0 {
		t.Errorf("processes of the plugin's group left after Close: %v", left)
	}
}

// waitGone waits until process pid has ended (or bound passed).
func waitGone(pid int, bound time.Duration) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // already gone
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	_, _ = unix.Poll(fds, int(bound.Milliseconds()))
}

// groupMembers lists the live processes of process group pgid.
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		var state string
		var ppid, pgrp int
		if _, err := fmt.Sscan(string(b[i+1:]), &state, &ppid, &pgrp); err == nil && pgrp == pgid && state != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// envHostDir makes the test binary a plugin host for TestHostKilled: it
// loads the plugins of the folder named, prints their PIDs and waits to be
// killed.
const envHostDir = "GOMPI_PLUGIN_TEST_HOST_DIR"

func hostProcess(dir string) int {
	set := frameworks.New(mca.NewParams())
	h, err := LoadConfig(context.Background(), set, Config{Dirs: []string{dir}, Timeout: time.Minute}, slog.New(slog.DiscardHandler))
	if err != nil || len(h.Plugins()) == 0 {
		fmt.Fprintln(os.Stderr, "host: no plugin loaded:", err, h.Errors())
		return 1
	}
	for _, p := range h.Plugins() {
		fmt.Println(p.PID)
	}
	select {}
}

// TestHostKilled shows a plugin does not outlive a host killed outright,
// which has no chance to Close it.
func TestHostKilled(t *testing.T) {
	dir := installKit(t)
	host := exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), envHostDir+"="+dir)
	host.Stderr = os.Stderr
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		host.Process.Kill()
		host.Wait()
		t.Fatalf("host did not report its plugin: %v", err)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd of plugin %d: %v", pid, err)
	}
	defer unix.Close(fd)
	host.Process.Signal(syscall.SIGKILL)
	host.Wait()
	// The pidfd turns readable when the plugin exits; the bound only keeps
	// a failure from hanging the suite.
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int((time.Minute).Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("plugin %d still running a minute after its host was killed (poll: %v)", pid, err)
		}
		return
	}
}
