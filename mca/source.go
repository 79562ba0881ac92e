package mca

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Source says where a parameter value came from, weakest first.
type Source int

const (
	SourceDefault Source = iota
	// SourceInferred is a value gompi derived from another parameter (a
	// remote snapshot folder's URL implies the FileM that reaches it).
	// Anything a user sets wins over it; unlike a default it is carried
	// to daemons and ranks and kept in snapshots, as the job ran with it.
	SourceInferred
	SourceSystemFile
	SourceUserYAML
	SourceUserFile
	SourceAMCA
	SourceEnv
	SourceCommandLine
)

var sourceNames = map[Source]string{
	SourceDefault:     "default",
	SourceInferred:    "inferred",
	SourceSystemFile:  "system file",
	SourceUserYAML:    "user yaml",
	SourceUserFile:    "user file",
	SourceAMCA:        "amca set",
	SourceEnv:         "environment",
	SourceCommandLine: "command line",
}

func (s Source) String() string { return sourceNames[s] }

// Explicit reports whether a value from s was chosen by someone (a file,
// the environment, the command line, an AMCA set) rather than defaulted or
// inferred by gompi: an explicit value is never overridden by an inferred
// one.
func (s Source) Explicit() bool { return s != SourceDefault && s != SourceInferred }

// MarshalText makes sources readable in JSON output and snapshot metadata.
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText is the inverse of MarshalText.
func (s *Source) UnmarshalText(b []byte) error {
	for k, v := range sourceNames {
		if v == string(b) {
			*s = k
			return nil
		}
	}
	return fmt.Errorf("mca: unknown parameter source %q", b)
}

// Origin is where one value was set: the source and the exact place
// ("/etc/gompi/mca-params.conf:12", "GOMPI_MCA_crs", "--mca").
type Origin struct {
	Source Source `json:"source"`
	Where  string `json:"where,omitempty"`
}

func (o Origin) String() string {
	if o.Where == "" {
		return o.Source.String()
	}
	return o.Source.String() + " (" + o.Where + ")"
}

// Setting is a parameter's value with its origin.
type Setting struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Origin Origin `json:"origin"`
}

// EnvPrefix starts the environment variable of every parameter:
// GOMPI_MCA_<exact name>.
const EnvPrefix = "GOMPI_MCA_"

// Built-in AMCA parameter sets, so `-am ft-enable-cr` works without an
// installation.
//
//go:embed amca
var builtinAMCA embed.FS

