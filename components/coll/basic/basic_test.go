package basic

import (
	"context"
	"testing"

	"gompi/frameworks/coll"
	"gompi/frameworks/coll/colltest"
	"gompi/mca"
)

func selected(t *testing.T) coll.Module {
	t.Helper()
	params := mca.NewParams()
	fw := mca.NewFramework[coll.Module](params, coll.Name, "test", mca.Stacked())
	fw.Register(New())
	vals, err := params.ResolveSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := fw.SelectOne(context.Background(), vals, mca.RoleApp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.Module
}

// basic is the flat algorithms on every layout, floating point included.
func TestConformance(t *testing.T) {
	st := colltest.Check(t, selected(t), colltest.Options{ExactFloats: true, Seed: 7})
	if st.Skipped != 0 || st.Declined["allreduce"]+st.Declined["reduce"]+st.Declined["bcast"] != 0 {
		t.Fatalf("basic skipped or declined: %+v", st)
	}
}
