package crsnone

import (
	"errors"
	"strings"
	"testing"

	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/crs/crstest"
	"gompi/mca"
)

func newModule(t *testing.T) crs.Module {
	t.Helper()
	params := mca.NewParams()
	set := frameworks.New(params)
	set.CRS.Register(New())
	vals, err := params.ResolveSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.CRS.SelectOne(t.Context(), vals, mca.RoleApp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Priority != 1 {
		t.Errorf("priority %d, want 1", c.Priority)
	}
	return c.Module
}

func TestConformance(t *testing.T) {
	crstest.Run(t, newModule, crstest.Options{CanCheckpoint: false})
}

func TestAdvice(t *testing.T) {
	m := newModule(t)
	target := crstest.StartTarget(t, []string{"sleep", "1000"})
	_, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: target.Process.Pid, Dir: t.TempDir()})
	for _, want := range []string{"crs=self", "cr.Protect", "-am ft-enable-cr"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not mention %q", err, want)
		}
	}
	for _, pid := range []int{0, -1} {
		_, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: pid, Dir: t.TempDir()})
		if !errors.Is(err, crs.ErrNoProcess) {
			t.Errorf("checkpoint pid %d: %v, want ErrNoProcess", pid, err)
		}
	}
}
