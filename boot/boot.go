// Package boot starts a gompi process's component system: it registers the
// parameters and built-in components, gathers the parameter sources, loads
// plugins, and resolves every value once. Every binary (gompirun, gompid,
// the tools, ranks) starts through Load, so they all see the same
// parameters the same way.
package boot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"

	"gompi/components/builtin"
	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/mca"
	"gompi/mca/plugin"
)

// Options says how to start.
type Options struct {
	Role mca.Role
	// Sources says where parameters come from (command line pairs, AMCA
	// sets, files); zero fields take the usual places.
	Sources mca.SourceOptions
	// Settings, when non-nil, are values resolved by another process (a
	// job's parameters arriving at a daemon or rank): files and the
	// environment are not read again.
	Settings []mca.Setting
	// LogOutput receives log records (default os.Stderr).
	LogOutput io.Writer
	// LogAttrs are carried by every record of the process, beside its
	// role: a rank's rank and node, a daemon's node.
	LogAttrs []slog.Attr
	// NoPlugins skips out-of-process components (ranks of a job whose
	// parameters say none are wanted start faster).
	NoPlugins bool
}

// rankNeedsPlugins: of the frameworks a rank selects (boot.AssembleApp)
// only crs can come from a plugin, so a rank of a job whose CRS gompirun
// chose among the built-in ones (its settings name it) loads none: each
// rank would otherwise start every installed plugin's process at boot
// (gompi-plugin-criu's, to be told it is not named). Every other process,
// and a rank whose CRS is a plugin's or not named, loads them.
func rankNeedsPlugins(opts Options, set *frameworks.Set) bool {
	if opts.Role != mca.RoleApp || opts.Settings == nil {
		return true
	}
	i := slices.IndexFunc(opts.Settings, func(s mca.Setting) bool { return s.Name == crs.Name })
	if i < 0 {
		return true
	}
	name := opts.Settings[i].Value
	return !slices.ContainsFunc(set.CRS.Components(), func(c mca.ComponentInfo) bool { return c.Name == name })
}

// Process is a started component system.
type Process struct {
	Role       mca.Role
	Params     *mca.Params
	Frameworks *frameworks.Set
	Sources    *mca.Sources // nil when started from Settings
	Values     *mca.Values
	Plugins    *plugin.Host // nil with NoPlugins
	// LogHandler is the process's handler (NewLogHandler, carrying its
	// role and Options.LogAttrs); it passes every level, each logger
	// filters its own (FrameworkLogger).
	LogHandler slog.Handler
	Log        *slog.Logger
}

// NewLogHandler returns the one log format of every gompi process:
// slog's text, key=value, beginning time=, level= and msg=, with attrs on
// every record. gompirun's, its daemons', their ranks' and the tools'
// records meet in one stream, where each line then says who wrote it.
// Every level passes; loggers built on it filter (mca.MinLevel).
func NewLogHandler(w io.Writer, attrs ...slog.Attr) slog.Handler {
	h := slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})
	if len(attrs) == 0 {
		return h
	}
	return h.WithAttrs(attrs)
}

// Load registers everything, loads plugins, reads the sources and resolves
// the values. A malformed file, an unknown name on the command line or in
// the environment, or a value of the wrong type fails here, before anything
// starts. A plugin that cannot be loaded is reported and left out, never
// fatal (Plugins.Errors lists them).
func Load(ctx context.Context, opts Options) (p *Process, err error) {
	out := opts.LogOutput
	if out == nil {
		out = os.Stderr
	}
	params := mca.NewParams()
	plugin.RegisterParams(params)
	set := frameworks.New(params)
	builtin.Register(set)

	p = &Process{Role: opts.Role, Params: params, Frameworks: set}
	started := p // the error returns below nil p; what started must still stop
	p.LogHandler = NewLogHandler(out, append([]slog.Attr{slog.String("role", opts.Role.String())}, opts.LogAttrs...)...)
	// Plugins log before values are resolved; until then only warnings pass.
	p.Log = slog.New(mca.MinLevel(p.LogHandler, slog.LevelWarn))
	defer func() {
		if err != nil {
			started.Close()
		}
	}()

	var cfg plugin.Config
	if opts.Settings != nil {
		cfg, err = plugin.ConfigFrom(plugin.SettingsLookup(opts.Settings))
	} else {
		if p.Sources, err = mca.LoadSources(opts.Sources); err != nil {
			return nil, err
		}
		cfg, err = plugin.ConfigFrom(p.Sources.Peek)
		if _, set := p.Sources.Peek(plugin.ParamPath); !set && err == nil {
			// The user's plugin folder follows the home the sources were read from.
			home := opts.Sources.Home
			if home == "" && !opts.Sources.NoUserFiles {
				home, _ = os.UserHomeDir()
			}
			if opts.Sources.NoUserFiles {
				home = ""
			}
			cfg.Dirs = plugin.DefaultDirsFor(home)
		}
	}
	if err != nil {
		return nil, err
	}
	// Plugins come before resolution: their components register parameters.
	if !opts.NoPlugins && !rankNeedsPlugins(opts, set) {
		opts.NoPlugins = true
	}
	if !opts.NoPlugins {
		if p.Plugins, err = plugin.LoadConfig(ctx, set, cfg, p.Log); err != nil {
			return nil, err
		}
	}
	if opts.Settings != nil {
		p.Values, err = params.ResolveSettings(opts.Settings)
	} else {
		p.Values, err = params.Resolve(p.Sources)
	}
	if err != nil {
		return nil, err
	}
	p.Log = slog.New(p.LogHandler)
	for _, w := range p.Values.Warnings() {
		p.Log.Warn(w)
	}
	return p, nil
}

// Close stops what Load started (plugin processes).
func (p *Process) Close() error {
	var errs []error
	if p.Plugins != nil {
		errs = append(errs, p.Plugins.Close())
		p.Plugins = nil
	}
	return errors.Join(errs...)
}

// FrameworkLogger returns the logger of a framework at the level its
// <framework>_base_verbose parameter asks for.
func (p *Process) FrameworkLogger(name string) *slog.Logger {
	key := name + "_base_verbose"
	if !p.Values.Has(key) {
		panic(fmt.Sprintf("boot: no framework %q", name))
	}
	return slog.New(mca.MinLevel(p.LogHandler, mca.VerboseLevel(p.Values.Int(key)))).With("framework", name)
}
