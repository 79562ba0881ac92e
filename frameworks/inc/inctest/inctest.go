// Package inctest is the conformance kit every INC component must pass: the
// order the framework's doc gives (application, mpi, runtime, base on the
// way down; application, base, runtime, mpi on the way up), the states each
// callback sees, the rollback of a failed Prepare (every callback already
// prepared recovered with ERROR, the failing one and those after it not
// called), Recover running every callback despite failures, removal, and
// registration from inside a callback.
package inctest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"gompi/frameworks/crs"
	"gompi/frameworks/inc"
)

// Run runs the kit; newModule returns an empty stack on each call.
func Run(t *testing.T, newModule func(t *testing.T) inc.Module) {
	t.Helper()
	t.Run("prepare-order", func(t *testing.T) { testPrepareOrder(t, newModule(t)) })
	t.Run("recover-order-and-states", func(t *testing.T) { testRecover(t, newModule) })
	t.Run("layer-fails-rollback", func(t *testing.T) { testLayerFails(t, newModule(t)) })
	t.Run("app-fails-rollback", func(t *testing.T) { testAppFails(t, newModule(t)) })
	t.Run("recover-runs-every-callback", func(t *testing.T) { testRecoverFailures(t, newModule(t)) })
	t.Run("recover-refuses-checkpoint-state", func(t *testing.T) { testRecoverBadState(t, newModule(t)) })
	t.Run("prepare-cancelled", func(t *testing.T) { testCancelled(t, newModule(t)) })
	t.Run("remove", func(t *testing.T) { testRemove(t, newModule(t)) })
	t.Run("register-from-callback", func(t *testing.T) { testRegisterInside(t, newModule(t)) })
}

// Recorder logs every call of the callbacks it makes as "app <name>
// <event> <state>" or "<layer> <name> <state>", fails the calls named in
// Fail, and runs the hook named in Hook (outside its lock) when that call
// happens. The kit and components' own tests use it.
type Recorder struct {
	mu    sync.Mutex
	calls []string
	Fail  map[string]error
	Hook  map[string]func()
}

// NewRecorder returns a Recorder that fails nothing and runs no hook.
func NewRecorder() *Recorder {
	return &Recorder{Fail: map[string]error{}, Hook: map[string]func(){}}
}

func (r *Recorder) record(key string) error {
	r.mu.Lock()
	r.calls = append(r.calls, key)
	err, h := r.Fail[key], r.Hook[key]
	r.mu.Unlock()
	if h != nil {
		h()
	}
	return err
}

// App returns an application callback recorded under name.
func (r *Recorder) App(name string) inc.AppCallback {
	return func(_ context.Context, ev inc.Event, st inc.AppState) error {
		return r.record(fmt.Sprintf("app %s %v %v", name, ev, st))
	}
}

// Layer returns a layer callback of l recorded under name.
func (r *Recorder) Layer(l inc.Layer, name string) inc.FTEvent {
	return func(_ context.Context, st crs.State) error {
		return r.record(fmt.Sprintf("%v %s %v", l, name, st))
	}
}

// Take returns the calls recorded since the last Take.
func (r *Recorder) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	return out
}

// stack registers, out of the framework's order on purpose, two
// application callbacks and one callback per layer.
func stack(m inc.Module) *Recorder {
	r := NewRecorder()
	m.RegisterLayer(inc.LayerBase, "b", r.Layer(inc.LayerBase, "b"))
	m.RegisterApp("a1", r.App("a1"))
	m.RegisterLayer(inc.LayerMPI, "m", r.Layer(inc.LayerMPI, "m"))
	m.RegisterApp("a2", r.App("a2"))
	m.RegisterLayer(inc.LayerRuntime, "r", r.Layer(inc.LayerRuntime, "r"))
	return r
}

func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s called\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

var prepared = []string{
	"app a1 PRE_CRS_PRE_MPI PREPARE", "app a2 PRE_CRS_PRE_MPI PREPARE",
	"mpi m checkpoint", "runtime r checkpoint", "base b checkpoint",
	"app a1 PRE_CRS_POST_MPI PREPARE", "app a2 PRE_CRS_POST_MPI PREPARE",
}

func recovered(layerState, appState string) []string {
	return []string{
		"app a1 POST_CRS_PRE_MPI " + appState, "app a2 POST_CRS_PRE_MPI " + appState,
		"base b " + layerState, "runtime r " + layerState, "mpi m " + layerState,
		"app a1 POST_CRS_POST_MPI " + appState, "app a2 POST_CRS_POST_MPI " + appState,
	}
}

func testPrepareOrder(t *testing.T, m inc.Module) {
	r := stack(m)
	if err := m.Prepare(t.Context()); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	same(t, "prepare", r.Take(), prepared)
}

