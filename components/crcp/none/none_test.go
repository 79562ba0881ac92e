package crcpnone

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gompi/frameworks"
	"gompi/frameworks/crcp"
	"gompi/frameworks/crcp/crcptest"
	"gompi/frameworks/crs"
	"gompi/mca"
)

func TestFTEvent(t *testing.T) {
	m := module{}
	tests := []struct {
		state   crs.State
		refused bool
	}{
		{crs.StateCheckpoint, true},
		{crs.StateContinue, false},
		{crs.StateRestart, false},
		{crs.StateRestartPre, false},
		{crs.StateTerm, false},
		{crs.StateError, false},
	}
	for _, tt := range tests {
		t.Run(tt.state.String(), func(t *testing.T) {
			// Channels is nil: none never touches the channels.
			err := m.FTEvent(context.Background(), tt.state, nil)
			if !tt.refused {
				if err != nil {
					t.Errorf("FTEvent(%v) = %v, want nil", tt.state, err)
				}
				return
			}
			if !errors.Is(err, ErrNoProtocol) {
				t.Fatalf("FTEvent(%v) = %v, want ErrNoProtocol", tt.state, err)
			}
			for _, want := range []string{"crcp/none: checkpoint: ", "crcp=bkmrk", "-am ft-enable-cr"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestSelect(t *testing.T) {
	params := mca.NewParams()
	set := frameworks.New(params)
	set.CRCP.Register(New())
	vals, err := params.ResolveSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.CRCP.SelectOne(context.Background(), vals, mca.RoleApp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Info.Name != "none" || c.Info.Framework != crcp.Name || c.Info.Origin != "built-in" || c.Priority != Priority {
		t.Errorf("selected %+v at priority %d, want crcp/none built-in at %d", c.Info, c.Priority, Priority)
	}
	// The selected module is the real one: it refuses a checkpoint.
	c.Module.Sent(crcp.Envelope{Src: 0, Dst: 1, Seq: 1})
	c.Module.Received(crcp.Envelope{Src: 0, Dst: 1, Seq: 1})
	if err := c.Module.FTEvent(context.Background(), crs.StateCheckpoint, nil); !errors.Is(err, ErrNoProtocol) {
		t.Errorf("selected module FTEvent(checkpoint) = %v, want ErrNoProtocol", err)
	}
	// Excluding it leaves nothing to select.
	vals, err = params.ResolveSettings([]mca.Setting{{Name: "crcp", Value: "^none"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.CRCP.SelectOne(context.Background(), vals, mca.RoleApp, nil); !errors.Is(err, mca.ErrNoComponent) {
		t.Errorf("SelectOne with crcp=^none: %v, want ErrNoComponent", err)
	}
}

// TestConformance runs the CRCP kit: none refuses every checkpoint and
// leaves the channels alone.
func TestConformance(t *testing.T) {
	crcptest.Run(t, func(t *testing.T) crcp.Module {
		m, _, err := New().Query(t.Context(), mca.Query{Role: mca.RoleApp})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}, crcptest.Options{Refuses: ErrNoProtocol})
}
