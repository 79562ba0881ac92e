package snapcnone

import (
	"context"
	"errors"
	"testing"

	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/snapc/snapctest"
	"gompi/mca"
)

func TestCheckpointRefused(t *testing.T) {
	for _, req := range []snapc.Request{{}, {Options: crs.Options{Term: true}}, {Ranks: []int{2, 5}}} {
		res, err := module{}.Checkpoint(context.Background(), req)
		if !errors.Is(err, snapc.ErrDisabled) {
			t.Fatalf("Checkpoint(%+v) = %v, want snapc.ErrDisabled", req, err)
		}
		want := "snapc/none: checkpoint: checkpoint/restart is not enabled for this job; run it with -am ft-enable-cr"
		if err.Error() != want {
			t.Errorf("Checkpoint error %q, want %q", err, want)
		}
		if res != (snapc.Result{}) {
			t.Errorf("Checkpoint returned a result %+v with its error", res)
		}
	}
}

func TestSelect(t *testing.T) {
	params := mca.NewParams()
	set := frameworks.New(params)
	set.SnapC.Register(New())
	vals, err := params.ResolveSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.SnapC.SelectOne(context.Background(), vals, mca.RoleHNP, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Info.Name != "none" || c.Info.Framework != snapc.Name || c.Info.Origin != "built-in" || c.Priority != Priority {
		t.Errorf("selected %+v at priority %d, want snapc/none built-in at %d", c.Info, c.Priority, Priority)
	}
	if _, err := c.Module.Checkpoint(context.Background(), snapc.Request{}); !errors.Is(err, snapc.ErrDisabled) {
		t.Errorf("selected module Checkpoint = %v, want snapc.ErrDisabled", err)
	}
}

// TestConformance runs the SnapC kit: none refuses every request.
func TestConformance(t *testing.T) {
	snapctest.Run(t, func(t *testing.T) snapc.Module {
		m, _, err := New().Query(t.Context(), mca.Query{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}, snapctest.Options{Disabled: true})
}
