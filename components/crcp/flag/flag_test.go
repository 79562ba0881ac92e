package crcpflag_test

import (
	"errors"
	"strings"
	"testing"

	crcpbkmrk "gompi/components/crcp/bkmrk"
	crcpflag "gompi/components/crcp/flag"
	crcpnone "gompi/components/crcp/none"
	"gompi/frameworks"
	"gompi/frameworks/crcp"
	"gompi/frameworks/crcp/crcptest"
	"gompi/frameworks/crs"
	"gompi/mca"
)

// TestSelect: bkmrk stays the default of a job with C/R on; --mca crcp
// flag selects flag, whose module tells the library to quiesce by flags;
// flag needs C/R on and a rank, and says so.
func TestSelect(t *testing.T) {
	cr := mca.Setting{Name: mca.ParamCREnabled, Value: "1"}
	tests := []struct {
		name     string
		role     mca.Role
		settings []mca.Setting
		want     string
		way      crcp.Quiesce
		skip     string // flag's probe says this when it is not selected
	}{
		{"default with C/R on", mca.RoleApp, []mca.Setting{cr}, crcpbkmrk.Name, crcp.QuiesceCounts, ""},
		{"named", mca.RoleApp, []mca.Setting{cr, {Name: crcp.Name, Value: crcpflag.Name}}, crcpflag.Name, crcp.QuiesceFlags, ""},
		{"named, C/R off", mca.RoleApp, []mca.Setting{{Name: crcp.Name, Value: crcpflag.Name}}, "", 0, "ft_cr_enabled = 0"},
		{"daemon", mca.RoleDaemon, []mca.Setting{cr, {Name: crcp.Name, Value: crcpflag.Name}}, "", 0, "runs in ranks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := mca.NewParams()
			set := frameworks.New(params)
			set.CRCP.Register(crcpnone.New())
			set.CRCP.Register(crcpbkmrk.New())
			set.CRCP.Register(crcpflag.New())
			vals, err := params.ResolveSettings(tt.settings)
			if err != nil {
				t.Fatal(err)
			}
			c, err := set.CRCP.SelectOne(t.Context(), vals, tt.role, nil)
			if tt.skip != "" {
				if err == nil {
					t.Fatalf("selected %s, want flag refused", c.Info.Name)
				}
				probes, _ := set.CRCP.Probe(t.Context(), vals, tt.role)
				for _, pr := range probes {
					if pr.Info.Name == crcpflag.Name && strings.Contains(pr.Skipped, tt.skip) {
						return
					}
				}
				t.Fatalf("probes %+v: want flag skipped saying %q", probes, tt.skip)
			}
			if err != nil || c.Info.Name != tt.want {
				t.Fatalf("selected %v (%v), want %s", c.Info.Name, err, tt.want)
			}
			tr, ok := c.Module.(crcp.Transparent)
			if !ok || tr.TransparentQuiesce() != tt.way {
				t.Errorf("crcp %s: transparent quiesce %v (%v), want %v", tt.want, tr, ok, tt.way)
			}
		})
	}
}

// TestInfo: gompi-info's line for flag says what it does and when to
// use it.
func TestInfo(t *testing.T) {
	info := crcpflag.New().Info()
	for _, want := range []string{"flag", "crs criu", "--mca crcp flag", "bkmrk"} {
		if !strings.Contains(info.Description, want) {
			t.Errorf("description %q does not say %q", info.Description, want)
		}
	}
	if info.Priority >= crcpbkmrk.Priority {
		t.Errorf("priority %d, want below bkmrk's %d (bkmrk stays the default)", info.Priority, crcpbkmrk.Priority)
	}
}

// TestConformance runs the CRCP kit: at a safe point (the module's
// FTEvent) flag refuses the checkpoint, saying to use bkmrk, and leaves
// the channels alone; resuming needs nothing.
func TestConformance(t *testing.T) {
	crcptest.Run(t, func(t *testing.T) crcp.Module {
		m, _, err := crcpflag.New().Query(t.Context(), mca.Query{Role: mca.RoleApp, Values: crValues(t)})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}, crcptest.Options{Refuses: crcpflag.ErrTransparentOnly})
}

func TestFTEventSays(t *testing.T) {
	m, _, err := crcpflag.New().Query(t.Context(), mca.Query{Role: mca.RoleApp, Values: crValues(t)})
	if err != nil {
		t.Fatal(err)
	}
	err = m.FTEvent(t.Context(), crs.StateCheckpoint, nil)
	if !errors.Is(err, crcpflag.ErrTransparentOnly) {
		t.Fatalf("FTEvent(checkpoint) = %v, want ErrTransparentOnly", err)
	}
	for _, want := range []string{"crs criu", "crcp bkmrk", "crs self"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func crValues(t *testing.T) *mca.Values {
	params := mca.NewParams()
	frameworks.New(params)
	vals, err := params.ResolveSettings([]mca.Setting{{Name: mca.ParamCREnabled, Value: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	return vals
}