func testRecover(t *testing.T, newModule func(t *testing.T) inc.Module) {
	for _, tt := range []struct {
		state crs.State
		app   string
	}{
		{crs.StateContinue, "CONTINUE"},
		{crs.StateTerm, "CONTINUE"},
		{crs.StateRestart, "RESTART"},
		{crs.StateError, "ERROR"},
	} {
		m := newModule(t)
		r := stack(m)
		if err := m.Recover(t.Context(), tt.state); err != nil {
			t.Fatalf("recover %v: %v", tt.state, err)
		}
		same(t, "recover "+tt.state.String(), r.Take(), recovered(tt.state.String(), tt.app))
	}
}

func testLayerFails(t *testing.T, m inc.Module) {
	r := stack(m)
	cause := errors.New("runtime cannot quiesce")
	r.Fail["runtime r checkpoint"] = cause
	err := m.Prepare(t.Context())
	if !errors.Is(err, inc.ErrCallback) || !errors.Is(err, cause) {
		t.Errorf("prepare with a failing layer: %v, want an error wrapping inc.ErrCallback and the cause", err)
	}
	// Prepared: both applications (PRE_PRE) and mpi; they come back with
	// ERROR in reverse. runtime answered for itself; base never ran.
	same(t, "a prepare that failed at the runtime layer", r.Take(), []string{
		"app a1 PRE_CRS_PRE_MPI PREPARE", "app a2 PRE_CRS_PRE_MPI PREPARE",
		"mpi m checkpoint", "runtime r checkpoint",
		"app a1 POST_CRS_PRE_MPI ERROR", "app a2 POST_CRS_PRE_MPI ERROR",
		"mpi m error",
		"app a1 POST_CRS_POST_MPI ERROR", "app a2 POST_CRS_POST_MPI ERROR",
	})
}

func testAppFails(t *testing.T, m inc.Module) {
	r := stack(m)
	cause := errors.New("application refuses")
	r.Fail["app a2 PRE_CRS_PRE_MPI PREPARE"] = cause
	err := m.Prepare(t.Context())
	if !errors.Is(err, inc.ErrCallback) || !errors.Is(err, cause) {
		t.Errorf("prepare with a failing application callback: %v, want an error wrapping inc.ErrCallback and the cause", err)
	}
	same(t, "a prepare that failed at the second application callback", r.Take(), []string{
		"app a1 PRE_CRS_PRE_MPI PREPARE", "app a2 PRE_CRS_PRE_MPI PREPARE",
		"app a1 POST_CRS_PRE_MPI ERROR", "app a1 POST_CRS_POST_MPI ERROR",
	})
}

func testRecoverFailures(t *testing.T, m inc.Module) {
	r := stack(m)
	c1, c2 := errors.New("mpi cannot resume"), errors.New("a1 cannot resume")
	r.Fail["mpi m continue"] = c1
	r.Fail["app a1 POST_CRS_POST_MPI CONTINUE"] = c2
	err := m.Recover(t.Context(), crs.StateContinue)
	if !errors.Is(err, inc.ErrCallback) || !errors.Is(err, c1) || !errors.Is(err, c2) {
		t.Errorf("recover with two failing callbacks: %v, want an error wrapping inc.ErrCallback and both causes", err)
	}
	same(t, "recover despite failures", r.Take(), recovered("continue", "CONTINUE"))
}

func testRecoverBadState(t *testing.T, m inc.Module) {
	r := stack(m)
	if err := m.Recover(t.Context(), crs.StateCheckpoint); err == nil {
		t.Error("recover with the checkpoint state succeeded")
	}
	same(t, "recover with the checkpoint state", r.Take(), nil)
}

// testCancelled: a Prepare whose context has ended prepares nothing, so
// nothing needs rolling back.
func testCancelled(t *testing.T, m inc.Module) {
	r := stack(m)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := m.Prepare(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("prepare with a cancelled context: %v, want context.Canceled", err)
	}
	same(t, "prepare with a cancelled context", r.Take(), nil)
}

func testRemove(t *testing.T, m inc.Module) {
	r := stack(m)
	rmApp := m.RegisterApp("gone", r.App("gone"))
	rmLayer := m.RegisterLayer(inc.LayerMPI, "gone", r.Layer(inc.LayerMPI, "gone"))
	rmApp()
	rmLayer()
	rmApp() // a second call does nothing
	if err := m.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	same(t, "prepare after removals", r.Take(), prepared)
}

// testRegisterInside registers and removes from inside callbacks, as a
// library layer setting itself up at a checkpoint may; neither call may
// deadlock, and the new callback runs at the next Prepare.
func testRegisterInside(t *testing.T, m inc.Module) {
	r := NewRecorder()
	var remove func()
	m.RegisterApp("a", func(ctx context.Context, ev inc.Event, st inc.AppState) error {
		if ev == inc.PreCRSPreMPI && remove == nil {
			remove = m.RegisterLayer(inc.LayerBase, "late", r.Layer(inc.LayerBase, "late"))
		}
		return r.App("a")(ctx, ev, st)
	})
	if err := m.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := m.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := r.Take()
	if !slices.Contains(got, "base late checkpoint") {
		t.Errorf("a layer registered from a callback never ran at the next prepare: %q", got)
	}
	remove()
}
