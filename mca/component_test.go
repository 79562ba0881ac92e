package mca

import (
	"context"
	"testing"
)

func TestNewComponent(t *testing.T) {
	info := ComponentInfo{Framework: "fw", Name: "x", Priority: 7,
		Params: []ParamSpec{{Name: "fw_x_p", Type: Int, Default: "1"}}}
	var seen Query
	c := NewComponent(info, func(_ context.Context, q Query) (string, int, error) {
		seen = q
		return "module", q.Priority + 1, nil
	})
	got := c.Info()
	if got.Origin != OriginBuiltin || got.Name != "x" || got.Priority != 7 || len(got.Params) != 1 {
		t.Fatalf("Info = %+v", got)
	}
	got.Params[0].Name = "changed"
	if c.Info().Params[0].Name != "fw_x_p" {
		t.Error("a caller's change to Info().Params reached the component")
	}
	m, prio, err := c.Query(t.Context(), Query{Priority: 3, Role: RoleApp})
	if m != "module" || prio != 4 || err != nil || seen.Role != RoleApp {
		t.Errorf("Query = %q, %d, %v (saw %+v)", m, prio, err, seen)
	}
	info.Origin = "/plugins/x"
	if o := NewComponent(info, Module("m")).Info().Origin; o != "/plugins/x" {
		t.Errorf("a given Origin became %q", o)
	}
}

func TestModuleQuery(t *testing.T) {
	p := NewParams()
	fw := NewFramework[string](p, "fw", "test")
	fw.Register(NewComponent(ComponentInfo{Framework: "fw", Name: "none", Priority: 2}, Module("none-module")))
	vals, err := p.ResolveSettings([]Setting{{Name: "fw_none_priority", Value: "9"}})
	if err != nil {
		t.Fatal(err)
	}
	sel, err := fw.SelectOne(t.Context(), vals, RoleApp, nil)
	if err != nil || sel.Module != "none-module" || sel.Priority != 9 || sel.Info.Origin != OriginBuiltin {
		t.Errorf("SelectOne = %+v, %v", sel, err)
	}
}