// BuiltinAMCASets lists the names of the AMCA sets embedded in the binary.
func BuiltinAMCASets() []string {
	ents, _ := fs.ReadDir(builtinAMCA, "amca")
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// SourceOptions says where a process finds its parameter sources. Zero
// fields take the usual places.
type SourceOptions struct {
	// MCA holds the command line's --mca pairs as "name=value", in order.
	MCA []string
	// AMCA holds the -am values in order; each may list several sets
	// separated by ',' or ':'. The leftmost set wins.
	AMCA []string
	// Home is the user's home directory ($HOME).
	Home string
	// SysconfDir holds the system file mca-params.conf
	// ($GOMPI_SYSCONFDIR, else /etc/gompi).
	SysconfDir string
	// WorkDir is where relative AMCA names are looked up (the current directory).
	WorkDir string
	// AMCAPath lists the installed set folders searched before WorkDir
	// (<executable>/../share/gompi/amca-param-sets).
	AMCAPath []string
	// NoUserFiles skips $HOME/.gompi; tools and tests use it for isolation.
	NoUserFiles bool
}

type layer struct {
	source  Source
	entries map[string]Setting
}

// Sources holds every raw value a process was given, before they are checked
// against the registered parameters, as layers in precedence order: a
// name's value is the one of the strongest layer that sets it. (The layers
// are all the precedence needs, so no configuration library is linked: the
// sources are read by every rank that runs alone.)
type Sources struct {
	layers   []layer  // weakest first
	amcaSets []string // resolved AMCA set names/paths, leftmost first
}

// LoadSources reads every source named in opts and the environment. A
// missing user or system file is no error; a malformed one is, naming file
// and line.
func LoadSources(opts SourceOptions) (*Sources, error) {
	if opts.Home == "" && !opts.NoUserFiles {
		opts.Home, _ = os.UserHomeDir()
	}
	if opts.SysconfDir == "" {
		opts.SysconfDir = os.Getenv("GOMPI_SYSCONFDIR")
		if opts.SysconfDir == "" {
			opts.SysconfDir = "/etc/gompi"
		}
	}
	if opts.WorkDir == "" {
		opts.WorkDir, _ = os.Getwd()
	}
	if opts.AMCAPath == nil {
		if exe, err := os.Executable(); err == nil {
			opts.AMCAPath = []string{filepath.Join(filepath.Dir(exe), "..", "share", "gompi", "amca-param-sets")}
		}
	}

	s := &Sources{}

	if err := s.addFile(SourceSystemFile, filepath.Join(opts.SysconfDir, "mca-params.conf")); err != nil {
		return nil, err
	}
	if !opts.NoUserFiles && opts.Home != "" {
		if err := s.addYAML(filepath.Join(opts.Home, ".gompi", "config.yaml")); err != nil {
			return nil, err
		}
		if err := s.addFile(SourceUserFile, filepath.Join(opts.Home, ".gompi", "mca-params.conf")); err != nil {
			return nil, err
		}
	}

	env := envLayer()
	cmd, err := cmdLayer(opts.MCA)
	if err != nil {
		return nil, err
	}
	// -am is shorthand for mca_base_param_file_prefix, so AMCA sets can also
	// come from the environment.
	amca := opts.AMCA
	if len(amca) == 0 {
		if set, ok := cmd.entries["mca_base_param_file_prefix"]; ok {
			amca = []string{set.Value}
		} else if set, ok := env.entries["mca_base_param_file_prefix"]; ok {
			amca = []string{set.Value}
		}
	}
	var names []string
	for _, a := range amca {
		names = append(names, strings.FieldsFunc(a, func(r rune) bool { return r == ',' || r == ':' })...)
	}
	for i := len(names) - 1; i >= 0; i-- { // rightmost first, so the leftmost is applied last and wins
		if err := s.addAMCA(names[i], opts); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		s.amcaSets = append(s.amcaSets, n)
	}
	s.layers = append(s.layers, env, cmd)

	return s, nil
}

// AMCASets returns the AMCA sets in force, leftmost (strongest) first.
func (s *Sources) AMCASets() []string { return append([]string(nil), s.amcaSets...) }

// Peek returns the strongest raw value of name without checking it; it lets
// start-up read the few parameters needed to find the rest (the plugin path)
// before everything is registered.
func (s *Sources) Peek(name string) (Setting, bool) {
	for i := len(s.layers) - 1; i >= 0; i-- {
		if e, ok := s.layers[i].entries[name]; ok {
			return e, true
		}
	}
	return Setting{}, false
}

func (s *Sources) addFile(src Source, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mca: read parameter file: %w", err)
	}
	defer f.Close()
	entries, err := ParseParamFile(f, path)
	if err != nil {
		return fmt.Errorf("mca: %w", err)
	}
	s.layers = append(s.layers, fileLayer(src, path, entries))
	return nil
}

func fileLayer(src Source, where string, entries []Entry) layer {
	l := layer{source: src, entries: map[string]Setting{}}
	for _, e := range entries {
		name := strings.ToLower(e.Name)
		l.entries[name] = Setting{Name: name, Value: e.Value, Origin: Origin{src, fmt.Sprintf("%s:%d", where, e.Line)}}
	}
	return l
}

// readBounded reads the file at path, refusing one larger than
// MaxParamFileSize before reading more than that.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxParamFileSize+1))
	if err == nil && len(data) > MaxParamFileSize {
		err = fmt.Errorf("%s is larger than %d MiB, far more than any parameter file: is it the file you meant?", path, MaxParamFileSize>>20)
	}
	return data, err
}

