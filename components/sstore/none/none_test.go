package sstorenone

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gompi/frameworks"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/frameworks/sstore/sstoretest"
	"gompi/mca"
)

func TestEveryMethodRefuses(t *testing.T) {
	ref := snapshot.Ref{Dir: t.TempDir(), Name: "gompi_global_snapshot_42.ckpt"}
	ctx := context.Background()
	var m sstore.Module = module{}
	tests := []struct {
		name    string
		call    func() error
		wantMsg string
	}{
		{"LocalDir", func() error {
			dir, err := m.LocalDir(ctx, ref, 0, 3)
			if dir != "" {
				t.Errorf("LocalDir returned a directory %q with its error", dir)
			}
			return err
		}, "sstore/none: local directory for rank 3 of gompi_global_snapshot_42.ckpt seq 0: "},
		{"Sync", func() error {
			return m.Sync(ctx, ref, 1, []sstore.Local{{Rank: 0, Dir: ref.Dir}})
		}, "sstore/none: sync gompi_global_snapshot_42.ckpt seq 1: "},
		{"Fetch", func() error {
			dir, err := m.Fetch(ctx, ref, 2, 1)
			if dir != "" {
				t.Errorf("Fetch returned a directory %q with its error", dir)
			}
			return err
		}, "sstore/none: fetch rank 1 of gompi_global_snapshot_42.ckpt seq 2: "},
		{"Remove", func() error { return m.Remove(ctx, ref, 0) }, "sstore/none: remove gompi_global_snapshot_42.ckpt seq 0: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, sstore.ErrDisabled) {
				t.Fatalf("%s = %v, want sstore.ErrDisabled", tt.name, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, tt.wantMsg) || !strings.Contains(msg, "-am ft-enable-cr") {
				t.Errorf("%s error %q: want prefix %q and the -am ft-enable-cr hint", tt.name, msg, tt.wantMsg)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	params := mca.NewParams()
	set := frameworks.New(params)
	set.SStore.Register(New())
	vals, err := params.ResolveSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.SStore.SelectOne(context.Background(), vals, mca.RoleDaemon, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Info.Name != "none" || c.Info.Framework != sstore.Name || c.Info.Origin != "built-in" || c.Priority != Priority {
		t.Errorf("selected %+v at priority %d, want sstore/none built-in at %d", c.Info, c.Priority, Priority)
	}
	if err := c.Module.Remove(context.Background(), snapshot.Ref{}, 0); !errors.Is(err, sstore.ErrDisabled) {
		t.Errorf("selected module Remove = %v, want sstore.ErrDisabled", err)
	}
}

// TestConformance runs the SStore kit: none refuses every call.
func TestConformance(t *testing.T) {
	sstoretest.Run(t, func(t *testing.T) sstore.Module {
		m, _, err := New().Query(t.Context(), mca.Query{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}, sstoretest.Options{Disabled: true})
}
