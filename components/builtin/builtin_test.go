package builtin

import (
	"context"
	"testing"

	"gompi/frameworks"
	"gompi/mca"
)

// Every framework must have a component that answers with C/R off, so a
// process with default parameters always starts.
func TestEveryFrameworkSelectsByDefault(t *testing.T) {
	params := mca.NewParams()
	set := frameworks.New(params)
	Register(set)
	vals, err := params.ResolveSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, fw := range set.All() {
		probes, err := fw.Probe(context.Background(), vals, mca.RoleApp)
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
			t.Errorf("%s: nothing selected by default: %+v", fw.Name(), probes)
		}
	}
}
