package builtin

import (
	"context"
	"testing"

	"gompi/frameworks"
	"gompi/mca"
)

// Every framework must have a component that answers with C/R off, so a
// process with default parameters always starts: in gompirun every
// framework, in a rank every one but the launcher's.
func TestEveryFrameworkSelectsByDefault(t *testing.T) {
	params := mca.NewParams()
	set := frameworks.New(params)
	Register(set)
	vals, err := params.ResolveSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		role mca.Role
		skip string
	}{{mca.RoleHNP, ""}, {mca.RoleApp, "plm"}} {
		for _, fw := range set.All() {
			if fw.Name() != c.skip {
				probeSelects(t, fw, vals, c.role)
			}
		}
	}
}

func probeSelects(t *testing.T, fw mca.FrameworkInfo, vals *mca.Values, role mca.Role) {
	t.Helper()
	probes, err := fw.Probe(context.Background(), vals, role)
	if err != nil {
		t.Fatalf("%s: %v", fw.Name(), err)
	}
	selected := 0
	for _, p := range probes {
		if p.Failed != "" {
			t.Errorf("%s/%s failed: %s", fw.Name(), p.Info.Name, p.Failed)
		}
		if p.Selected {
			selected++
		}
	}
	if selected == 0 {
		t.Errorf("%s as %v: nothing selected by default: %+v", fw.Name(), role, probes)
	}
}
