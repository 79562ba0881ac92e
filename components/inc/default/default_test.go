package incdefault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/inc"
	"gompi/frameworks/inc/inctest"
	"gompi/mca"
)

// setup registers application callbacks a and b, mpi m1 and m2, runtime r
// and base x, deliberately not in stack order.
func setup(r *inctest.Recorder) *Stack {
	s := NewStack(nil)
	s.RegisterLayer(inc.LayerBase, "x", r.Layer(inc.LayerBase, "x"))
	s.RegisterApp("a", r.App("a"))
	s.RegisterLayer(inc.LayerMPI, "m1", r.Layer(inc.LayerMPI, "m1"))
	s.RegisterLayer(inc.LayerRuntime, "r", r.Layer(inc.LayerRuntime, "r"))
	s.RegisterApp("b", r.App("b"))
	s.RegisterLayer(inc.LayerMPI, "m2", r.Layer(inc.LayerMPI, "m2"))
	return s
}

var prepareOK = []string{
	"app a PRE_CRS_PRE_MPI PREPARE",
	"app b PRE_CRS_PRE_MPI PREPARE",
	"mpi m1 checkpoint",
	"mpi m2 checkpoint",
	"runtime r checkpoint",
	"base x checkpoint",
	"app a PRE_CRS_POST_MPI PREPARE",
	"app b PRE_CRS_POST_MPI PREPARE",
}

func TestPrepareSuccess(t *testing.T) {
	r := inctest.NewRecorder()
	s := setup(r)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if got := r.Take(); !slices.Equal(got, prepareOK) {
		t.Errorf("calls:\n got %q\nwant %q", got, prepareOK)
	}
}

