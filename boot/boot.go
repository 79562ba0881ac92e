// Package boot starts a gompi process's component system: it registers the
// parameters and built-in components, gathers the parameter sources, loads
// plugins, and resolves every value once. Every binary (gompirun, gompid,
// the tools, ranks) starts through Load, so they all see the same
// parameters the same way.
package boot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"gompi/components/builtin"
	"gompi/frameworks"
	"gompi/mca"
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
}

// Process is a started component system.
type Process struct {
	Role       mca.Role
	Params     *mca.Params
	Frameworks *frameworks.Set
	Sources    *mca.Sources // nil when started from Settings
	Values     *mca.Values
	LogHandler slog.Handler
	Log        *slog.Logger
}

// Load registers everything, reads the sources and resolves the values. A
// malformed file, an unknown name on the command line or in the
// environment, or a value of the wrong type fails here, before anything
// starts.
func Load(ctx context.Context, opts Options) (*Process, error) {
	out := opts.LogOutput
	if out == nil {
		out = os.Stderr
	}
	params := mca.NewParams()
	set := frameworks.New(params)
	builtin.Register(set)

	p := &Process{Role: opts.Role, Params: params, Frameworks: set}
	var err error
	if opts.Settings != nil {
		p.Values, err = params.ResolveSettings(opts.Settings)
	} else {
		p.Sources, err = mca.LoadSources(opts.Sources)
		if err != nil {
			return nil, err
		}
		p.Values, err = params.Resolve(p.Sources)
	}
	if err != nil {
		return nil, err
	}
	p.LogHandler = slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})
	p.Log = slog.New(p.LogHandler).With("role", opts.Role.String())
	for _, w := range p.Values.Warnings() {
		p.Log.Warn(w)
	}
	return p, nil
}

// Close releases what Load started.
func (p *Process) Close() error { return nil }

// FrameworkLogger returns the logger of a framework at the level its
// <framework>_base_verbose parameter asks for.
func (p *Process) FrameworkLogger(name string) *slog.Logger {
	key := name + "_base_verbose"
	if !p.Values.Has(key) {
		panic(fmt.Sprintf("boot: no framework %q", name))
	}
	return slog.New(mca.MinLevel(p.LogHandler, mca.VerboseLevel(p.Values.Int(key)))).With("framework", name)
}
