package mca

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
)

// ErrSkip is returned (possibly wrapped, with the reason) by a component's
// Query when it does not apply here: not configured, a tool it needs is
// missing, the wrong role. It is distinct from a failure, which is any other
// error.
var ErrSkip = errors.New("skipped")

// ErrNoComponent is wrapped by selection errors when no component is left.
var ErrNoComponent = errors.New("no component available")

// ErrUnknownComponent is wrapped when a selection names a component that
// does not exist.
var ErrUnknownComponent = errors.New("unknown component")

// Role is the kind of process asking a component to work.
type Role int

const (
	RoleTool   Role = iota // gompi-info, gompi-checkpoint, ...
	RoleHNP                // gompirun, the head node process
	RoleDaemon             // gompid
	RoleApp                // a rank of the user's program
)

var roleNames = [...]string{"tool", "hnp", "daemon", "app"}

func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// ComponentInfo describes a component to users and to selection.
type ComponentInfo struct {
	Framework   string      `json:"framework"`
	Name        string      `json:"name"`
	Description string      `json:"description"`
	Version     string      `json:"version,omitempty"`
	Priority    int         `json:"priority"` // default of <framework>_<name>_priority
	Params      []ParamSpec `json:"-"`        // the component's own parameters (full names)
	// Origin is "built-in" or the path of the plugin binary that carries it.
	Origin string `json:"origin"`
}

// Query is what a component sees when it is asked whether it can work.
type Query struct {
	Values *Values
	Role   Role
	Logger *slog.Logger
	// Priority is the configured <framework>_<component>_priority.
	Priority int
	// Note, when set, takes one line on what a component that answers
	// found (the version and path of the tool it drives), which gompi-info
	// shows beside its status. Call it before returning the module.
	Note func(string)
}

// Component is one implementation of a framework whose modules are of type M.
type Component[M any] interface {
	Info() ComponentInfo
	// Query returns a module and its priority, or an error wrapping ErrSkip
	// when the component does not apply here.
	Query(ctx context.Context, q Query) (M, int, error)
}

// Candidate is a component that answered a query.
type Candidate[M any] struct {
	Info     ComponentInfo
	Module   M
	Priority int
}

// Probe is one component's answer to selection, as gompi-info shows it.
type Probe struct {
	Info     ComponentInfo `json:"component"`
	Priority int           `json:"priority"`
	Note     string        `json:"note,omitempty"`    // what it found, when it answered (Query.Note)
	Skipped  string        `json:"skipped,omitempty"` // why it does not apply
	Failed   string        `json:"failed,omitempty"`  // it tried and failed
	Excluded bool          `json:"excluded,omitempty"`
	Selected bool          `json:"selected"`
}

// FrameworkInfo is the framework-agnostic view of a registry.
type FrameworkInfo interface {
	Name() string
	Description() string
	Components() []ComponentInfo
	// Probe queries every component and marks the ones selection would use
	// (with a stack, several).
	Probe(ctx context.Context, vals *Values, role Role) ([]Probe, error)
}

// Framework is the registry of one framework: its components, its
// parameters (<name> selects components, <name>_base_verbose sets its log
// level) and selection.
type Framework[M any] struct {
	name, desc string
	params     *Params
	stack      bool
	mu         sync.Mutex
	comps      map[string]Component[M]
}

// FrameworkOption changes how a framework selects.
type FrameworkOption func(*frameworkOpts)

type frameworkOpts struct {
	stack bool
	extra []ParamSpec
}

// Stacked makes selection use every available component in priority order
// (the ErrMgr stack) instead of the single best one.
func Stacked() FrameworkOption { return func(o *frameworkOpts) { o.stack = true } }

// WithParams registers framework-wide parameters (<name>_base_...).
func WithParams(specs ...ParamSpec) FrameworkOption {
	return func(o *frameworkOpts) { o.extra = append(o.extra, specs...) }
}

// NewFramework creates a framework registry and registers its parameters.
func NewFramework[M any](params *Params, name, description string, opts ...FrameworkOption) *Framework[M] {
	var o frameworkOpts
	for _, opt := range opts {
		opt(&o)
	}
	f := &Framework[M]{name: name, desc: description, params: params, stack: o.stack, comps: map[string]Component[M]{}}
	how := "the highest-priority available component is used"
	if o.stack {
		how = "every available component is stacked in priority order"
	}
	params.Register(name,
		ParamSpec{Name: name, Type: String, Level: LevelUser,
			Help: fmt.Sprintf("Components of the %s framework to consider: empty = all (%s); a,b = only these; ^a,b = all but these", name, how)},
		ParamSpec{Name: name + "_base_verbose", Type: Int, Default: "0", Level: LevelDev,
			Help: fmt.Sprintf("Verbosity of the %s framework: 0 warnings only, 1-4 info, 5 and above debug", name)},
	)
	if len(o.extra) > 0 {
		params.Register(name, o.extra...)
	}
	return f
}

// Name returns the framework's name.
func (f *Framework[M]) Name() string { return f.name }

