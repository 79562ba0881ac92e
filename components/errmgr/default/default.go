// Package errmgrdefault is the default ErrMgr component, the last of the
// stack: a rank or node that failed ends the job, with a report naming
// rank, node and cause. A predicted fault is not a failure, so it only
// notes the prediction and passes.
package errmgrdefault

import (
	"context"

	"gompi/frameworks/errmgr"
	"gompi/mca"
)

// Priority is the component's default priority, the lowest; errmgr.NewStack
// puts the component last whatever its priority.
const Priority = 0

// New returns the default ErrMgr component.
func New() mca.Component[errmgr.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: errmgr.Name, Name: errmgr.DefaultName,
		Description: "Abort the job on a failure, reporting rank, node and cause; always last in the stack",
		Priority:    Priority,
	}, mca.Module[errmgr.Module](module{}))
}

type module struct{}

// Handle aborts on every fault but a predicted one. The report says why
// the job ends and, when components above tried something, what.
func (module) Handle(_ context.Context, f errmgr.Fault, st *errmgr.Status) (errmgr.Decision, error) {
	if f.Kind == errmgr.Predicted {
		st.Actions = append(st.Actions, "default: noted the prediction ("+f.Describe()+"); nothing to do until it fails")
		return errmgr.Pass, nil
	}
	st.Report = errmgr.AbortReport(f, st.Actions)
	st.Actions = append(st.Actions, "default: aborted the job")
	return errmgr.Abort, nil
}

var (
	_ errmgr.Module = module{}
)
