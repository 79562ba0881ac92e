package plugin

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gompi/mca"
)

// Parameters of the plugin bridge (mca_base_component_path and
// mca_base_component_show_load_errors are registered by package mca).
const (
	ParamPath            = "mca_base_component_path"
	ParamShowLoadErrors  = "mca_base_component_show_load_errors"
	ParamChecksums       = "mca_base_component_plugin_checksums"
	ParamRequireChecksum = "mca_base_component_plugin_require_checksum"
	ParamTimeout         = "mca_base_component_plugin_timeout"
	ParamIOTimeout       = "mca_base_component_plugin_io_timeout"
)

// DefaultTimeout bounds every call to a plugin unless ParamTimeout says
// otherwise.
const DefaultTimeout = 10 * time.Second

// RegisterParams registers the bridge's parameters. Every process that calls
// Load must register them before resolving its values.
func RegisterParams(p *mca.Params) {
	p.Register("mca",
		mca.ParamSpec{Name: ParamChecksums, Type: mca.List, Level: mca.LevelTuner,
			Help: "Pinned plugin checksums, entries <file name>=sha256:<hex>; a listed plugin whose file does not match is refused"},
		mca.ParamSpec{Name: ParamRequireChecksum, Type: mca.Bool, Default: "0", Level: mca.LevelTuner,
			Help: "Refuse every plugin whose checksum is not pinned in " + ParamChecksums},
		mca.ParamSpec{Name: ParamTimeout, Type: mca.Duration, Default: DefaultTimeout.String(), Level: mca.LevelTuner,
			Help: "Deadline of a plugin's start and of its control calls (describe, query), so a hung plugin fails the call instead of hanging the job; 0 means no deadline"},
		mca.ParamSpec{Name: ParamIOTimeout, Type: mca.Duration, Default: "0", Level: mca.LevelTuner,
			Help: "Deadline of a plugin's calls that may rightly take long (filem put, get, remove; crs checkpoint, restart; sstore sync, fetch, remove; snapc checkpoints and a node's requests; errmgr handle; plm launch); 0 means only the caller's own deadline (a plugin that dies still fails the call at once)"},
	)
}

// Config says where plugins are and how they are trusted. Load builds it
// from the parameter sources; LoadConfig takes it as is.
type Config struct {
	// Dirs are searched in order for gompi-plugin-* executables.
	Dirs []string
	// Checksums pins the SHA-256 of plugin files by base name.
	Checksums map[string][]byte
	// RequireChecksum refuses plugins not in Checksums.
	RequireChecksum bool
	// Timeout bounds the start and the control calls; 0 means none.
	Timeout time.Duration
	// IOTimeout bounds data-moving calls; 0 means none.
	IOTimeout time.Duration
	// ShowLoadErrors logs each refused plugin as a warning.
	ShowLoadErrors bool
}

// ConfigFrom reads the bridge's parameters through get, which returns a raw
// value and whether it was set (Sources.Peek before resolution, or a lookup
// in settings a process was handed). Unset parameters take their defaults.
func ConfigFrom(get func(name string) (mca.Setting, bool)) (Config, error) {
	c := Config{Timeout: DefaultTimeout, ShowLoadErrors: true}
	if s, ok := get(ParamPath); ok && strings.TrimSpace(s.Value) != "" {
		for _, d := range strings.Split(s.Value, ":") {
			if d = strings.TrimSpace(d); d != "" {
				c.Dirs = append(c.Dirs, d)
			}
		}
	} else {
		c.Dirs = DefaultDirs()
	}
	var err error
	if s, ok := get(ParamChecksums); ok {
		if c.Checksums, err = ParseChecksums(s.Value); err != nil {
			return c, fmt.Errorf("plugin: %s (from %s): %w", ParamChecksums, s.Origin, err)
		}
	}
	if s, ok := get(ParamRequireChecksum); ok {
		if c.RequireChecksum, err = mca.ParseBool(s.Value); err != nil {
			return c, fmt.Errorf("plugin: %s (from %s): %w", ParamRequireChecksum, s.Origin, err)
		}
	}
	if s, ok := get(ParamTimeout); ok {
		if c.Timeout, err = mca.ParseDuration(s.Value); err != nil {
			return c, fmt.Errorf("plugin: %s (from %s): %w", ParamTimeout, s.Origin, err)
		}
	}
	if s, ok := get(ParamIOTimeout); ok {
		if c.IOTimeout, err = mca.ParseDuration(s.Value); err != nil {
			return c, fmt.Errorf("plugin: %s (from %s): %w", ParamIOTimeout, s.Origin, err)
		}
	}
	if s, ok := get(ParamShowLoadErrors); ok {
		if c.ShowLoadErrors, err = mca.ParseBool(s.Value); err != nil {
			return c, fmt.Errorf("plugin: %s (from %s): %w", ParamShowLoadErrors, s.Origin, err)
		}
	}
	return c, nil
}

// SettingsLookup makes a ConfigFrom lookup over settings a process was
// handed (a job's parameters arriving at a daemon or rank); a setting that
// came from a default counts as unset.
func SettingsLookup(settings []mca.Setting) func(name string) (mca.Setting, bool) {
	m := make(map[string]mca.Setting, len(settings))
	for _, s := range settings {
		if s.Origin.Source != mca.SourceDefault {
			m[s.Name] = s
		}
	}
	return func(name string) (mca.Setting, bool) { s, ok := m[name]; return s, ok }
}

// DefaultDirs are searched when mca_base_component_path is empty: the
// user's $HOME/.gompi/plugins and the installation's lib/gompi next to the
// running binary.
func DefaultDirs() []string {
	home, _ := os.UserHomeDir()
	return DefaultDirsFor(home)
}

// DefaultDirsFor is DefaultDirs for a given home directory; an empty home
// leaves the user's folder out (processes that read no user files).
func DefaultDirsFor(home string) []string {
	var out []string
	if home != "" {
		out = append(out, filepath.Join(home, ".gompi", "plugins"))
	}
	if exe, err := os.Executable(); err == nil {
		out = append(out, filepath.Join(filepath.Dir(exe), "..", "lib", "gompi"))
	}
	return out
}

// ParseChecksums parses a checksum list: comma-separated entries
// <file name>=sha256:<64 hex digits>. A file name is a base name; naming a
// file twice is an error.
func ParseChecksums(v string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, e := range mca.SplitList(v) {
		name, sum, ok := strings.Cut(e, "=")
		name, sum = strings.TrimSpace(name), strings.TrimSpace(sum)
		if !ok || name == "" {
			return nil, fmt.Errorf("entry %q: write <file name>=sha256:<hex>", e)
		}
		if name != filepath.Base(name) || name == "." || name == ".." {
			return nil, fmt.Errorf("entry %q: %q must be a file name without directories", e, name)
		}
		algo, hexSum, ok := strings.Cut(sum, ":")
		if !ok || !strings.EqualFold(algo, "sha256") {
			return nil, fmt.Errorf("entry %q: only sha256 sums are supported; write %s=sha256:<hex> (sha256sum prints it)", e, name)
		}
		b, err := hex.DecodeString(hexSum)
		if err != nil || len(b) != 32 {
			return nil, fmt.Errorf("entry %q: %q is not 64 hexadecimal digits", e, hexSum)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s is pinned twice; keep one entry per file", name)
		}
		out[name] = b
	}
	return out, nil
}
