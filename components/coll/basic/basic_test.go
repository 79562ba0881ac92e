package basic

import (
	"testing"

	"gompi/frameworks/coll/colltest"
)

// basic is the flat algorithms on every layout, floating point included.
func TestConformance(t *testing.T) {
	st := colltest.Check(t, colltest.Select(t, New()), colltest.Options{ExactFloats: true, Seed: 7})
	if st.Skipped != 0 || st.Declined["allreduce"]+st.Declined["reduce"]+st.Declined["bcast"] != 0 {
		t.Fatalf("basic skipped or declined: %+v", st)
	}
}
