package cr_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gompi/cr"
	"gompi/cr/crtest"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mpi"
)

type inner struct {
	Name   string
	Scores map[string]float64
}

type record struct {
	ID     int
	Tags   []string
	Inner  inner
	Ptr    *int
	Matrix [][]float64
	When   time.Time
	hidden int // not saved: gob keeps exported fields only
}

// values is every kind of value the round trip covers, as saved (set) or
// as a restarted program initializes them before Protect (fresh).
type values struct {
	I      int
	U      uint64
	F      float64
	S      string
	B      bool
	Bytes  []byte
	Floats []float64
	Grid   [][]byte
	M      map[string]int
	Arr    [3]int16
	R      record
	Zero   int
}

func (v *values) all() []any {
	return []any{&v.I, &v.U, &v.F, &v.S, &v.B, &v.Bytes, &v.Floats, &v.Grid, &v.M, &v.Arr, &v.R, &v.Zero}
}

func setValues() values {
	seven := 7
	return values{
		I: -42, U: 1 << 63, F: 3.25, S: "héllo", B: true, Bytes: []byte{0, 1, 2},
		Floats: []float64{1.5, -2}, Grid: [][]byte{{1}, nil, {2, 3}}, // gob restores an empty slice as nil
		M: map[string]int{"a": 1, "b": 0}, Arr: [3]int16{1, -2, 3},
		R: record{ID: 9, Tags: []string{"x"}, Inner: inner{Name: "in", Scores: map[string]float64{"q": 0.5}},
			Ptr: &seven, Matrix: [][]float64{{1, 2}, {3}}, When: time.Date(2026, 11, 21, 3, 0, 0, 0, time.UTC), hidden: 5},
		Zero: 0,
	}
}

// freshValues differ from setValues everywhere, so a value left untouched
// by the restore shows.
func freshValues() values {
	eight := 8
	return values{
		I: 1, U: 2, F: 9, S: "fresh", Bytes: []byte{9, 9, 9, 9}, Floats: []float64{7},
		Grid: [][]byte{{9}}, M: map[string]int{"a": 5, "stale": 1}, Arr: [3]int16{9, 9, 9},
		R:    record{ID: 1, Tags: []string{"y", "z"}, Inner: inner{Scores: map[string]float64{"old": 1}}, Ptr: &eight, hidden: 6},
		Zero: 99,
	}
}

// TestProtectRoundTrip saves values of common types and restores them
// into a program that initialized them otherwise.
func TestProtectRoundTrip(t *testing.T) {
	j := crtest.NewJob(1, t.TempDir(), "protect")
	wait := checkpointAt(j, 1, cr.Options{})
	run(t, j, func(c *cr.Coordinator) error {
		v := setValues()
		for i, p := range v.all() {
			if err := c.Protect(fmt.Sprint("v", i), p); err != nil {
				return err
			}
		}
		return c.SafePoint()
	})
	must(wait())(t)
	nj := must(j.Restart(0))(t)
	var got values
	run(t, nj, func(c *cr.Coordinator) error {
		got = freshValues()
		for i, p := range got.all() {
			if err := c.Protect(fmt.Sprint("v", i), p); err != nil {
				return err
			}
		}
		return c.SafePoint()
	})
	want := setValues()
	want.R.hidden = 0 // unexported: not saved, and zeroed by the restore
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("restored %+v\nwant     %+v", got, want)
	}
}

func TestProtectErrors(t *testing.T) {
	j := crtest.NewJob(1, t.TempDir(), "protect-errors")
	run(t, j, func(c *cr.Coordinator) error {
		var x int
		var np *int
		tests := []struct {
			name string
			ptr  any
			want string
		}{
			{"", &x, "empty name"},
			{"value", x, "want a non-nil pointer"},
			{"nil", np, "want a non-nil pointer"},
			{"chan", new(chan int), "cannot be saved"},
			{"func", new(func()), "cannot be saved"},
			{"unexported", new(struct{ a int }), "cannot be saved"},
			{"x", &x, ""},
			{"x", &x, "already registered"},
		}
		for _, tt := range tests {
			err := c.Protect(tt.name, tt.ptr)
			if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
				return fmt.Errorf("Protect(%q, %T): %v, want %q", tt.name, tt.ptr, err, tt.want)
			}
		}
		return nil
	})
}