func TestPrepareFailure(t *testing.T) {
	tests := []struct {
		failAt string
		// wantMsg is how the error names the failed callback.
		wantMsg string
		want    []string
	}{
		{"app a PRE_CRS_PRE_MPI PREPARE", `app callback "a" at PRE_CRS_PRE_MPI`, []string{
			"app a PRE_CRS_PRE_MPI PREPARE",
		}},
		{"app b PRE_CRS_PRE_MPI PREPARE", `app callback "b" at PRE_CRS_PRE_MPI`, []string{
			"app a PRE_CRS_PRE_MPI PREPARE",
			"app b PRE_CRS_PRE_MPI PREPARE",
			"app a POST_CRS_PRE_MPI ERROR",
			"app a POST_CRS_POST_MPI ERROR",
		}},
		{"mpi m1 checkpoint", `mpi callback "m1" at checkpoint`, []string{
			"app a PRE_CRS_PRE_MPI PREPARE",
			"app b PRE_CRS_PRE_MPI PREPARE",
			"mpi m1 checkpoint",
			"app a POST_CRS_PRE_MPI ERROR",
			"app b POST_CRS_PRE_MPI ERROR",
			"app a POST_CRS_POST_MPI ERROR",
			"app b POST_CRS_POST_MPI ERROR",
		}},
		{"mpi m2 checkpoint", `mpi callback "m2" at checkpoint`, []string{
			"app a PRE_CRS_PRE_MPI PREPARE",
			"app b PRE_CRS_PRE_MPI PREPARE",
			"mpi m1 checkpoint",
			"mpi m2 checkpoint",
			"app a POST_CRS_PRE_MPI ERROR",
			"app b POST_CRS_PRE_MPI ERROR",
			"mpi m1 error",
			"app a POST_CRS_POST_MPI ERROR",
			"app b POST_CRS_POST_MPI ERROR",
		}},
		{"runtime r checkpoint", `runtime callback "r" at checkpoint`, []string{
			"app a PRE_CRS_PRE_MPI PREPARE",
			"app b PRE_CRS_PRE_MPI PREPARE",
			"mpi m1 checkpoint",
			"mpi m2 checkpoint",
			"runtime r checkpoint",
			"app a POST_CRS_PRE_MPI ERROR",
			"app b POST_CRS_PRE_MPI ERROR",
			"mpi m2 error",
			"mpi m1 error",
			"app a POST_CRS_POST_MPI ERROR",
			"app b POST_CRS_POST_MPI ERROR",
		}},
		{"base x checkpoint", `base callback "x" at checkpoint`, []string{
			"app a PRE_CRS_PRE_MPI PREPARE",
			"app b PRE_CRS_PRE_MPI PREPARE",
			"mpi m1 checkpoint",
			"mpi m2 checkpoint",
			"runtime r checkpoint",
			"base x checkpoint",
			"app a POST_CRS_PRE_MPI ERROR",
			"app b POST_CRS_PRE_MPI ERROR",
			"runtime r error",
			"mpi m2 error",
			"mpi m1 error",
			"app a POST_CRS_POST_MPI ERROR",
			"app b POST_CRS_POST_MPI ERROR",
		}},
		{"app a PRE_CRS_POST_MPI PREPARE", `app callback "a" at PRE_CRS_POST_MPI`, []string{
			"app a PRE_CRS_PRE_MPI PREPARE",
			"app b PRE_CRS_PRE_MPI PREPARE",
			"mpi m1 checkpoint",
			"mpi m2 checkpoint",
			"runtime r checkpoint",
			"base x checkpoint",
			"app a PRE_CRS_POST_MPI PREPARE",
			"app a POST_CRS_PRE_MPI ERROR",
			"app b POST_CRS_PRE_MPI ERROR",
			"base x error",
			"runtime r error",
			"mpi m2 error",
			"mpi m1 error",
			"app a POST_CRS_POST_MPI ERROR",
			"app b POST_CRS_POST_MPI ERROR",
		}},
		{"app b PRE_CRS_POST_MPI PREPARE", `app callback "b" at PRE_CRS_POST_MPI`, []string{
			"app a PRE_CRS_PRE_MPI PREPARE",
			"app b PRE_CRS_PRE_MPI PREPARE",
			"mpi m1 checkpoint",
			"mpi m2 checkpoint",
			"runtime r checkpoint",
			"base x checkpoint",
			"app a PRE_CRS_POST_MPI PREPARE",
			"app b PRE_CRS_POST_MPI PREPARE",
			"app a POST_CRS_PRE_MPI ERROR",
			"app b POST_CRS_PRE_MPI ERROR",
			"base x error",
			"runtime r error",
			"mpi m2 error",
			"mpi m1 error",
			"app a POST_CRS_POST_MPI ERROR",
			"app b POST_CRS_POST_MPI ERROR",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.failAt, func(t *testing.T) {
			r := inctest.NewRecorder()
			boom := errors.New("boom")
			r.Fail[tt.failAt] = boom
			s := setup(r)
			err := s.Prepare(context.Background())
			if !errors.Is(err, inc.ErrCallback) || !errors.Is(err, boom) {
				t.Fatalf("Prepare error %v: want it to wrap inc.ErrCallback and the callback's error", err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) || !strings.HasPrefix(err.Error(), "inc/default: prepare: ") {
				t.Errorf("Prepare error %q: want prefix %q and %q in it", err, "inc/default: prepare: ", tt.wantMsg)
			}
			if got := r.Take(); !slices.Equal(got, tt.want) {
				t.Errorf("calls:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestPrepareFailureRollbackErrorsJoined(t *testing.T) {
	r := inctest.NewRecorder()
	cause, undo := errors.New("cannot quiesce"), errors.New("cannot resume")
	r.Fail["runtime r checkpoint"] = cause
	r.Fail["mpi m1 error"] = undo
	s := setup(r)
	err := s.Prepare(context.Background())
	if !errors.Is(err, cause) || !errors.Is(err, undo) || !errors.Is(err, inc.ErrCallback) {
		t.Fatalf("Prepare error %v: want both the cause and the rollback failure", err)
	}
	want := `inc/default: recover after failed prepare: mpi callback "m1" at error: callback failed: cannot resume`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("Prepare error %q: want it to contain %q", err, want)
	}
	// The rollback ran to the end despite m1 failing.
	if got := r.Take(); got[len(got)-1] != "app b POST_CRS_POST_MPI ERROR" {
		t.Errorf("rollback stopped early: %q", got)
	}
}

func TestRecover(t *testing.T) {
	tests := []struct {
		state crs.State
		app   string // the AppState application callbacks see
		layer string // the state layers see
	}{
		{crs.StateContinue, "CONTINUE", "continue"},
		{crs.StateTerm, "CONTINUE", "term"},
		{crs.StateRestart, "RESTART", "restart"},
		{crs.StateError, "ERROR", "error"},
	}
	for _, tt := range tests {
		t.Run(tt.state.String(), func(t *testing.T) {
			r := inctest.NewRecorder()
			s := setup(r)
			if err := s.Recover(context.Background(), tt.state); err != nil {
				t.Fatalf("Recover: %v", err)
			}
			want := []string{
				"app a POST_CRS_PRE_MPI " + tt.app,
				"app b POST_CRS_PRE_MPI " + tt.app,
				"base x " + tt.layer,
				"runtime r " + tt.layer,
				"mpi m2 " + tt.layer,
				"mpi m1 " + tt.layer,
				"app a POST_CRS_POST_MPI " + tt.app,
				"app b POST_CRS_POST_MPI " + tt.app,
			}
			if got := r.Take(); !slices.Equal(got, want) {
				t.Errorf("calls:\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestRecoverRunsEveryCallback(t *testing.T) {
	r := inctest.NewRecorder()
	e1, e2 := errors.New("first"), errors.New("second")
	r.Fail["app a POST_CRS_PRE_MPI RESTART"] = e1
	r.Fail["runtime r restart"] = e2
	s := setup(r)
	err := s.Recover(context.Background(), crs.StateRestart)
	if !errors.Is(err, e1) || !errors.Is(err, e2) || !errors.Is(err, inc.ErrCallback) {
		t.Fatalf("Recover error %v: want both failures joined, wrapping inc.ErrCallback", err)
	}
	for _, want := range []string{
		`inc/default: recover (restart): app callback "a" at POST_CRS_PRE_MPI (RESTART): callback failed: first`,
		`inc/default: recover (restart): runtime callback "r" at restart: callback failed: second`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Recover error %q: want it to contain %q", err, want)
		}
	}
	if got := r.Take(); len(got) != 8 {
		t.Errorf("Recover ran %d callbacks, want all 8: %q", len(got), got)
	}
}

func TestRecoverUnknownState(t *testing.T) {
	for _, st := range []crs.State{crs.StateNone, crs.StateCheckpoint, crs.StateRestartPre, crs.StateRunning, crs.State(99)} {
		r := inctest.NewRecorder()
		s := setup(r)
		err := s.Recover(context.Background(), st)
		if err == nil || !strings.Contains(err.Error(), "not a recovery state") {
			t.Errorf("Recover(%v) = %v, want a 'not a recovery state' error", st, err)
		}
		if got := r.Take(); len(got) != 0 {
			t.Errorf("Recover(%v) ran callbacks %q", st, got)
		}
	}
}

func TestEmptyStack(t *testing.T) {
	s := NewStack(nil)
	if err := s.Prepare(context.Background()); err != nil {
		t.Errorf("Prepare on an empty stack: %v", err)
	}
	if err := s.Recover(context.Background(), crs.StateContinue); err != nil {
		t.Errorf("Recover on an empty stack: %v", err)
	}
}

func TestRemove(t *testing.T) {
	r := inctest.NewRecorder()
	s := NewStack(nil)
	removeA := s.RegisterApp("a", r.App("a"))
	s.RegisterApp("b", r.App("b"))
	removeM := s.RegisterLayer(inc.LayerMPI, "m", r.Layer(inc.LayerMPI, "m"))
	s.RegisterLayer(inc.LayerBase, "x", r.Layer(inc.LayerBase, "x"))
	removeA()
	removeM()
	removeA() // a second call does nothing
	removeM()
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"app b PRE_CRS_PRE_MPI PREPARE", "base x checkpoint", "app b PRE_CRS_POST_MPI PREPARE"}
	if got := r.Take(); !slices.Equal(got, want) {
		t.Errorf("calls:\n got %q\nwant %q", got, want)
	}
	// Removing one registration leaves a later one with the same name alone.
	s.RegisterApp("b", r.App("b2"))
	if err := s.Recover(context.Background(), crs.StateContinue); err != nil {
		t.Fatal(err)
	}
	want = []string{
		"app b POST_CRS_PRE_MPI CONTINUE", "app b2 POST_CRS_PRE_MPI CONTINUE", "base x continue",
		"app b POST_CRS_POST_MPI CONTINUE", "app b2 POST_CRS_POST_MPI CONTINUE",
	}
	if got := r.Take(); !slices.Equal(got, want) {
		t.Errorf("calls:\n got %q\nwant %q", got, want)
	}
}

func TestRegisterPanics(t *testing.T) {
	s := NewStack(nil)
	for name, f := range map[string]func(){
		"nil app":       func() { s.RegisterApp("a", nil) },
		"nil layer":     func() { s.RegisterLayer(inc.LayerMPI, "m", nil) },
		"unknown layer": func() { s.RegisterLayer(inc.Layer(7), "m", func(context.Context, crs.State) error { return nil }) },
		"negative layer": func() {
			s.RegisterLayer(inc.Layer(-1), "m", func(context.Context, crs.State) error { return nil })
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		})
	}
}

// A registration made while Prepare runs, from another goroutine, is not
// seen by that Prepare (it would otherwise get PRE_CRS_POST_MPI without
// PRE_CRS_PRE_MPI) but is by the next Recover; a removal likewise.
func TestSnapshotDuringPrepare(t *testing.T) {
	r := inctest.NewRecorder()
	s := setup(r)
	var removeC func()
	r.Hook["mpi m1 checkpoint"] = func() {
		done := make(chan struct{})
		go func() {
			removeC = s.RegisterApp("c", r.App("c"))
			s.RegisterLayer(inc.LayerMPI, "m3", r.Layer(inc.LayerMPI, "m3"))
			close(done)
		}()
		<-done
	}
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.Take(); !slices.Equal(got, prepareOK) {
		t.Errorf("Prepare calls:\n got %q\nwant %q", got, prepareOK)
	}
	r.Hook["runtime r continue"] = func() { removeC() }
	if err := s.Recover(context.Background(), crs.StateContinue); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"app a POST_CRS_PRE_MPI CONTINUE",
		"app b POST_CRS_PRE_MPI CONTINUE",
		"app c POST_CRS_PRE_MPI CONTINUE",
		"base x continue",
		"runtime r continue",
		"mpi m3 continue",
		"mpi m2 continue",
		"mpi m1 continue",
		"app a POST_CRS_POST_MPI CONTINUE",
		"app b POST_CRS_POST_MPI CONTINUE",
		"app c POST_CRS_POST_MPI CONTINUE",
	}
	if got := r.Take(); !slices.Equal(got, want) {
		t.Errorf("Recover calls:\n got %q\nwant %q", got, want)
	}
}

// A callback may register or remove from inside a callback, on its own
// goroutine, without deadlocking.
func TestRegisterFromCallback(t *testing.T) {
	r := inctest.NewRecorder()
	s := NewStack(nil)
	var removeSelf func()
	record := r.App("once")
	removeSelf = s.RegisterApp("once", func(ctx context.Context, ev inc.Event, st inc.AppState) error {
		record(ctx, ev, st)
		if ev == inc.PostCRSPostMPI {
			removeSelf()
			s.RegisterApp("next", r.App("next"))
		}
		return nil
	})
	if err := s.Recover(context.Background(), crs.StateContinue); err != nil {
		t.Fatal(err)
	}
	if err := s.Recover(context.Background(), crs.StateContinue); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"app once POST_CRS_PRE_MPI CONTINUE", "app once POST_CRS_POST_MPI CONTINUE",
		"app next POST_CRS_PRE_MPI CONTINUE", "app next POST_CRS_POST_MPI CONTINUE",
	}
	if got := r.Take(); !slices.Equal(got, want) {
		t.Errorf("calls:\n got %q\nwant %q", got, want)
	}
}

func TestPrepareCancelled(t *testing.T) {
	r := inctest.NewRecorder()
	s := setup(r)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rollbackCtxErr error
	r.Hook["mpi m2 checkpoint"] = cancel
	s.RegisterApp("probe", func(ctx context.Context, ev inc.Event, _ inc.AppState) error {
		if ev == inc.PostCRSPreMPI {
			rollbackCtxErr = ctx.Err()
		}
		return nil
	})
	err := s.Prepare(ctx)
	if !errors.Is(err, context.Canceled) || errors.Is(err, inc.ErrCallback) {
		t.Fatalf("Prepare error %v: want context.Canceled and no callback failure", err)
	}
	if want := `inc/default: prepare: interrupted before runtime callback "r"`; !strings.Contains(err.Error(), want) {
		t.Errorf("Prepare error %q: want %q", err, want)
	}
	if rollbackCtxErr != nil {
		t.Errorf("rollback callbacks saw a cancelled context: %v", rollbackCtxErr)
	}
	want := []string{
		"app a PRE_CRS_PRE_MPI PREPARE",
		"app b PRE_CRS_PRE_MPI PREPARE",
		"mpi m1 checkpoint",
		"mpi m2 checkpoint",
		"app a POST_CRS_PRE_MPI ERROR",
		"app b POST_CRS_PRE_MPI ERROR",
		"mpi m2 error",
		"mpi m1 error",
		"app a POST_CRS_POST_MPI ERROR",
		"app b POST_CRS_POST_MPI ERROR",
	}
	if got := r.Take(); !slices.Equal(got, want) {
		t.Errorf("calls:\n got %q\nwant %q", got, want)
	}
}

func TestRecoverCancelled(t *testing.T) {
	r := inctest.NewRecorder()
	s := setup(r)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.Hook["runtime r continue"] = cancel
	err := s.Recover(ctx, crs.StateContinue)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Recover error %v: want context.Canceled", err)
	}
	if want := `inc/default: recover (continue): interrupted before mpi callback "m2"`; !strings.Contains(err.Error(), want) {
		t.Errorf("Recover error %q: want %q", err, want)
	}
	want := []string{
		"app a POST_CRS_PRE_MPI CONTINUE",
		"app b POST_CRS_PRE_MPI CONTINUE",
		"base x continue",
		"runtime r continue",
	}
	if got := r.Take(); !slices.Equal(got, want) {
		t.Errorf("calls:\n got %q\nwant %q", got, want)
	}
}

// Under -race: registrations and removals from many goroutines while
// checkpoints run; every Prepare sees one consistent set of application
// callbacks at both of its application events.
func TestConcurrentRegistration(t *testing.T) {
	s := NewStack(nil)
	var mu sync.Mutex
	seen := map[inc.Event][]string{}
	cb := func(name string) inc.AppCallback {
		return func(_ context.Context, ev inc.Event, _ inc.AppState) error {
			mu.Lock()
			seen[ev] = append(seen[ev], name)
			mu.Unlock()
			return nil
		}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 300 {
				name := fmt.Sprintf("g%d-%d", g, i)
				rmA := s.RegisterApp(name, cb(name))
				rmL := s.RegisterLayer(inc.Layer(i%numLayers), name, func(context.Context, crs.State) error { return nil })
				if i%2 == 0 {
					rmA()
					rmL()
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true // one more round after the last registration
		default:
		}
		if err := s.Prepare(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		pre, post := seen[inc.PreCRSPreMPI], seen[inc.PreCRSPostMPI]
		clear(seen)
		mu.Unlock()
		if !slices.Equal(pre, post) {
			t.Fatalf("one Prepare saw different callbacks:\n PRE_CRS_PRE_MPI  %q\n PRE_CRS_POST_MPI %q", pre, post)
		}
		if err := s.Recover(context.Background(), crs.StateContinue); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		clear(seen)
		mu.Unlock()
	}
	if got := len(s.snapshotApps()); got != 4*150 {
		t.Errorf("%d application callbacks left registered, want %d", got, 4*150)
	}
}

func (s *Stack) snapshotApps() []appEntry { a, _ := s.snapshot(); return a }

func TestSelect(t *testing.T) {
	params := mca.NewParams()
	set := frameworks.New(params)
	set.INC.Register(New())
	vals, err := params.ResolveSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.INC.SelectOne(context.Background(), vals, mca.RoleApp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Info.Name != "default" || c.Info.Framework != inc.Name || c.Info.Origin != "built-in" || c.Priority != Priority {
		t.Errorf("selected %+v (priority %d), want inc/default built-in at %d", c.Info, c.Priority, Priority)
	}
	if _, ok := c.Module.(*Stack); !ok {
		t.Errorf("module is %T, want *Stack", c.Module)
	}
	// Selecting it by name works too, and the priority parameter is honoured.
	vals, err = params.ResolveSettings([]mca.Setting{{Name: "inc", Value: "default"}, {Name: "inc_default_priority", Value: "3"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err = set.INC.SelectOne(context.Background(), vals, mca.RoleApp, nil)
	if err != nil || c.Priority != 3 {
		t.Errorf("SelectOne with inc=default, priority 3: %+v, %v", c, err)
	}
}

// TestConformance runs the INC kit on stacks selected through the
// component.
func TestConformance(t *testing.T) {
	inctest.Run(t, func(t *testing.T) inc.Module {
		m, _, err := New().Query(t.Context(), mca.Query{Role: mca.RoleApp})
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}
