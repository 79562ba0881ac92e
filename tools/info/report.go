// Package info is gompi-info: what a gompi process would see of its
// frameworks, components and MCA parameters, with every value's origin and
// which components selection would use. cmd/gompi-info and `gompi info`
// are thin over NewCommand.
package info

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"gompi/boot"
	"gompi/mca"
)

// Query says what to collect.
type Query struct {
	// Framework is "" (frameworks and components only), a framework name,
	// "all" (every framework and the base parameters) or "mca" (the base
	// parameters only).
	Framework string
	// Component narrows Framework to one component; "" or "all" keeps all.
	Component string
	// All collects every framework, component and parameter (--all).
	All bool
	// Level hides parameters above it (1-9).
	Level mca.Level
	// Role is the process kind selection is probed for.
	Role mca.Role
}

// baseGroup is the name under which the component system's own parameters
// (mca_base_*, ft_cr_enabled, ...) are listed.
const baseGroup = "mca"

// Report is what gompi-info shows; --json prints it as is.
type Report struct {
	Version    string      `json:"version"`
	AMCASets   []string    `json:"amca_sets"`
	Role       string      `json:"role"`
	Level      int         `json:"level"`
	Frameworks []Framework `json:"frameworks"`
	// Params are the base parameters (not of any framework), with --all,
	// --param all and --param mca.
	Params []Param `json:"params,omitempty"`
	// Interval is the suggested checkpoint interval, once errmgr_base_mtbf
	// is set.
	Interval *Interval `json:"checkpoint_interval,omitempty"`
	// Protection says where a staged job keeps its snapshots and what
	// losing nodes costs it (protection.go).
	Protection string `json:"snapshot_protection,omitempty"`
}

// Framework is one framework and what selection would make of it.
type Framework struct {
	Name        string      `json:"name"`
	Description string      `json:"description"`
	Selection   Selection   `json:"selection"`
	Components  []Component `json:"components"`
	// Params are the framework-level parameters (<framework>,
	// <framework>_base_*), when parameters were asked for.
	Params []Param `json:"params,omitempty"`
	// Wiring is how the probed role selects and provisions the framework
	// (boot.Roles); nil for a tool.
	Wiring *Wiring `json:"wiring,omitempty"`
}

// Wiring is one framework's row of boot.Roles for the probed role.
type Wiring struct {
	Selected bool   `json:"selected"` // the role selects the framework at all
	Select   string `json:"select,omitempty"`
	Host     string `json:"host,omitempty"`
}

// wiring returns how role wires framework, from the table the role's
// assembly follows (boot/assemble.go); nil for a role without one.
func wiring(role mca.Role, framework string) *Wiring {
	row, ok := boot.Roles[role]
	if !ok {
		return nil
	}
	for _, p := range row {
		if p.Framework == framework {
			return &Wiring{Selected: true, Select: p.Select, Host: p.Host}
		}
	}
	return &Wiring{}
}

// Selection is the value of a framework's selector parameter.
type Selection struct {
	Value  string     `json:"value"`
	Origin mca.Origin `json:"origin"`
}

// Component statuses, as selection sees them.
const (
	StatusSelected  = "selected"  // selection would use it
	StatusAvailable = "available" // it answered, but another won
	StatusSkipped   = "skipped"   // it does not apply here (Reason says why)
	StatusFailed    = "failed"    // it tried and failed (Reason says how)
	StatusExcluded  = "excluded"  // the framework's selector leaves it out
)

// Component is one component of a framework.
type Component struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     string `json:"version,omitempty"`
	// Origin is "built-in" or the path of the plugin binary carrying it.
	Origin   string `json:"origin"`
	Priority int    `json:"priority"`
	Status   string `json:"status"`
	Reason   string `json:"reason,omitempty"`
	// Note is what a component that answered found (the version and path
	// of the tool it drives: crs criu's CRIU).
	Note string `json:"note,omitempty"`
	// Params are the component's parameters, when parameters were asked for.
	Params []Param `json:"params,omitempty"`
}

// Param is one parameter with its resolved value.
type Param struct {
	Name    string     `json:"name"`
	Value   string     `json:"value"`
	Default string     `json:"default"`
	Origin  mca.Origin `json:"origin"`
	Type    string     `json:"type"`
	Level   int        `json:"level"`
	Help    string     `json:"help"`
	Choices []string   `json:"choices,omitempty"`
}

// UnknownError is a framework or component name that does not exist; it
// lists the known ones.
type UnknownError struct {
	What  string // "framework" or "<framework> component"
	Name  string
	Known []string
}

func (e *UnknownError) Error() string {
	msg := fmt.Sprintf("unknown %s %q", e.What, e.Name)
	if c := mca.Closest(e.Name, e.Known); c != "" {
		msg += "; did you mean " + c + "?"
	}
	if len(e.Known) == 0 {
		return msg + "; there are none"
	}
	return msg + "; known: " + strings.Join(e.Known, ", ")
}

// Input is what Collect reads: a started component system.
type Input struct {
	Version    string
	Frameworks []mca.FrameworkInfo // in the order to show them
	Params     *mca.Params
	Values     *mca.Values
	AMCASets   []string
}

// FromProcess is the Input of a process started by boot.Load.
func FromProcess(p *boot.Process, version string) Input {
	in := Input{Version: version, Frameworks: p.Frameworks.All(), Params: p.Params, Values: p.Values}
	if p.Sources != nil {
		in.AMCASets = p.Sources.AMCASets()
	}
	return in
}