// Description returns the framework's one-line description.
func (f *Framework[M]) Description() string { return f.desc }

// Register adds a built-in component. A nil component, a component of
// another framework or a duplicate name is a programming error and panics.
func (f *Framework[M]) Register(c Component[M]) {
	if err := f.Add(c); err != nil {
		panic(err.Error())
	}
}

// Add adds a component found at run time (a plugin); unlike Register it
// reports a bad or duplicate component as an error, since a plugin must not
// bring the process down.
func (f *Framework[M]) Add(c Component[M]) error {
	if c == nil {
		return fmt.Errorf("mca: %s: nil component", f.name)
	}
	info := c.Info()
	if info.Framework != f.name {
		return fmt.Errorf("mca: %s: component %q belongs to framework %q", f.name, info.Name, info.Framework)
	}
	if !nameRE.MatchString(info.Name) {
		return fmt.Errorf("mca: %s: component name %q: want lower-case letters, digits and '_'", f.name, info.Name)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, dup := f.comps[info.Name]; dup {
		return fmt.Errorf("mca: %s: component %q registered twice (%s and %s)", f.name, info.Name, old.Info().Origin, info.Origin)
	}
	for _, p := range info.Params {
		if !strings.HasPrefix(p.Name, f.name+"_"+info.Name+"_") {
			return fmt.Errorf("mca: %s/%s: parameter %q must start with %s_%s_", f.name, info.Name, p.Name, f.name, info.Name)
		}
		if _, taken := f.params.Lookup(p.Name); taken {
			return fmt.Errorf("mca: %s/%s: parameter %q is already registered", f.name, info.Name, p.Name)
		}
	}
	prio := f.priorityParam(info.Name)
	if _, taken := f.params.Lookup(prio); taken {
		return fmt.Errorf("mca: %s/%s: parameter %q is already registered", f.name, info.Name, prio)
	}
	f.params.Register(f.name+"/"+info.Name, append([]ParamSpec{{Name: prio, Type: Int, Default: fmt.Sprint(info.Priority), Level: LevelTuner,
		Help: fmt.Sprintf("Priority of the %s %s component (higher wins)", info.Name, f.name)}}, info.Params...)...)
	f.comps[info.Name] = c
	return nil
}

func (f *Framework[M]) priorityParam(comp string) string { return f.name + "_" + comp + "_priority" }

// Names returns the registered component names, sorted.
func (f *Framework[M]) Names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sortedKeys(f.comps)
}

// Components returns every component's description, sorted by name.
func (f *Framework[M]) Components() []ComponentInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]ComponentInfo, 0, len(f.comps))
	for _, k := range sortedKeys(f.comps) {
		out = append(out, f.comps[k].Info())
	}
	return out
}

// Logger returns the framework's logger at the level <name>_base_verbose asks for.
func (f *Framework[M]) Logger(base slog.Handler, vals *Values) *slog.Logger {
	return slog.New(MinLevel(base, VerboseLevel(vals.Int(f.name+"_base_verbose")))).With("framework", f.name)
}

// MinLevel wraps a shared handler so that it drops records below min; each
// framework logs through its own minimum over one process-wide handler.
func MinLevel(h slog.Handler, min slog.Level) slog.Handler { return levelHandler{h, min} }

// VerboseLevel maps an Open MPI style verbosity number onto a slog level.
func VerboseLevel(v int) slog.Level {
	switch {
	case v <= 0:
		return slog.LevelWarn
	case v < 5:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}

// levelHandler raises the minimum level of a shared handler for one framework.
type levelHandler struct {
	slog.Handler
	min slog.Level
}

func (h levelHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.min }
func (h levelHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return levelHandler{h.Handler.WithAttrs(a), h.min}
}
func (h levelHandler) WithGroup(g string) slog.Handler {
	return levelHandler{h.Handler.WithGroup(g), h.min}
}

// Selector is a parsed <framework> selection value.
type Selector struct {
	Exclude bool
	Names   []string
}

// ParseSelector parses a selection value: empty = all, "a,b" = only these,
// "^a,b" = all but these. A '^' anywhere but the start is an error, as is an
// empty name inside a list.
func ParseSelector(v string) (Selector, error) {
	v = strings.TrimSpace(v)
	var s Selector
	if v == "" {
		return s, nil
	}
	if strings.HasPrefix(v, "^") {
		s.Exclude = true
		v = strings.TrimLeft(v, "^")
	}
	if strings.Contains(v, "^") {
		return s, fmt.Errorf("'^' may only start the list (^a,b excludes a and b); it cannot exclude some names and include others")
	}
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return s, fmt.Errorf("empty component name in %q", v)
		}
		s.Names = append(s.Names, n)
	}
	return s, nil
}

// Names reports whether the framework's selection value in vals names comp
// in an include list ("a,b"): what a component that applies only when
// asked for checks in its Query. An exclusion, an empty or a malformed
// value names nothing.
func Names(vals *Values, framework, comp string) bool {
	sel, err := ParseSelector(vals.String(framework))
	return err == nil && !sel.Exclude && slices.Contains(sel.Names, comp)
}

