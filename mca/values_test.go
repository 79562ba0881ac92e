package mca

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testParams registers a small fake framework's parameters.
func testParams() *Params {
	p := NewParams()
	p.Register("crs",
		ParamSpec{Name: "crs", Type: String},
		ParamSpec{Name: "crs_base_verbose", Type: Int, Default: "0"},
		ParamSpec{Name: "crs_self_prefix", Type: String, Default: "app"},
		ParamSpec{Name: "sstore_stage_compress", Type: String, Default: "none", Choices: []string{"none", "zstd", "s2", "gzip"}},
		ParamSpec{Name: "sstore_stage_cache", Type: Int, Default: "2"},
		ParamSpec{Name: "snapc_base_periodic", Type: Duration, Default: "0"},
		ParamSpec{Name: "noop_state", Type: Size, Default: "1MiB"},
		ParamSpec{Name: "btl_list", Type: List, Default: "tcp, uds"},
	)
	return p
}

type world struct {
	home, sys, cwd string
}

func newWorld(t *testing.T) world {
	t.Helper()
	root := t.TempDir()
	w := world{filepath.Join(root, "home"), filepath.Join(root, "etc"), filepath.Join(root, "cwd")}
	for _, d := range []string{filepath.Join(w.home, ".gompi"), w.sys, w.cwd} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing from the developer's own environment may leak into a test.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, EnvPrefix) {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	return w
}

func (w world) write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (w world) opts() SourceOptions {
	return SourceOptions{Home: w.home, SysconfDir: w.sys, WorkDir: w.cwd, AMCAPath: []string{}}
}

func TestPrecedence(t *testing.T) {
	w := newWorld(t)
	w.write(t, filepath.Join(w.sys, "mca-params.conf"), "crs = sys\ncrs_base_verbose = 1\nsstore_stage_cache = 7\nsnapc_base_periodic = 5\n")
	w.write(t, filepath.Join(w.home, ".gompi", "config.yaml"), "crs: yaml\nsstore:\n  stage:\n    compress: s2\n")
	w.write(t, filepath.Join(w.home, ".gompi", "mca-params.conf"), "crs = user\ncrs_base_verbose = 2\n")
	w.write(t, filepath.Join(w.cwd, "mine"), "crs = amca-mine\ncrs_self_prefix = left\n")
	w.write(t, filepath.Join(w.cwd, "other"), "crs = amca-other\ncrs_self_prefix = right\nnoop_state = 2MiB\n")
	t.Setenv("GOMPI_MCA_crs", "env")
	t.Setenv("GOMPI_MCA_crs_base_verbose", "9")

	o := w.opts()
	o.AMCA = []string{"mine", "other"}
	o.MCA = []string{"crs=cmd"}
	src, err := LoadSources(o)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := testParams().Resolve(src)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, value string
		source      Source
		where       string
	}{
		{"crs", "cmd", SourceCommandLine, "--mca"},
		{"crs_base_verbose", "9", SourceEnv, "GOMPI_MCA_crs_base_verbose"},
		{"crs_self_prefix", "left", SourceAMCA, filepath.Join(w.cwd, "mine") + ":2"},
		{"noop_state", "2MiB", SourceAMCA, filepath.Join(w.cwd, "other") + ":3"},
		{"sstore_stage_compress", "s2", SourceUserYAML, filepath.Join(w.home, ".gompi", "config.yaml")},
		{"sstore_stage_cache", "7", SourceSystemFile, filepath.Join(w.sys, "mca-params.conf") + ":3"},
		{"btl_list", "tcp, uds", SourceDefault, ""},
	}
	for _, tt := range tests {
		got := vals.Get(tt.name)
		if got.Value != tt.value || got.Origin.Source != tt.source || got.Origin.Where != tt.where {
			t.Errorf("%s = %q from %v, want %q from %v (%s)", tt.name, got.Value, got.Origin, tt.value, tt.source, tt.where)
		}
	}
	if vals.Int("crs_base_verbose") != 9 || vals.Duration("snapc_base_periodic") != 5*time.Second ||
		vals.Size("noop_state") != 2<<20 || strings.Join(vals.List("btl_list"), "|") != "tcp|uds" {
		t.Errorf("typed getters wrong: %d %v %d %v", vals.Int("crs_base_verbose"), vals.Duration("snapc_base_periodic"), vals.Size("noop_state"), vals.List("btl_list"))
	}
	if got := src.AMCASets(); strings.Join(got, ",") != "mine,other" {
		t.Errorf("AMCASets = %v", got)
	}
}

