package mca

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrUnknownParam is wrapped by errors about a parameter name nobody registered.
var ErrUnknownParam = errors.New("unknown MCA parameter")

// ErrBadValue is wrapped by errors about a value of the wrong type.
var ErrBadValue = errors.New("bad MCA parameter value")

// Values is the resolved, checked value of every registered parameter, each
// with its origin. It is immutable once resolved.
type Values struct {
	m        map[string]Setting
	params   *Params
	warnings []string
}

// Resolve checks every source against the registered parameters and
// returns their values. Each value has the type its parameter declares, or
// Resolve fails naming the parameter, the value and where it came from. A
// name on the command line or in the environment that no one registered is
// an error suggesting the closest known name; in a file it is a warning (a
// set may name parameters of components this process does not load).
func (p *Params) Resolve(s *Sources) (*Values, error) {
	vals := &Values{m: map[string]Setting{}, params: p}
	var errs []error
	for _, q := range p.All() {
		set := Setting{Name: q.Name, Value: q.Default, Origin: Origin{Source: SourceDefault}}
		if raw, ok := s.Peek(q.Name); ok {
			set = raw
		}
		if err := q.check(set.Value); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s = %q (from %s): %v", ErrBadValue, q.Name, set.Value, set.Origin, err))
			continue
		}
		vals.m[q.Name] = set
	}
	known := p.names()
	for _, l := range s.layers {
		for _, name := range sortedKeys(l.entries) {
			if _, ok := p.Lookup(name); ok {
				continue
			}
			msg := fmt.Sprintf("%s (from %s)", name, l.entries[name].Origin)
			if hint := Closest(name, known); hint != "" {
				msg += "; did you mean " + hint + "?"
			} else {
				msg += "; `gompi-info --all` lists the known parameters"
			}
			if l.source == SourceEnv || l.source == SourceCommandLine {
				errs = append(errs, fmt.Errorf("%w %s", ErrUnknownParam, msg))
			} else {
				vals.warnings = append(vals.warnings, "unknown MCA parameter "+msg)
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("mca: %w", errors.Join(errs...))
	}
	return vals, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Warnings returns what Resolve noticed but did not refuse.
func (v *Values) Warnings() []string { return append([]string(nil), v.warnings...) }

// Get returns the setting of a registered parameter. Asking for a name that
// was never registered is a programming error and panics.
func (v *Values) Get(name string) Setting {
	s, ok := v.m[name]
	if !ok {
		panic("mca: parameter " + name + " is not registered")
	}
	return s
}

// Has reports whether name is a resolved parameter.
func (v *Values) Has(name string) bool { _, ok := v.m[name]; return ok }

// String returns the value as written.
func (v *Values) String(name string) string { return v.Get(name).Value }

// Int returns an Int parameter.
func (v *Values) Int(name string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(v.Get(name).Value))
	return n
}

// Bool returns a Bool parameter.
func (v *Values) Bool(name string) bool {
	b, _ := ParseBool(v.Get(name).Value)
	return b
}

// Duration returns a Duration parameter.
func (v *Values) Duration(name string) time.Duration {
	d, _ := ParseDuration(v.Get(name).Value)
	return d
}

// Size returns a Size parameter in bytes.
func (v *Values) Size(name string) int64 {
	n, _ := ParseSize(v.Get(name).Value)
	return n
}

// List returns a List parameter's words.
func (v *Values) List(name string) []string { return SplitList(v.Get(name).Value) }

// All returns every setting sorted by name.
func (v *Values) All() []Setting {
	out := make([]Setting, 0, len(v.m))
	for _, k := range sortedKeys(v.m) {
		out = append(out, v.m[k])
	}
	return out
}

// Changed returns the settings that did not come from a default: what a job
// carries to its daemons and ranks and stores in its snapshots.
func (v *Values) Changed() []Setting {
	var out []Setting
	for _, s := range v.All() {
		if s.Origin.Source != SourceDefault {
			out = append(out, s)
		}
	}
	return out
}

// Environ renders the changed settings as GOMPI_MCA_ variables for a child
// process, so it resolves to the same values whatever files its node has.
func (v *Values) Environ() []string {
	var out []string
	for _, s := range v.Changed() {
		out = append(out, EnvPrefix+s.Name+"="+s.Value)
	}
	return out
}

// Closest returns the known name nearest to name by edit distance, or ""
// when nothing is near enough to be a plausible typo.
func Closest(name string, known []string) string {
	best, bestD := "", len(name)/3+2
	for _, k := range known {
		if d := editDistance(name, k); d < bestD || (d == bestD && best != "" && k < best) {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ResolveSettings rebuilds Values from settings resolved elsewhere (a job's
// parameters arriving at a daemon or rank, a host's values arriving at a
// plugin, a snapshot's stored parameters). Settings of unregistered names
// are ignored (the receiver may not load every component); registered
// parameters not in the list take their defaults. Each value is checked
// against its type.
func (p *Params) ResolveSettings(settings []Setting) (*Values, error) {
	given := make(map[string]Setting, len(settings))
	for _, s := range settings {
		given[s.Name] = s
	}
	vals := &Values{m: map[string]Setting{}, params: p}
	var errs []error
	for _, q := range p.All() {
		set, ok := given[q.Name]
		if !ok {
			set = Setting{Name: q.Name, Value: q.Default, Origin: Origin{Source: SourceDefault}}
		}
		if err := q.check(set.Value); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s = %q (from %s): %v", ErrBadValue, q.Name, set.Value, set.Origin, err))
			continue
		}
		vals.m[q.Name] = set
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("mca: %w", errors.Join(errs...))
	}
	return vals, nil
}
