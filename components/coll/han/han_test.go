package han

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"gompi/frameworks/coll"
	"gompi/frameworks/coll/colltest"
	"gompi/mca"
)

func selected(t *testing.T, settings ...mca.Setting) coll.Module {
	t.Helper()
	return colltest.Select(t, New(), settings...)
}

// By default han gives the flat algorithms' bits for everything it takes
// (integers), and declines floating-point reductions.
func TestConformanceDefault(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		st := colltest.Check(t, selected(t), colltest.Options{ExactFloats: true, Seed: seed, Cases: 80})
		if st.Taken["reduce/float"]+st.Taken["allreduce/float"] != 0 {
			t.Fatalf("han took floating-point reductions by default: %+v", st)
		}
		for _, op := range []string{"barrier", "bcast", "reduce/int", "allreduce/int", "reduce/float", "allreduce/float"} {
			if st.Taken[op]+st.Declined[op] == 0 {
				t.Errorf("seed %d: no %s was tried on a communicator han applies to: %+v", seed, op, st)
			}
		}
		if st.Taken["allreduce/int"] == 0 || st.Declined["allreduce/float"] == 0 {
			t.Errorf("seed %d: han took no integer or declined no float allreduce: %+v", seed, st)
		}
	}
}

// With coll_han_float_order=layout han takes floating-point reductions
// too; every member still gets the same bits.
func TestConformanceLayoutFloats(t *testing.T) {
	st := colltest.Check(t, selected(t, mca.Setting{Name: paramFloatOrder, Value: orderLayout}), colltest.Options{Seed: 5, Cases: 80})
	if st.Taken["allreduce/float"] == 0 || st.Taken["reduce/float"] == 0 {
		t.Fatalf("han declined floating point with %s=layout: %+v", paramFloatOrder, st)
	}
}

// Above coll_han_<op>_max han passes the call on, before any message.
func TestSizeLimits(t *testing.T) {
	m := selected(t, mca.Setting{Name: paramAllreduceMax, Value: "8"}, mca.Setting{Name: paramBcastMax, Value: "8"})
	nodes := []string{"a", "a", "b", "b"}
	j := colltest.NewJob(nodes)
	red, _ := coll.NewReduction[int64](coll.Sum)
	errs := j.Run(func(c coll.Comm) error {
		ops, err := m.Comm(c)
		if err != nil {
			return err
		}
		if err := ops.(coll.Bcaster).Bcast(context.Background(), c, 1, make([]byte, 9), 0); !errors.Is(err, coll.ErrDecline) {
			return errors.New("a 9-byte bcast was taken above coll_han_bcast_max=8")
		}
		buf := coll.AlignedBuf(16)
		if err := ops.(coll.Allreducer).Allreduce(context.Background(), c, 2, buf, buf, red); !errors.Is(err, coll.ErrDecline) {
			return errors.New("a 16-byte allreduce was taken above coll_han_allreduce_max=8")
		}
		return ops.(coll.Allreducer).Allreduce(context.Background(), c, 3, buf[:8], buf[:8], red)
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if j.Sent.Load() == 0 {
		t.Fatal("the 8-byte allreduce sent nothing")
	}
}

// han applies exactly to communicators that span more than one node with
// more than one member on some node.
func TestAppliesToHierarchiesOnly(t *testing.T) {
	m := selected(t)
	rng := rand.New(rand.NewPCG(3, 3))
	for i := 0; i < 300; i++ {
		nodes := colltest.Layout(rng, 1+rng.IntN(9))
		distinct := map[string]bool{}
		for _, n := range nodes {
			distinct[n] = true
		}
		want := len(distinct) > 1 && len(distinct) < len(nodes)
		j := colltest.NewJob(nodes)
		errs := j.Run(func(c coll.Comm) error {
			_, err := m.Comm(c)
			return err
		})
		for r, err := range errs {
			if got := err == nil; got != want {
				t.Fatalf("layout %v, member %d: Comm = %v, want applies=%v", nodes, r, err, want)
			}
			if err != nil && !errors.Is(err, mca.ErrSkip) {
				t.Fatalf("layout %v: %v is no skip", nodes, err)
			}
		}
	}
}

// In a job with C/R han is not selected: a restart or migration on
// another layout would split the ranks between two groupings.
func TestSkippedWithCR(t *testing.T) {
	params := mca.NewParams()
	fw := mca.NewFramework[coll.Module](params, coll.Name, "collective operations", mca.Stacked())
	fw.Register(New())
	vals, err := params.ResolveSettings([]mca.Setting{{Name: mca.ParamCREnabled, Value: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	probes, err := fw.Probe(context.Background(), vals, mca.RoleApp)
	if err != nil {
		t.Fatal(err)
	}
	if len(probes) != 1 || probes[0].Selected || probes[0].Skipped == "" {
		t.Fatalf("han with C/R on: %+v, want skipped", probes)
	}
}