func TestEmptyValuesCount(t *testing.T) {
	w := newWorld(t)
	w.write(t, filepath.Join(w.home, ".gompi", "mca-params.conf"), "crs_self_prefix =\n")
	t.Setenv("GOMPI_MCA_crs", "")
	src, err := LoadSources(w.opts())
	if err != nil {
		t.Fatal(err)
	}
	vals, err := testParams().Resolve(src)
	if err != nil {
		t.Fatal(err)
	}
	if s := vals.Get("crs_self_prefix"); s.Value != "" || s.Origin.Source != SourceUserFile {
		t.Errorf("file `name =` gave %+v", s)
	}
	if s := vals.Get("crs"); s.Value != "" || s.Origin.Source != SourceEnv {
		t.Errorf("empty env var gave %+v", s)
	}
}

func TestBuiltinAMCA(t *testing.T) {
	w := newWorld(t)
	o := w.opts()
	o.AMCA = []string{"ft-enable-cr"}
	src, err := LoadSources(o)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := NewParams().Resolve(src)
	if err != nil {
		t.Fatal(err)
	}
	s := vals.Get("ft_cr_enabled")
	if !vals.Bool("ft_cr_enabled") || s.Origin.Source != SourceAMCA || !strings.HasPrefix(s.Origin.Where, "ft-enable-cr (built-in):") {
		t.Errorf("ft_cr_enabled = %+v", s)
	}
	// An installed set of the same name beats the built-in one.
	inst := filepath.Join(w.cwd, "installed")
	os.MkdirAll(inst, 0o755)
	w.write(t, filepath.Join(inst, "ft-enable-cr"), "ft_cr_enabled = 0\n")
	o.AMCAPath = []string{inst}
	src, err = LoadSources(o)
	if err != nil {
		t.Fatal(err)
	}
	vals, _ = NewParams().Resolve(src)
	if vals.Bool("ft_cr_enabled") {
		t.Error("installed AMCA set did not take precedence over the built-in one")
	}
	// -am can also arrive through the environment.
	o.AMCAPath = []string{}
	o.AMCA = nil
	t.Setenv("GOMPI_MCA_mca_base_param_file_prefix", "ft-enable-cr")
	src, _ = LoadSources(o)
	vals, _ = NewParams().Resolve(src)
	if !vals.Bool("ft_cr_enabled") {
		t.Error("mca_base_param_file_prefix from the environment was not applied")
	}
}