// TestRestartChecksRegistrations: a restarted program must register
// what was saved, under the same names, before the restart point.
func TestRestartChecksRegistrations(t *testing.T) {
	j := crtest.NewJob(1, t.TempDir(), "names")
	wait := checkpointAt(j, 2, cr.Options{})
	run(t, j, func(c *cr.Coordinator) error {
		a, b := 1, 2
		c.Protect("a", &a)
		c.Protect("b", &b)
		for range 3 {
			if err := c.SafePoint(); err != nil {
				return err
			}
		}
		return nil
	})
	must(wait())(t)
	tests := []struct {
		name string
		prog rankFunc
		want string
	}{
		{"unknown name", func(c *cr.Coordinator) error {
			var z int
			return c.Protect("zzz", &z)
		}, `holds no value of that name (it holds: a, b)`},
		{"forgotten", func(c *cr.Coordinator) error {
			var a int
			if err := c.Protect("a", &a); err != nil {
				return err
			}
			if !c.IsRestart() {
				return errors.New("IsRestart is false")
			}
			return c.SafePoint()
		}, `saved state ["b"] was not registered again`},
		{"wrong type", func(c *cr.Coordinator) error {
			var s struct{ X string }
			return c.Protect("a", &s)
		}, `decode the saved value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nj := must(j.Restart(0))(t)
			errs, _ := start(nj.Config("tcp"), tt.prog)
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.want) {
				t.Fatalf("errors %v, want one saying %q", errs, tt.want)
			}
		})
	}
}

// TestCallbacks: OnCheckpoint writes files of its own into the snapshot
// (recorded with their checksums), OnContinue runs after each checkpoint,
// OnRestart reads the files back at once on a restart.
func TestCallbacks(t *testing.T) {
	j := crtest.NewJob(2, t.TempDir(), "callbacks")
	wait := checkpointAt(j, 2, cr.Options{})
	var continued atomic.Int32
	run(t, j, func(c *cr.Coordinator) error {
		r := c.Proc().Rank()
		c.OnCheckpoint(func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "mine.dat"), fmt.Appendf(nil, "rank %d's own file", r), 0o644)
		})
		c.OnContinue(func() error { continued.Add(1); return nil })
		if err := c.OnRestart(func(string) error { return errors.New("called on a fresh start") }); err != nil {
			return err
		}
		for range 3 {
			if err := c.SafePoint(); err != nil {
				return err
			}
		}
		return nil
	})
	must(wait())(t)
	if continued.Load() != 2 {
		t.Fatalf("OnContinue ran %d times, want once per rank", continued.Load())
	}
	meta := must(snapshot.ReadLocal(j.Ref().LocalPath(0, 1)))(t)
	var names []string
	for _, f := range meta.Files {
		names = append(names, f.Name)
	}
	if !slices.Equal(names, []string{"mine.dat", cr.AppStateFile, "library.state"}) {
		t.Fatalf("snapshot files %v", names)
	}
	nj := must(j.Restart(0))(t)
	got := make([]string, 2)
	run(t, nj, func(c *cr.Coordinator) error {
		r := c.Proc().Rank()
		if err := c.OnRestart(func(dir string) error {
			b, err := os.ReadFile(filepath.Join(dir, "mine.dat"))
			got[r] = string(b)
			return err
		}); err != nil {
			return err
		}
		info, ok := c.RestartInfo()
		if !ok || info.Seq != 0 || info.Ref != j.Ref() {
			return fmt.Errorf("restart info %+v, %v", info, ok)
		}
		return nil
	})
	if got[0] != "rank 0's own file" || got[1] != "rank 1's own file" {
		t.Fatalf("OnRestart read %q", got)
	}
}

func TestCallbackFilesChecked(t *testing.T) {
	tests := []struct {
		name  string
		write func(dir string) error
		want  string
	}{
		{"reserved name", func(dir string) error { return os.WriteFile(filepath.Join(dir, "library.state"), nil, 0o644) }, "that name is the library's"},
		{"directory", func(dir string) error { return os.Mkdir(filepath.Join(dir, "sub"), 0o755) }, "not a regular file"},
		{"failure", func(string) error { return errors.New("quota exceeded") }, "quota exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := crtest.NewJob(1, t.TempDir(), "files")
			wait := checkpointAt(j, 1, cr.Options{})
			run(t, j, func(c *cr.Coordinator) error {
				c.OnCheckpoint(tt.write)
				return c.SafePoint()
			})
			if _, err := wait(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("checkpoint: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// TestPostedReceiveRefused: a receive still posted at the safe point
// cannot be saved; the checkpoint fails on every rank with the reason, and
// the program runs on.
func TestPostedReceiveRefused(t *testing.T) {
	j := crtest.NewJob(2, t.TempDir(), "posted")
	wait := checkpointAt(j, 2, cr.Options{})
	run(t, j, func(c *cr.Coordinator) error {
		w := c.Proc().World()
		var rq *mpi.Request
		for i := 1; i <= 3; i++ {
			if err := c.SafePoint(); err != nil {
				return err
			}
			if i == 1 && w.Rank() == 1 {
				var err error
				if rq, err = w.Irecv(make([]byte, 4), 0, 99); err != nil {
					return err
				}
			}
		}
		if w.Rank() == 0 {
			return w.Send([]byte("late"), 1, 99)
		}
		_, err := rq.Wait()
		return err
	})
	_, err := wait()
	if err == nil || !strings.Contains(err.Error(), "receives posted") || !strings.Contains(err.Error(), "must have waited for every request") {
		t.Fatalf("checkpoint with a posted receive: %v", err)
	}
}

// TestQuiesce: the channels are drained into the library (a receive
// posted before the quiesce gets its message there, once), nothing is
// saved, and QuiesceEnd lets messages flow again.
func TestQuiesce(t *testing.T) {
	j := crtest.NewJob(3, t.TempDir(), "quiesce")
	run(t, j, func(c *cr.Coordinator) error {
		p := c.Proc()
		w := p.World()
		r := w.Rank()
		ctx := context.Background()
		var rq *mpi.Request
		buf := make([]byte, 8)
		if r == 1 {
			var err error
			if rq, err = w.Irecv(buf, 0, 5); err != nil {
				return err
			}
		}
		if r == 0 {
			if err := w.Send([]byte("posted"), 1, 5); err != nil {
				return err
			}
			if err := w.Send([]byte("unexp"), 2, 6); err != nil {
				return err
			}
		}
		if err := c.QuiesceStart(ctx); err != nil {
			return err
		}
		if err := c.QuiesceStart(ctx); err == nil {
			return errors.New("quiesced twice")
		}
		// Everything sent before the quiesce has arrived.
		if r == 1 {
			if _, done, _ := rq.Test(); !done || string(buf[:6]) != "posted" {
				return fmt.Errorf("the posted receive did not get its message during the quiesce (%q)", buf)
			}
		}
		if r == 2 {
			if _, ok, _ := w.Iprobe(0, 6); !ok {
				return errors.New("the message in flight is not in the library after the quiesce")
			}
		}
		if err := c.QuiesceEnd(ctx); err != nil {
			return err
		}
		if r == 2 {
			b := make([]byte, 8)
			if s, err := w.Recv(b, 0, 6); err != nil || string(b[:s.Count]) != "unexp" {
				return fmt.Errorf("receive after the quiesce: %q, %v", b, err)
			}
			if _, ok, _ := w.Iprobe(mpi.AnySource, mpi.AnyTag); ok {
				return errors.New("a message was delivered twice")
			}
		}
		if err := c.QuiesceEnd(ctx); err == nil {
			return errors.New("QuiesceEnd without a quiesce")
		}
		if _, err := c.QuiesceCheckpoint(ctx, cr.Options{}); err == nil {
			return errors.New("QuiesceCheckpoint without a quiesce")
		}
		return w.Barrier()
	})
}

// TestQuiesceMisuse: sending while quiesced is reported at QuiesceEnd.
func TestQuiesceMisuse(t *testing.T) {
	j := crtest.NewJob(2, t.TempDir(), "misuse")
	errs, _ := start(j.Config("tcp"), func(c *cr.Coordinator) error {
		w := c.Proc().World()
		ctx := context.Background()
		if err := c.QuiesceStart(ctx); err != nil {
			return err
		}
		if w.Rank() == 0 {
			if err := w.Send([]byte("x"), 0, 1); err != nil {
				return err
			}
			if _, err := w.Recv(make([]byte, 1), 0, 1); err != nil {
				return err
			}
		}
		return c.QuiesceEnd(ctx)
	})
	if !anyContains(errs, "messages moved while the job was quiesced (sent [1 0], received [1 0] since the quiesce began with [0 0], [0 0]); a quiesced program must not communicate") {
		t.Fatalf("errors %q", errs)
	}
}

// TestReplayMismatch: a restarted program that creates its communicators
// otherwise than before its checkpoint is told how they differ.
func TestReplayMismatch(t *testing.T) {
	j := crtest.NewJob(2, t.TempDir(), "replay")
	wait := checkpointAt(j, 1, cr.Options{})
	prog := func(splitFirst bool) rankFunc {
		return func(c *cr.Coordinator) error {
			w := c.Proc().World()
			var a, b *mpi.Comm
			var err error
			if splitFirst {
				if b, err = w.Split(0, w.Rank()); err == nil {
					a, err = w.Dup()
				}
			} else if a, err = w.Dup(); err == nil {
				b, err = w.Split(0, w.Rank())
			}
			if err != nil {
				return err
			}
			if err := c.SafePoint(); err != nil {
				return err
			}
			x := []int32{1}
			if err := mpi.Allreduce(a, x, x, mpi.Sum); err != nil {
				return err
			}
			return b.Barrier()
		}
	}
	run(t, j, prog(false))
	must(wait())(t)
	run(t, must(j.Restart(0))(t), prog(false))
	errs, _ := start(must(j.Restart(0))(t).Config("tcp"), prog(true))
	if !anyContains(errs, "communicator call 1 differs from the saved creation log: the program now makes a split of communicator 0 (color 0, key ") ||
		!anyContains(errs, "), the log holds a dup of communicator 0; a restarted program must create and free its communicators in the same order") {
		t.Fatalf("restart creating communicators otherwise: %v", errs)
	}
}

func TestRequested(t *testing.T) {
	j := crtest.NewJob(1, t.TempDir(), "requested")
	ready := make(chan struct{})
	wait := background(func() (cr.Result, error) {
		<-ready
		return j.Checkpoint(context.Background(), cr.Options{})
	})
	run(t, j, func(c *cr.Coordinator) error {
		select {
		case <-c.Requested():
			return errors.New("requested before anyone asked")
		default:
		}
		close(ready)
		<-c.Requested()
		for c.SafePoints() < 1 { // the query asked for the next safe point
			if err := c.SafePoint(); err != nil {
				return err
			}
		}
		select {
		case <-c.Requested():
			return errors.New("still requested after the checkpoint")
		default:
		}
		return nil
	})
	if res := must(wait())(t); res.Seq != 0 {
		t.Fatalf("result %+v", res)
	}
}

func TestNotSupportedAndNoRuntime(t *testing.T) {
	if err := cr.Restart("gompi_global_snapshot_1.ckpt", 0); !errors.Is(err, cr.ErrNotSupported) || !strings.Contains(err.Error(), "gompi-restart") {
		t.Fatalf("Restart: %v", err)
	}
	if err := cr.SafePoint(); err == nil || !strings.Contains(err.Error(), "mpi.Init") {
		t.Fatalf("SafePoint before mpi.Init: %v", err)
	}
	if cr.IsRestart() || cr.Requested() != nil {
		t.Fatal("a restart before mpi.Init")
	}
	// A rank without a job coordinator counts safe points and says why it
	// cannot checkpoint itself.
	cfg := crtest.NewJob(1, t.TempDir(), "alone").Config("tcp")
	cfg.Wrap = nil
	errs, _ := start(cfg, func(c *cr.Coordinator) error {
		if err := c.SafePoint(); err != nil {
			return err
		}
		if _, err := c.Checkpoint(context.Background(), cr.Options{}); !errors.Is(err, cr.ErrNoCoordinator) {
			return fmt.Errorf("checkpoint without a coordinator: %v", err)
		}
		if n := c.SafePoints(); n != 2 {
			return fmt.Errorf("%d safe points, want 2", n)
		}
		return nil
	})
	for _, err := range errs {
		t.Error(err)
	}
}

// TestCorruptAppState: a damaged app.state is refused at restart, naming
// the file.
func TestCorruptAppState(t *testing.T) {
	j := crtest.NewJob(1, t.TempDir(), "app")
	wait := checkpointAt(j, 1, cr.Options{})
	run(t, j, func(c *cr.Coordinator) error {
		x := 5
		c.Protect("x", &x)
		return c.SafePoint()
	})
	must(wait())(t)
	nj := must(j.Restart(0))(t)
	path := filepath.Join(j.Ref().LocalPath(0, 0), cr.AppStateFile)
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	errs, _ := start(nj.Config("tcp"), func(c *cr.Coordinator) error { return nil })
	if len(errs) != 1 || !errors.Is(errs[0], snapshot.ErrCorrupt) || !strings.Contains(errs[0].Error(), path) {
		t.Fatalf("restart from a damaged app.state: %v", errs)
	}
}

// anyContains reports whether one of the errors says want (when a rank
// fails, the harness stops the others, whose errors come along).
func anyContains(errs []error, want string) bool {
	for _, err := range errs {
		if strings.Contains(err.Error(), want) {
			return true
		}
	}
	return false
}