// addYAML reads $HOME/.gompi/config.yaml. Keys are folded to lower case
// and a '.' in a key nests like indentation does (sstore.stage.compress);
// a key without a value (null) sets nothing.
func (s *Sources) addYAML(path string) error {
	data, err := readBounded(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mca: read parameter file: %w", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("mca: %s: %w", path, err)
	}
	l := layer{source: SourceUserYAML, entries: map[string]Setting{}}
	flattenYAML("", doc, func(k, v string) {
		l.entries[k] = Setting{Name: k, Value: v, Origin: Origin{SourceUserYAML, path}}
	})
	s.layers = append(s.layers, l)
	return nil
}

// flattenYAML accepts both flat keys (sstore_stage_compress: zstd) and
// nesting (sstore: {stage: {compress: zstd}}), joined with '_'.
func flattenYAML(prefix string, m map[string]any, put func(k, v string)) {
	for k, v := range m {
		key := strings.ReplaceAll(strings.ToLower(k), ".", "_")
		if prefix != "" {
			key = prefix + "_" + key
		}
		switch t := v.(type) {
		case map[string]any:
			flattenYAML(key, t, put)
		case map[any]any: // a mapping with keys that are not strings (1: x)
			sm := make(map[string]any, len(t))
			for k, v := range t {
				sm[fmt.Sprint(k)] = v
			}
			flattenYAML(key, sm, put)
		case []any:
			parts := make([]string, len(t))
			for i, x := range t {
				parts[i] = fmt.Sprint(x)
			}
			put(key, strings.Join(parts, ","))
		case nil:
		default:
			put(key, fmt.Sprint(t))
		}
	}
}

func (s *Sources) addAMCA(name string, opts SourceOptions) error {
	try := func(path string) (bool, error) {
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("mca: AMCA set %q: %w", name, err)
		}
		defer f.Close()
		entries, err := ParseParamFile(f, path)
		if err != nil {
			return false, fmt.Errorf("mca: AMCA set %q: %w", name, err)
		}
		s.layers = append(s.layers, fileLayer(SourceAMCA, path, entries))
		return true, nil
	}
	if filepath.IsAbs(name) || strings.ContainsRune(name, filepath.Separator) {
		path := name
		if !filepath.IsAbs(path) {
			path = filepath.Join(opts.WorkDir, path)
		}
		ok, err := try(path)
		if err == nil && !ok {
			err = fmt.Errorf("mca: AMCA set %q: no such file %s", name, path)
		}
		return err
	}
	dirs := append(append([]string(nil), opts.AMCAPath...), opts.WorkDir)
	for _, d := range dirs {
		if ok, err := try(filepath.Join(d, name)); ok || err != nil {
			return err
		}
	}
	if data, err := builtinAMCA.ReadFile("amca/" + name); err == nil {
		entries, err := ParseParamFile(strings.NewReader(string(data)), name+" (built-in)")
		if err != nil {
			return fmt.Errorf("mca: %w", err)
		}
		s.layers = append(s.layers, fileLayer(SourceAMCA, name+" (built-in)", entries))
		return nil
	}
	return fmt.Errorf("mca: AMCA parameter set %q not found: looked in %s and the built-in sets (%s)",
		name, strings.Join(dirs, ", "), strings.Join(BuiltinAMCASets(), ", "))
}

func envLayer() layer {
	l := layer{source: SourceEnv, entries: map[string]Setting{}}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if name, ok := strings.CutPrefix(k, EnvPrefix); ok && name != "" {
			l.entries[name] = Setting{Name: name, Value: v, Origin: Origin{SourceEnv, k}}
		}
	}
	return l
}

func cmdLayer(pairs []string) (layer, error) {
	l := layer{source: SourceCommandLine, entries: map[string]Setting{}}
	for _, p := range pairs {
		name, value, ok := strings.Cut(p, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return l, fmt.Errorf("mca: --mca %q: write --mca name value (or --mca name=value)", p)
		}
		if prev, dup := l.entries[name]; dup {
			return l, fmt.Errorf("mca: --mca %s given twice (%q, then %q): give each parameter once", name, prev.Value, value)
		}
		l.entries[name] = Setting{Name: name, Value: value, Origin: Origin{SourceCommandLine, "--mca"}}
	}
	return l, nil
}

// layerNames lists, for suggestions, every name set by a layer of source src.
func (s *Sources) names(src Source) []string {
	var out []string
	for _, l := range s.layers {
		if l.source == src {
			for k := range l.entries {
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}