// selector reads and checks the framework's selection value; include lists
// must name only known components.
func (f *Framework[M]) selector(vals *Values) (Selector, error) {
	set := vals.Get(f.name)
	sel, err := ParseSelector(set.Value)
	if err != nil {
		return sel, fmt.Errorf("mca: %s = %q (from %s): %w", f.name, set.Value, set.Origin, err)
	}
	if !sel.Exclude {
		known := f.Names()
		for _, n := range sel.Names {
			if !contains(known, n) {
				hint := ""
				if c := Closest(n, known); c != "" {
					hint = fmt.Sprintf("; did you mean %s?", c)
				}
				return sel, fmt.Errorf("mca: %s = %q (from %s): %w %q%s; known %s components: %s",
					f.name, set.Value, set.Origin, ErrUnknownComponent, n, hint, f.name, strings.Join(known, ", "))
			}
		}
	}
	return sel, nil
}

func (s Selector) allows(name string) bool {
	if len(s.Names) == 0 {
		return true
	}
	return contains(s.Names, name) != s.Exclude
}

// Select queries the allowed components and returns those available, best
// first: strictly higher priority wins, ties go to built-ins, then to the
// name. A non-stacked framework returns one candidate.
func (f *Framework[M]) Select(ctx context.Context, vals *Values, role Role, log *slog.Logger) ([]Candidate[M], error) {
	cands, _, err := f.Candidates(ctx, vals, role, log)
	if err != nil {
		return nil, err
	}
	if !f.stack {
		cands = cands[:1]
	}
	return cands, nil
}

// Candidates returns every available module of the framework, best
// first, whether the framework stacks or not, and what each component
// answered (also when none is available): for a caller that chooses among
// them by something the priorities cannot know (gompirun picks the job's
// CRS by the program it runs). The caller closes every module.
func (f *Framework[M]) Candidates(ctx context.Context, vals *Values, role Role, log *slog.Logger) ([]Candidate[M], []Probe, error) {
	cands, probes, err := f.query(ctx, vals, role, log)
	if err != nil {
		return nil, nil, err
	}
	if len(cands) == 0 {
		return nil, probes, fmt.Errorf("mca: %s: %w (selection %q; known: %s)", f.name, ErrNoComponent, vals.String(f.name), strings.Join(f.Names(), ", "))
	}
	return cands, probes, nil
}

// SelectOne returns the best module of a framework.
func (f *Framework[M]) SelectOne(ctx context.Context, vals *Values, role Role, log *slog.Logger) (Candidate[M], error) {
	c, err := f.Select(ctx, vals, role, log)
	if err != nil {
		return Candidate[M]{}, err
	}
	return c[0], nil
}

func (f *Framework[M]) query(ctx context.Context, vals *Values, role Role, log *slog.Logger) ([]Candidate[M], []Probe, error) {
	sel, err := f.selector(vals)
	if err != nil {
		return nil, nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f.mu.Lock()
	comps := make([]Component[M], 0, len(f.comps))
	for _, k := range sortedKeys(f.comps) {
		comps = append(comps, f.comps[k])
	}
	f.mu.Unlock()

	var cands []Candidate[M]
	var probes []Probe
	for _, c := range comps {
		info := c.Info()
		p := Probe{Info: info, Priority: vals.Int(f.priorityParam(info.Name))}
		if !sel.allows(info.Name) {
			p.Excluded = true
			probes = append(probes, p)
			continue
		}
		var note string
		m, prio, err := c.Query(ctx, Query{Values: vals, Role: role, Logger: log.With("component", info.Name), Priority: p.Priority,
			Note: func(s string) { note = s }})
		switch {
		case errors.Is(err, ErrSkip):
			p.Skipped = err.Error()
			log.Debug("component skipped", "component", info.Name, "reason", err)
		case err != nil:
			p.Failed = err.Error()
			if vals.Bool("mca_base_component_show_load_errors") {
				log.Warn("component failed to load", "component", info.Name, "origin", info.Origin, "err", err)
			}
		default:
			p.Priority, p.Note = prio, note
			cands = append(cands, Candidate[M]{Info: info, Module: m, Priority: prio})
		}
		probes = append(probes, p)
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		if (a.Info.Origin == OriginBuiltin) != (b.Info.Origin == OriginBuiltin) {
			return a.Info.Origin == OriginBuiltin
		}
		return a.Info.Name < b.Info.Name
	})
	return cands, probes, nil
}

// Probe implements FrameworkInfo.
func (f *Framework[M]) Probe(ctx context.Context, vals *Values, role Role) ([]Probe, error) {
	cands, probes, err := f.query(ctx, vals, role, nil)
	if err != nil {
		return nil, err
	}
	if !f.stack && len(cands) > 1 {
		cands = cands[:1]
	}
	for _, c := range cands {
		for i := range probes {
			if probes[i].Info.Name == c.Info.Name {
				probes[i].Selected = true
			}
		}
	}
	return probes, nil
}

var _ FrameworkInfo = (*Framework[int])(nil)
