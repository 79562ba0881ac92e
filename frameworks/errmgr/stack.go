package errmgr

import (
	"context"
	"fmt"
	"strings"

	"gompi/mca"
)

// DefaultName is the name of the component that always ends the stack.
const DefaultName = "default"

// Named is one module of the stack with its component's name, which
// prefixes what the stack records about it.
type Named struct {
	Name   string
	Module Module
}

// Stack is the selected ErrMgr components in the order they see a fault.
// It handles one fault at a time: a second fault waits until the stack is
// done with the first (recovery of one fault must not race a policy acting
// on another), so a component must not call Handle from inside its own
// Handle.
type Stack struct {
	mods []Named
	busy chan struct{}
}

// NewStack builds a stack from modules in priority order (what a stacked
// Select returns). A module named "default" is moved to the end whatever
// its priority, since aborting must be the last resort. Without one, the
// stack's own fallback aborts a fault every module passed on, with the
// same kind of report. A nil module is a programming error and panics.
func NewStack(mods []Named) *Stack {
	s := &Stack{busy: make(chan struct{}, 1)}
	var last []Named
	for _, m := range mods {
		if m.Module == nil {
			panic(fmt.Sprintf("errmgr: NewStack: component %q has a nil module", m.Name))
		}
		if m.Name == DefaultName {
			last = append(last, m)
			continue
		}
		s.mods = append(s.mods, m)
	}
	s.mods = append(s.mods, last...)
	return s
}

// Provision provisions every module of the stack that takes a Host (see
// Host) with h, in stack order, and stops at the first error.
func (s *Stack) Provision(ctx context.Context, h Host) error {
	for _, m := range s.mods {
		if _, err := mca.Provision(ctx, m.Module, h); err != nil {
			return fmt.Errorf("errmgr/%s: provision: %w", m.Name, err)
		}
	}
	return nil
}

// FromCandidates builds a stack from a stacked selection.
func FromCandidates(cands []mca.Candidate[Module]) *Stack {
	mods := make([]Named, len(cands))
	for i, c := range cands {
		mods[i] = Named{Name: c.Info.Name, Module: c.Module}
	}
	return NewStack(mods)
}

// Names returns the component names in the order they see a fault.
func (s *Stack) Names() []string {
	out := make([]string, len(s.mods))
	for i, m := range s.mods {
		out[i] = m.Name
	}
	return out
}

// Handle passes the fault down the stack with one Status whose Faults hold
// it. The first module deciding Recovered or Abort ends the walk; a module
// that fails (its decision then ignored) is recorded in Status.Actions as
// "<name>: failed: <error>" and the fault passes on, as it does when a
// module passes (recorded as "<name>: passed" unless the module recorded
// an action itself). An Abort comes with Status.Report set, by the module
// or else by the stack (AbortReport).
//
// When every module passed, the stack aborts with a report of the fault
// and of everything tried, except for a Predicted fault: a prediction is
// not a failure, so the decision is Pass and the job runs on. If ctx ends
// before the stack is done, it aborts: the fault was not dealt with.
func (s *Stack) Handle(ctx context.Context, f Fault) (Decision, Status) {
	st := Status{Faults: []Fault{f}}
	select {
	case s.busy <- struct{}{}:
	case <-ctx.Done():
		st.Actions = append(st.Actions, fmt.Sprintf("errmgr: interrupted while waiting for an earlier fault to be handled: %v", ctx.Err()))
		st.Report = AbortReport(f, st.Actions)
		return Abort, st
	}
	defer func() { <-s.busy }()

	for _, m := range s.mods {
		if err := ctx.Err(); err != nil {
			st.Actions = append(st.Actions, fmt.Sprintf("errmgr: interrupted before %s: %v", m.Name, err))
			st.Report = AbortReport(f, st.Actions)
			return Abort, st
		}
		before := len(st.Actions)
		d, err := m.Module.Handle(ctx, f, &st)
		switch {
		case err != nil:
			st.Actions = append(st.Actions, fmt.Sprintf("%s: failed: %v", m.Name, err))
		case d == Recovered:
			return Recovered, st
		case d == Abort:
			if st.Report == "" {
				st.Report = AbortReport(f, st.Actions)
			}
			return Abort, st
		case d == Pass:
			if len(st.Actions) == before {
				st.Actions = append(st.Actions, m.Name+": passed")
			}
		default:
			st.Actions = append(st.Actions, fmt.Sprintf("%s: failed: unknown decision %v", m.Name, d))
		}
	}
	if f.Kind == Predicted {
		st.Actions = append(st.Actions, "errmgr: no policy acted on the prediction; the job runs on")
		return Pass, st
	}
	st.Report = AbortReport(f, st.Actions)
	return Abort, st
}

// AbortReport is the message a job aborted for f ends with: a line saying
// the job was aborted and why, then, when recovery was attempted, a line
// with what was tried.
func AbortReport(f Fault, tried []string) string {
	r := "gompirun: job aborted: " + f.Describe()
	if len(tried) > 0 {
		r += "\ngompirun: tried before aborting: " + strings.Join(tried, "; ")
	}
	return r
}