// Collect probes the frameworks that q asks about and gathers their
// components and parameters. A framework whose selection is invalid (an
// unknown component in its selector) fails the whole collection, naming
// the known components: what gompi-info shows must be what a job would get.
func Collect(ctx context.Context, in Input, q Query) (*Report, error) {
	if q.Level < 1 || q.Level > 9 {
		return nil, fmt.Errorf("info: level %d: want 1 to 9", q.Level)
	}
	comp, err := componentAsked(in.Frameworks, q)
	if err != nil {
		return nil, err
	}
	rep := &Report{Version: in.Version, AMCASets: append([]string{}, in.AMCASets...), Role: q.Role.String(), Level: int(q.Level), Frameworks: []Framework{},
		Interval: suggestInterval(in.Values), Protection: protection(in.Values)}

	byOwner := map[string][]*mca.Param{}
	for _, prm := range in.Params.All() {
		byOwner[prm.Owner] = append(byOwner[prm.Owner], prm)
	}
	claimed := map[string]bool{}

	for _, f := range in.Frameworks {
		name := f.Name()
		claimed[name] = true
		for _, c := range f.Components() {
			claimed[name+"/"+c.Name] = true
		}
		if q.Framework == baseGroup || (q.Framework != "" && q.Framework != "all" && q.Framework != name) {
			continue
		}
		fw, err := collectFramework(ctx, f, in.Values, q, comp, byOwner)
		if err != nil {
			return nil, err
		}
		fw.Wiring = wiring(q.Role, name)
		rep.Frameworks = append(rep.Frameworks, fw)
	}

	if q.All || q.Framework == "all" || q.Framework == baseGroup {
		var rest []*mca.Param
		for owner, ps := range byOwner {
			if !claimed[owner] {
				rest = append(rest, ps...)
			}
		}
		sort.Slice(rest, func(i, j int) bool { return rest[i].Name < rest[j].Name })
		rep.Params = params(rest, in.Values, q.Level)
	}
	return rep, nil
}

// componentAsked checks the framework q names and returns the component
// it names ("" for every one).
func componentAsked(fws []mca.FrameworkInfo, q Query) (string, error) {
	fwNames := make([]string, len(fws))
	for i, f := range fws {
		fwNames[i] = f.Name()
	}
	comp := q.Component
	if comp == "all" {
		comp = ""
	}
	switch q.Framework {
	case "", "all", baseGroup:
	default:
		if !slices.Contains(fwNames, q.Framework) {
			return "", &UnknownError{What: "framework", Name: q.Framework, Known: append(append([]string(nil), fwNames...), "all", baseGroup)}
		}
	}
	if q.Framework == "all" || q.Framework == baseGroup {
		if comp != "" && comp != "base" {
			return "", &UnknownError{What: q.Framework + " component", Name: comp, Known: []string{"all", "base"}}
		}
		comp = ""
	}
	return comp, nil
}

// collectFramework probes one framework and reports its components (only
// comp, unless empty) and, when q asks for parameters, theirs.
func collectFramework(ctx context.Context, f mca.FrameworkInfo, vals *mca.Values, q Query, comp string, byOwner map[string][]*mca.Param) (Framework, error) {
	name := f.Name()
	wantParams := q.All || q.Framework != ""
	if comp != "" {
		var known []string
		for _, c := range f.Components() {
			known = append(known, c.Name)
		}
		if !slices.Contains(known, comp) {
			return Framework{}, &UnknownError{What: name + " component", Name: comp, Known: append(known, "all")}
		}
	}
	probes, err := f.Probe(ctx, vals, q.Role)
	if err != nil {
		return Framework{}, err // the registry's error names the framework, the value, its origin and the known components
	}
	sel := vals.Get(name)
	fw := Framework{Name: name, Description: f.Description(), Selection: Selection{sel.Value, sel.Origin}, Components: []Component{}}
	if wantParams {
		fw.Params = params(byOwner[name], vals, q.Level)
	}
	for _, pr := range probes {
		if comp != "" && pr.Info.Name != comp {
			continue
		}
		c := probed(name, sel.Value, pr)
		if wantParams {
			c.Params = params(byOwner[name+"/"+c.Name], vals, q.Level)
		}
		fw.Components = append(fw.Components, c)
	}
	return fw, nil
}

// probed is one component of a framework as selection saw it.
func probed(framework, selector string, pr mca.Probe) Component {
	c := Component{Name: pr.Info.Name, Description: pr.Info.Description, Version: pr.Info.Version,
		Origin: pr.Info.Origin, Priority: pr.Priority, Note: pr.Note}
	switch {
	case pr.Selected:
		c.Status = StatusSelected
	case pr.Excluded:
		c.Status = StatusExcluded
		c.Reason = excludedBy(framework, selector)
	case pr.Failed != "":
		c.Status, c.Reason = StatusFailed, pr.Failed
	case pr.Skipped != "":
		// the reason wraps mca.ErrSkip, whose text only repeats the status
		c.Status, c.Reason = StatusSkipped, strings.TrimSuffix(pr.Skipped, ": "+mca.ErrSkip.Error())
	default:
		c.Status = StatusAvailable
	}
	return c
}

func excludedBy(framework, selector string) string {
	if strings.HasPrefix(strings.TrimSpace(selector), "^") {
		return fmt.Sprintf("%s = %q excludes it", framework, selector)
	}
	return fmt.Sprintf("%s = %q does not list it", framework, selector)
}

// params converts registered parameters at or below level, sorted by name.
func params(ps []*mca.Param, vals *mca.Values, level mca.Level) []Param {
	out := []Param{}
	for _, q := range ps {
		if q.Level > level || !vals.Has(q.Name) {
			continue
		}
		s := vals.Get(q.Name)
		out = append(out, Param{Name: q.Name, Value: s.Value, Default: q.Default, Origin: s.Origin,
			Type: q.Type.String(), Level: int(q.Level), Help: q.Help, Choices: q.Choices})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