func TestSourceErrors(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(w world, o *SourceOptions)
		wantErr []string
	}{
		{"missing amca", func(w world, o *SourceOptions) { o.AMCA = []string{"ft-enable-crx"} },
			[]string{`AMCA parameter set "ft-enable-crx" not found`, "ft-enable-cr"}},
		{"missing amca path", func(w world, o *SourceOptions) { o.AMCA = []string{"./nope"} },
			[]string{`AMCA set "./nope": no such file`}},
		{"broken user file", func(w world, o *SourceOptions) {
			os.WriteFile(filepath.Join(w.home, ".gompi", "mca-params.conf"), []byte("a = 1\nbroken\n"), 0o644)
		}, []string{filepath.Join(".gompi", "mca-params.conf") + ":2", "has no '='"}},
		{"broken amca", func(w world, o *SourceOptions) {
			os.WriteFile(filepath.Join(w.cwd, "set"), []byte("=x\n"), 0o644)
			o.AMCA = []string{"set"}
		}, []string{`AMCA set "set"`, "set:1: missing parameter name"}},
		{"broken yaml", func(w world, o *SourceOptions) {
			os.WriteFile(filepath.Join(w.home, ".gompi", "config.yaml"), []byte("a: [\n"), 0o644)
		}, []string{"config.yaml"}},
		{"mca twice", func(w world, o *SourceOptions) { o.MCA = []string{"crs=a", "crs=b"} },
			[]string{"--mca crs given twice"}},
		{"mca without value", func(w world, o *SourceOptions) { o.MCA = []string{"crs"} },
			[]string{"write --mca name value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			o := w.opts()
			tt.setup(w, &o)
			_, err := LoadSources(o)
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		mca     []string
		file    string
		wantErr []string
		is      error
		warn    string
	}{
		{name: "bad int from env", env: map[string]string{"GOMPI_MCA_crs_base_verbose": "loud"},
			wantErr: []string{`crs_base_verbose = "loud" (from environment (GOMPI_MCA_crs_base_verbose))`, "not an integer"}, is: ErrBadValue},
		{name: "bad choice from cmdline", mca: []string{"sstore_stage_compress=lz4"},
			wantErr: []string{`"lz4" is not one of none, zstd, s2, gzip`}, is: ErrBadValue},
		{name: "bad duration in file", file: "snapc_base_periodic = soon\n",
			wantErr: []string{"mca-params.conf:1", "not a duration"}, is: ErrBadValue},
		{name: "unknown on cmdline", mca: []string{"sstore_stage_compres=zstd"},
			wantErr: []string{"sstore_stage_compres (from command line (--mca)); did you mean sstore_stage_compress?"}, is: ErrUnknownParam},
		{name: "unknown in env", env: map[string]string{"GOMPI_MCA_crs_base_verbos": "1"},
			wantErr: []string{"did you mean crs_base_verbose?"}, is: ErrUnknownParam},
		{name: "unknown far from anything", mca: []string{"zzzzzzzzzzzz=1"},
			wantErr: []string{"gompi-info --all"}, is: ErrUnknownParam},
		{name: "unknown in file is a warning", file: "crs_slef_prefix = x\n",
			warn: "unknown MCA parameter crs_slef_prefix (from user file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			if tt.file != "" {
				w.write(t, filepath.Join(w.home, ".gompi", "mca-params.conf"), tt.file)
			}
			o := w.opts()
			o.MCA = tt.mca
			src, err := LoadSources(o)
			if err != nil {
				t.Fatal(err)
			}
			vals, err := testParams().Resolve(src)
			if tt.warn != "" {
				if err != nil {
					t.Fatal(err)
				}
				if ws := vals.Warnings(); len(ws) != 1 || !strings.Contains(ws[0], tt.warn) {
					t.Errorf("warnings = %q, want %q", ws, tt.warn)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestResolveSettingsAndEnviron(t *testing.T) {
	w := newWorld(t)
	o := w.opts()
	o.MCA = []string{"crs=self", "sstore_stage_cache=3"}
	src, err := LoadSources(o)
	if err != nil {
		t.Fatal(err)
	}
	p := testParams()
	vals, err := p.Resolve(src)
	if err != nil {
		t.Fatal(err)
	}
	env := vals.Environ()
	if strings.Join(env, " ") != "GOMPI_MCA_crs=self GOMPI_MCA_sstore_stage_cache=3" {
		t.Errorf("Environ = %q", env)
	}
	// What travels with a job resolves to the same values at the other end,
	// origins included; names the receiver does not know are ignored.
	again, err := testParams().ResolveSettings(append(vals.Changed(), Setting{Name: "other_thing", Value: "1"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range vals.All() {
		if g := again.Get(s.Name); g != s {
			t.Errorf("%s: %+v != %+v", s.Name, g, s)
		}
	}
	if _, err := testParams().ResolveSettings([]Setting{{Name: "sstore_stage_cache", Value: "many"}}); !errors.Is(err, ErrBadValue) {
		t.Errorf("bad travelling value accepted: %v", err)
	}
}

func TestParsers(t *testing.T) {
	bools := map[string]bool{"1": true, "yes": true, "On": true, "enabled": true, "0": false, "": false, "no": false, "disabled": false}
	for in, want := range bools {
		if got, err := ParseBool(in); err != nil || got != want {
			t.Errorf("ParseBool(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseBool("maybe"); err == nil {
		t.Error("ParseBool(maybe) accepted")
	}
	durs := map[string]time.Duration{"90": 90 * time.Second, "0.5": 500 * time.Millisecond, "1m30s": 90 * time.Second, "": 0}
	for in, want := range durs {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"-1", "-1s", "soon", "1e300"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
	sizes := map[string]int64{"512": 512, "64k": 64 << 10, "256MiB": 256 << 20, "1G": 1 << 30, "2 mb": 2 << 20}
	for in, want := range sizes {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"1.5G", "-3", "12parsecs", "99999999999T"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestRegisterPanics(t *testing.T) {
	tests := []struct {
		name string
		spec ParamSpec
	}{
		{"upper case", ParamSpec{Name: "Crs"}},
		{"duplicate", ParamSpec{Name: "ft_cr_enabled", Type: Bool}},
		{"bad default", ParamSpec{Name: "x_y", Type: Int, Default: "many"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			NewParams().Register("test", tt.spec)
		})
	}
}

func TestNormalizeArgs(t *testing.T) {
	tests := []struct {
		in, want  string
		stopAtArg bool
	}{
		{"--mca crs self -am ft-enable-cr", "--mca=crs=self --am=ft-enable-cr", false},
		{"-mca crs self --mca=btl=tcp --mca sstore=stage", "--mca=crs=self --mca=btl=tcp --mca=sstore=stage", false},
		{"-np 4 --mca btl tcp ./heat --mca x y", "-np 4 --mca=btl=tcp ./heat --mca x y", true},
		{"--mca crs self -- --mca x y", "--mca=crs=self -- --mca x y", false},
		{"--mca", "--mca", false},
		{"-am=x", "--am=x", false},
	}
	for _, tt := range tests {
		got := strings.Join(NormalizeArgs(strings.Fields(tt.in), tt.stopAtArg, "-np"), " ")
		if got != tt.want {
			t.Errorf("NormalizeArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	known := []string{"crs", "crs_base_verbose", "sstore_stage_compress"}
	for in, want := range map[string]string{"crs_base_verbos": "crs_base_verbose", "src": "crs", "sstore_stage_compres": "sstore_stage_compress", "qqqqqqqqqqq": ""} {
		if got := Closest(in, known); got != want {
			t.Errorf("Closest(%q) = %q, want %q", in, got, want)
		}
	}
}

// The user's YAML file reads as it did when a configuration library read it:
// keys fold to lower case, a '.' in a key nests, lists join with ',', and a
// key without a value sets nothing (the default stays).
func TestYAMLForms(t *testing.T) {
	w := newWorld(t)
	w.write(t, filepath.Join(w.home, ".gompi", "config.yaml"),
		"CRS: upper\nsstore.stage:\n  Compress: zstd\nbtl_list: [tcp, uds, self]\ncrs_self_prefix:\nsstore_stage_cache: 4\n")
	src, err := LoadSources(w.opts())
	if err != nil {
		t.Fatal(err)
	}
	vals, err := testParams().Resolve(src)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"crs": "upper", "sstore_stage_compress": "zstd", "btl_list": "tcp,uds,self",
		"crs_self_prefix": "app", "sstore_stage_cache": "4",
	} {
		if got := vals.Get(name).Value; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if got := vals.Get("crs_self_prefix").Origin.Source; got != SourceDefault {
		t.Errorf("crs_self_prefix from %v, want the default", got)
	}
}
