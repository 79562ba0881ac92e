// Package incdefault is the default (and only) INC component: the ordered
// callback stack every process runs around a checkpoint, as the doc comment
// of package frameworks/inc lays it out.
//
// Down (Prepare): application callbacks with PRE_CRS_PRE_MPI, then the mpi,
// runtime and base layers with crs.StateCheckpoint, then application
// callbacks with PRE_CRS_POST_MPI. Up (Recover): application callbacks with
// POST_CRS_PRE_MPI, then base, runtime, mpi, then application callbacks with
// POST_CRS_POST_MPI.
//
// Application callbacks always run in registration order: each is called at
// four events and tells them apart by the event. Layer callbacks run in
// registration order on the way down and in reverse on the way up, so the
// stack is a true stack: what quiesced last (a transport under the
// protocol that drained it) comes back first.
package incdefault

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"gompi/frameworks/crs"
	"gompi/frameworks/inc"
	"gompi/mca"
)

// Priority is the component's default priority.
const Priority = 10

// New returns the default INC component.
func New() mca.Component[inc.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: inc.Name, Name: "default",
		Description: "The ordered callback stack: application first and last, then mpi, runtime, base",
		Priority:    Priority,
	}, query)
}

func query(_ context.Context, q mca.Query) (inc.Module, int, error) {
	return NewStack(q.Logger), q.Priority, nil
}

// Stack is the INC stack. Registration is safe from any goroutine, including
// from inside a callback; each Prepare and each Recover works on a snapshot
// of the registrations taken when it starts, so a callback added or removed
// meanwhile takes effect at the next Prepare or Recover. Prepare and Recover
// themselves are not serialized: the caller (the SnapC app coordinator) runs
// one checkpoint at a time.
type Stack struct {
	log    *slog.Logger
	mu     sync.Mutex
	nextID uint64
	app    []appEntry
	layers [numLayers][]layerEntry
}

const numLayers = int(inc.LayerBase) + 1

type appEntry struct {
	id   uint64
	name string
	cb   inc.AppCallback
}

type layerEntry struct {
	id    uint64
	layer inc.Layer
	name  string
	cb    inc.FTEvent
}

// NewStack returns an empty stack that logs each callback at debug level to
// log (nil discards).
func NewStack(log *slog.Logger) *Stack {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Stack{log: log}
}

// RegisterApp adds an application callback. A nil callback is a programming
// error and panics. The returned func removes it; calling it again does
// nothing.
func (s *Stack) RegisterApp(name string, cb inc.AppCallback) (remove func()) {
	if cb == nil {
		panic(fmt.Sprintf("inc/default: RegisterApp(%q): nil callback", name))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	s.app = append(s.app, appEntry{id: id, name: name, cb: cb})
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.app = slices.DeleteFunc(s.app, func(e appEntry) bool { return e.id == id })
	}
}

// RegisterLayer adds a layer's ft_event. A nil callback or an unknown layer
// is a programming error and panics. The returned func removes it; calling
// it again does nothing.
func (s *Stack) RegisterLayer(l inc.Layer, name string, cb inc.FTEvent) (remove func()) {
	if cb == nil {
		panic(fmt.Sprintf("inc/default: RegisterLayer(%v, %q): nil callback", l, name))
	}
	if l < 0 || int(l) >= numLayers {
		panic(fmt.Sprintf("inc/default: RegisterLayer(%v, %q): unknown layer", l, name))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	s.layers[l] = append(s.layers[l], layerEntry{id: id, layer: l, name: name, cb: cb})
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.layers[l] = slices.DeleteFunc(s.layers[l], func(e layerEntry) bool { return e.id == id })
	}
}

// snapshot returns the application callbacks and the layer callbacks in
// the order of the way down (mpi, runtime, base).
func (s *Stack) snapshot() ([]appEntry, []layerEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	apps := slices.Clone(s.app)
	var down []layerEntry
	for _, l := range s.layers {
		down = append(down, l...)
	}
	return apps, down
}

