// Package inc is the Interlayer Notification Callback framework: the one
// ordered stack of callbacks every process runs around a checkpoint, so
// each layer (the application, mpi, the runtime, the base) quiesces before
// the process is saved and comes back, in reverse order, after.
//
// Order on the way down (Prepare): application PRE_CRS_PRE_MPI, then mpi,
// runtime, base with state CHECKPOINT, then application PRE_CRS_POST_MPI.
// On the way up (Recover, with CONTINUE, RESTART or ERROR): application
// POST_CRS_PRE_MPI, then base, runtime, mpi, then application
// POST_CRS_POST_MPI. Component: default.
package inc

import (
	"context"
	"errors"
	"fmt"

	"gompi/frameworks/crs"
)

// Name of the framework, and of its selection parameter.
const Name = "inc"

// Event is the point of the stack an application callback is called at.
type Event int

const (
	PreCRSPreMPI   Event = iota // before the library quiesces; MPI still usable
	PreCRSPostMPI               // library quiesced, just before the CRS saves
	PostCRSPreMPI               // saved or restarted, library not yet back
	PostCRSPostMPI              // library back
)

var eventNames = [...]string{"PRE_CRS_PRE_MPI", "PRE_CRS_POST_MPI", "POST_CRS_PRE_MPI", "POST_CRS_POST_MPI"}

func (e Event) String() string {
	if int(e) >= 0 && int(e) < len(eventNames) {
		return eventNames[e]
	}
	return fmt.Sprintf("Event(%d)", int(e))
}

// AppState tells an application callback why it is called.
type AppState int

const (
	Prepare  AppState = iota // a checkpoint is about to happen
	Continue                 // the checkpoint was taken; running on
	Restart                  // this process was restarted from a snapshot
	Error                    // the checkpoint failed; running on unsaved
)

var appStateNames = [...]string{"PREPARE", "CONTINUE", "RESTART", "ERROR"}

func (s AppState) String() string {
	if int(s) >= 0 && int(s) < len(appStateNames) {
		return appStateNames[s]
	}
	return fmt.Sprintf("AppState(%d)", int(s))
}

// Layer is a library layer of the stack; mpi is nearest the application.
type Layer int

const (
	LayerMPI Layer = iota
	LayerRuntime
	LayerBase
)

var layerNames = [...]string{"mpi", "runtime", "base"}

func (l Layer) String() string {
	if int(l) >= 0 && int(l) < len(layerNames) {
		return layerNames[l]
	}
	return fmt.Sprintf("Layer(%d)", int(l))
}

// AppCallback is an application callback.
type AppCallback func(ctx context.Context, ev Event, st AppState) error

// FTEvent is a layer's ft_event: state is crs.StateCheckpoint on the way
// down, crs.StateContinue, StateRestart, StateTerm or StateError on the way up.
type FTEvent func(ctx context.Context, state crs.State) error

// Module is the selected stack.
type Module interface {
	// RegisterApp adds an application callback; callbacks run in
	// registration order. The returned func removes it.
	RegisterApp(name string, cb AppCallback) (remove func())
	// RegisterLayer adds a layer's ft_event.
	RegisterLayer(l Layer, name string, cb FTEvent) (remove func())
	// Prepare runs the stack down before the CRS saves the process. If a
	// callback fails, those already prepared are recovered with ERROR and the
	// error (wrapping ErrCallback) is returned: the process runs on unsaved.
	Prepare(ctx context.Context) error
	// Recover runs the stack up after the CRS with state Continue, Restart,
	// Term or Error.
	Recover(ctx context.Context, state crs.State) error
}

// ErrCallback is wrapped by errors from a callback, which name it.
var ErrCallback = errors.New("callback failed")
