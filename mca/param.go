package mca

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Type is the type of a parameter's value. Values are kept as text (as in
// Open MPI's files and environment) and checked against their type when
// resolved, so a wrong value is rejected before anything starts.
type Type int

const (
	String   Type = iota // any text, kept verbatim
	Int                  // decimal integer
	Bool                 // 1/0, true/false, yes/no, on/off, enabled/disabled
	Duration             // a Go duration ("1m30s") or plain seconds ("90", "0.5")
	Size                 // bytes, with an optional unit: 512, 64k, 256MiB, 1G
	List                 // comma-separated words
)

var typeNames = map[Type]string{String: "string", Int: "int", Bool: "bool", Duration: "duration", Size: "size", List: "list"}

func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Level says who a parameter is for, on Open MPI's nine-step scale: 1–3
// end users, 4–6 application tuners, 7–9 gompi developers.
type Level int

const (
	LevelUser  Level = 1
	LevelTuner Level = 4
	LevelDev   Level = 7
)

// ParamSpec declares one parameter.
type ParamSpec struct {
	Name    string // full name: framework_component_param, or a framework selector
	Type    Type
	Default string // as it would be written in a parameter file
	Help    string
	Level   Level    // 0 means LevelUser
	Choices []string // when set, the value must be one of these (String only)
}

// Param is a registered parameter.
type Param struct {
	ParamSpec
	// Owner names who registered it: "mca", a framework, or framework/component.
	Owner string
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Params is the table of registered parameters of one process.
type Params struct {
	mu     sync.RWMutex
	params map[string]*Param
}

// NewParams returns a table holding the mca base parameters.
func NewParams() *Params {
	p := &Params{params: map[string]*Param{}}
	registerBaseParams(p)
	return p
}

// Register adds parameters. A malformed spec or a name registered twice is a
// programming error and panics, like database/sql.Register.
func (p *Params) Register(owner string, specs ...ParamSpec) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range specs {
		if !nameRE.MatchString(s.Name) {
			panic(fmt.Sprintf("mca: parameter name %q: want lower-case letters, digits and '_'", s.Name))
		}
		if _, dup := p.params[s.Name]; dup {
			panic(fmt.Sprintf("mca: parameter %q registered twice (by %s and %s)", s.Name, p.params[s.Name].Owner, owner))
		}
		if s.Level == 0 {
			s.Level = LevelUser
		}
		if err := s.check(s.Default); err != nil {
			panic(fmt.Sprintf("mca: parameter %q: bad default: %v", s.Name, err))
		}
		p.params[s.Name] = &Param{ParamSpec: s, Owner: owner}
	}
}

// Lookup returns a registered parameter.
func (p *Params) Lookup(name string) (*Param, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	q, ok := p.params[name]
	return q, ok
}

// All returns every registered parameter sorted by name.
func (p *Params) All() []*Param {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]*Param, 0, len(p.params))
	for _, q := range p.params {
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (p *Params) names() []string {
	all := p.All()
	out := make([]string, len(all))
	for i, q := range all {
		out[i] = q.Name
	}
	return out
}

// check reports whether v is a valid value of the spec's type.
func (s ParamSpec) check(v string) error {
	switch s.Type {
	case Int:
		if _, err := strconv.Atoi(strings.TrimSpace(v)); err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
	case Bool:
		if _, err := ParseBool(v); err != nil {
			return err
		}
	case Duration:
		if _, err := ParseDuration(v); err != nil {
			return err
		}
	case Size:
		if _, err := ParseSize(v); err != nil {
			return err
		}
	case String:
		if len(s.Choices) > 0 && !contains(s.Choices, v) {
			return fmt.Errorf("%q is not one of %s", v, strings.Join(s.Choices, ", "))
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ParseBool accepts the spellings Open MPI users write in parameter files.
// An empty value is false, as `name =` is in Open MPI.
func ParseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "y", "on", "enabled", "t":
		return true, nil
	case "0", "false", "no", "n", "off", "disabled", "f", "":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean (use 1/0, true/false, yes/no)", v)
}

// ParseDuration accepts a Go duration ("1m30s") or a number of seconds
// ("90", "0.5"); empty means zero.
func ParseDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f < 0 || f > float64(1<<62)/float64(time.Second) {
			return 0, fmt.Errorf("%q seconds is out of range", v)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (write 30s, 1m30s or a number of seconds)", v)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", v)
	}
	return d, nil
}

var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}

// ParseSize parses a byte count with an optional binary unit (k, MiB, G…).
func ParseSize(v string) (int64, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	if s == "" {
		return 0, nil
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	unit, ok := sizeUnits[strings.TrimSpace(s[i:])]
	if err != nil || !ok {
		return 0, fmt.Errorf("%q is not a size (write 512, 64k, 256MiB or 1G)", v)
	}
	if n > (1<<62)/unit {
		return 0, fmt.Errorf("%q is too large", v)
	}
	return n * unit, nil
}

// SplitList splits a comma-separated value into trimmed, non-empty words.
func SplitList(v string) []string {
	var out []string
	for _, w := range strings.Split(v, ",") {
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, w)
		}
	}
	return out
}
