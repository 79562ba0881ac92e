package crsself

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/crs/crstest"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

func newModule(t *testing.T) crs.Module {
	t.Helper()
	params := mca.NewParams()
	set := frameworks.New(params)
	set.CRS.Register(New())
	vals, err := params.ResolveSettings([]mca.Setting{{Name: "ft_cr_enabled", Value: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.CRS.SelectOne(t.Context(), vals, mca.RoleApp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Priority != Priority {
		t.Errorf("priority %d, want %d", c.Priority, Priority)
	}
	return c.Module
}

// The kit checkpoints another process: self refuses it.
func TestConformance(t *testing.T) {
	crstest.Run(t, newModule, crstest.Options{CanCheckpoint: false})
}

func TestQuerySkips(t *testing.T) {
	tests := []struct {
		name     string
		role     mca.Role
		settings []mca.Setting
		why      string
	}{
		{"tool", mca.RoleTool, []mca.Setting{{Name: "ft_cr_enabled", Value: "1"}}, "this is a tool process"},
		{"daemon", mca.RoleDaemon, []mca.Setting{{Name: "ft_cr_enabled", Value: "1"}}, "this is a daemon process"},
		{"c/r off", mca.RoleApp, nil, "ft_cr_enabled = 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := mca.NewParams()
			frameworks.New(params)
			vals, err := params.ResolveSettings(tt.settings)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = New().Query(t.Context(), mca.Query{Values: vals, Role: tt.role})
			if !errors.Is(err, mca.ErrSkip) || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("query: %v, want a skip saying %q", err, tt.why)
			}
		})
	}
}

type provisioner interface {
	mca.Provisioner[crs.Host]
	io.Closer
}

// rankHost is a rank's host whose state source is save.
func rankHost(save func(ctx context.Context, dir string) ([]string, error)) crs.Host {
	return crs.Host{Rank: &crs.RankHost{Save: save}}
}

// writeState is a state source writing one file.
func writeState(ctx context.Context, dir string) ([]string, error) {
	w, err := snapshot.CreateFile(dir, "app.state")
	if err != nil {
		return nil, err
	}
	w.Write([]byte("registered state"))
	rec, err := w.Close()
	if err != nil {
		return nil, err
	}
	return []string{rec.Name}, nil
}

func TestCheckpointOwnProcess(t *testing.T) {
	m := newModule(t)
	a, ok := m.(provisioner)
	if !ok {
		t.Fatal("the module has no Provision and Close methods")
	}
	dir := t.TempDir()
	own := crs.CheckpointRequest{PID: os.Getpid(), Dir: dir}
	if _, err := m.Checkpoint(t.Context(), own); !errors.Is(err, crs.ErrNotCheckpointable) || !strings.Contains(err.Error(), "cr.Protect") {
		t.Fatalf("checkpoint with nothing attached: %v", err)
	}
	if err := a.Provision(t.Context(), crs.Host{}); !errors.Is(err, crs.ErrNotCheckpointable) {
		t.Fatalf("provision outside a rank: %v", err)
	}
	if err := a.Provision(t.Context(), rankHost(writeState)); err != nil {
		t.Fatal(err)
	}
	if err := a.Provision(t.Context(), rankHost(writeState)); err == nil {
		t.Fatal("a second source was attached")
	}
	tests := []struct {
		name  string
		opts  crs.Options
		state crs.State
		err   error
	}{
		{"continue", crs.Options{}, crs.StateContinue, nil},
		{"term", crs.Options{Term: true}, crs.StateTerm, nil},
		{"stop", crs.Options{Stop: true}, 0, crs.ErrNotCheckpointable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := own
			req.Options = tt.opts
			res, err := m.Checkpoint(t.Context(), req)
			if tt.err != nil {
				if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), "--stop") {
					t.Fatalf("checkpoint: %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.State != tt.state || !slices.Equal(res.Files, []string{"app.state"}) {
				t.Fatalf("result %+v", res)
			}
		})
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Checkpoint(t.Context(), own); !errors.Is(err, crs.ErrNotCheckpointable) {
		t.Fatalf("checkpoint after close: %v", err)
	}
	failing := func(context.Context, string) ([]string, error) { return nil, errors.New("disk full") }
	if err := a.Provision(t.Context(), rankHost(failing)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Checkpoint(t.Context(), own); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("checkpoint with a failing source: %v", err)
	}
}

func TestRestartReturnsLaunch(t *testing.T) {
	m := newModule(t)
	launch := crs.Launch{Argv: []string{"./heat", "-steps", "9"}, Env: []string{"A=1"}, Dir: "/work"}
	for _, tt := range []struct {
		crs string
		err error
	}{{"self", nil}, {"criu", crs.ErrNoSnapshot}} {
		dir := t.TempDir()
		if err := snapshot.WriteLocal(dir, &snapshot.LocalMeta{Rank: 0, PID: 1, CRS: tt.crs, Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
		l, err := m.Restart(t.Context(), crs.RestartRequest{Dir: dir, Launch: launch})
		if !errors.Is(err, tt.err) {
			t.Fatalf("restart of a crs=%s snapshot: %v, want %v", tt.crs, err, tt.err)
		}
		if err == nil && !slices.Equal(l.Argv, launch.Argv) || err == nil && l.Dir != launch.Dir {
			t.Fatalf("restart launch %+v, want %+v", l, launch)
		}
	}
	if _, err := m.Restart(t.Context(), crs.RestartRequest{Dir: filepath.Join(t.TempDir(), "gone"), Launch: launch}); !errors.Is(err, crs.ErrNoSnapshot) {
		t.Fatalf("restart from a missing directory: %v", err)
	}
}