// Prepare runs the stack down. If a callback fails or ctx ends between two
// callbacks, every callback already prepared is recovered with ERROR, with
// a context that is not cancelled so the rollback completes, and the cause
// is returned joined with any failure of the rollback. A callback that
// fails is not recovered: it answered for itself. An application callback
// counts as prepared once its PRE_CRS_PRE_MPI call succeeded.
func (s *Stack) Prepare(ctx context.Context) error {
	apps, down := s.snapshot()
	for i, a := range apps {
		if err := interrupted(ctx, "prepare", "app", a.name); err != nil {
			return s.rollback(ctx, apps[:i], nil, err)
		}
		if err := s.callApp(ctx, "prepare", a, inc.PreCRSPreMPI, inc.Prepare); err != nil {
			return s.rollback(ctx, apps[:i], nil, err)
		}
	}
	for i, e := range down {
		if err := interrupted(ctx, "prepare", e.layer.String(), e.name); err != nil {
			return s.rollback(ctx, apps, down[:i], err)
		}
		if err := s.callLayer(ctx, "prepare", e, crs.StateCheckpoint); err != nil {
			return s.rollback(ctx, apps, down[:i], err)
		}
	}
	for _, a := range apps {
		if err := interrupted(ctx, "prepare", "app", a.name); err != nil {
			return s.rollback(ctx, apps, down, err)
		}
		if err := s.callApp(ctx, "prepare", a, inc.PreCRSPostMPI, inc.Prepare); err != nil {
			return s.rollback(ctx, apps, down, err)
		}
	}
	return nil
}

// rollback recovers with ERROR the given application callbacks and the
// prepared layer callbacks (given in the order they were prepared).
func (s *Stack) rollback(ctx context.Context, apps []appEntry, prepared []layerEntry, cause error) error {
	s.log.Warn("checkpoint preparation failed; recovering the prepared callbacks with ERROR", "err", cause)
	errs := s.up(context.WithoutCancel(ctx), "recover after failed prepare", apps, prepared, crs.StateError, inc.Error)
	return errors.Join(append([]error{cause}, errs...)...)
}

// Recover runs the stack up with state StateContinue, StateTerm (both seen
// by application callbacks as CONTINUE), StateRestart (RESTART) or
// StateError (ERROR); layers get the state itself. Every callback runs even
// if an earlier one failed, and all failures are returned joined. If ctx
// ends, the callbacks not yet run are skipped and the error says where
// Recover stopped.
func (s *Stack) Recover(ctx context.Context, state crs.State) error {
	var as inc.AppState
	switch state {
	case crs.StateContinue, crs.StateTerm:
		as = inc.Continue
	case crs.StateRestart:
		as = inc.Restart
	case crs.StateError:
		as = inc.Error
	default:
		return fmt.Errorf("inc/default: recover: state %v is not a recovery state; want continue, term, restart or error", state)
	}
	apps, down := s.snapshot()
	return errors.Join(s.up(ctx, "recover ("+state.String()+")", apps, down, state, as)...)
}

// up runs application POST_CRS_PRE_MPI, the layers in reverse of the given
// down order, then application POST_CRS_POST_MPI.
func (s *Stack) up(ctx context.Context, op string, apps []appEntry, down []layerEntry, state crs.State, as inc.AppState) []error {
	var errs []error
	for _, a := range apps {
		if err := interrupted(ctx, op, "app", a.name); err != nil {
			return append(errs, err)
		}
		if err := s.callApp(ctx, op, a, inc.PostCRSPreMPI, as); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(down) - 1; i >= 0; i-- {
		e := down[i]
		if err := interrupted(ctx, op, e.layer.String(), e.name); err != nil {
			return append(errs, err)
		}
		if err := s.callLayer(ctx, op, e, state); err != nil {
			errs = append(errs, err)
		}
	}
	for _, a := range apps {
		if err := interrupted(ctx, op, "app", a.name); err != nil {
			return append(errs, err)
		}
		if err := s.callApp(ctx, op, a, inc.PostCRSPostMPI, as); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func (s *Stack) callApp(ctx context.Context, op string, a appEntry, ev inc.Event, as inc.AppState) error {
	s.log.Debug("inc callback", "op", op, "layer", "app", "name", a.name, "event", ev, "state", as)
	if err := a.cb(ctx, ev, as); err != nil {
		return fmt.Errorf("inc/default: %s: app callback %q at %v (%v): %w: %w", op, a.name, ev, as, inc.ErrCallback, err)
	}
	return nil
}

func (s *Stack) callLayer(ctx context.Context, op string, e layerEntry, state crs.State) error {
	s.log.Debug("inc callback", "op", op, "layer", e.layer, "name", e.name, "state", state)
	if err := e.cb(ctx, state); err != nil {
		return fmt.Errorf("inc/default: %s: %v callback %q at %v: %w: %w", op, e.layer, e.name, state, inc.ErrCallback, err)
	}
	return nil
}

func interrupted(ctx context.Context, op, where, name string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("inc/default: %s: interrupted before %s callback %q: %w", op, where, name, err)
	}
	return nil
}

var (
	_ inc.Module = (*Stack)(nil)
)
