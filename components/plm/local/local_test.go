package plmlocal

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gompi/frameworks"
	"gompi/frameworks/plm"
	"gompi/frameworks/plm/plmtest"
	"gompi/mca"
)

func TestQuery(t *testing.T) {
	params := mca.NewParams()
	set := frameworks.New(params)
	set.PLM.Register(New())
	vals, err := params.ResolveSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.PLM.SelectOne(context.Background(), vals, mca.RoleHNP, nil)
	if err != nil || c.Info.Name != "local" || c.Priority != Priority || c.Module.Network() != "unix" {
		t.Errorf("SelectOne = %+v, %v", c, err)
	}
	for _, role := range []mca.Role{mca.RoleDaemon, mca.RoleApp, mca.RoleTool} {
		if _, _, err := New().Query(context.Background(), mca.Query{Values: vals, Role: role}); !errors.Is(err, mca.ErrSkip) {
			t.Errorf("Query as %v: %v, want a skip", role, err)
		}
	}
}

// TestConformance runs the PLM kit: the kit's daemon is started on two
// simulated nodes.
func TestConformance(t *testing.T) {
	plmtest.Run(t, plmtest.Options{
		Nodes:   []string{"n0", "n1"},
		Network: "unix",
		NewModule: func(t *testing.T, daemon string) plm.Module {
			return plmtest.Select(t, New(), mca.Setting{Name: ParamDaemonPath, Value: daemon})
		},
	})
}

// TestNoDaemon: a gompid that cannot be found fails the launch with an
// error matching plm.ErrLaunch, naming the path, before any node starts.
func TestNoDaemon(t *testing.T) {
	missing := t.TempDir() + "/no-such-gompid"
	m := plmtest.Select(t, New(), mca.Setting{Name: ParamDaemonPath, Value: missing})
	ds, err := m.Launch(t.Context(), plm.Spec{Nodes: []string{"n0"}})
	if !errors.Is(err, plm.ErrLaunch) || !strings.Contains(err.Error(), missing) || ds != nil {
		t.Errorf("Launch = %v, %v; want no daemons and an error wrapping plm.ErrLaunch naming %s", ds, err, missing)
	}
}
