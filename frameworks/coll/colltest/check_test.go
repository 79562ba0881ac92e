package colltest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gompi/components/coll/basic"
	"gompi/frameworks/coll"
)

// The flat algorithms (component basic) pass, and every operation and
// kind of reduction is tried.
func TestFlatPasses(t *testing.T) {
	st := Check(t, Select(t, basic.New()), Options{ExactFloats: true, Seed: 1})
	for _, op := range []string{"barrier", "bcast", "reduce/int", "reduce/float", "allreduce/int", "allreduce/float"} {
		if st.Taken[op] == 0 {
			t.Errorf("no %s was checked: %+v", op, st)
		}
	}
}

// reversed allreduces in reverse member order: the integers agree with
// the flat algorithms, floating point does not.
type reversed struct{}

func (reversed) Comm(coll.Comm) (any, error) { return reversed{}, nil }

func (reversed) Allreduce(ctx context.Context, c coll.Comm, tag int, s, r []byte, red coll.Reduction) error {
	n := c.Size()
	mirror := make([]int, n)
	for i := range mirror {
		mirror[i] = n - 1 - i
	}
	return coll.Allreduce(ctx, coll.Sub(c, mirror), tag, s, r, red)
}

// lopsided declines a broadcast on member 0 only.
type lopsided struct{}

func (lopsided) Comm(coll.Comm) (any, error) { return lopsided{}, nil }

func (lopsided) Bcast(ctx context.Context, c coll.Comm, tag int, buf []byte, root int) error {
	if c.Rank() == 0 {
		return coll.ErrDecline
	}
	return coll.Bcast(ctx, c, tag, buf, root)
}

// late declines a barrier after sending.
type late struct{}

func (late) Comm(coll.Comm) (any, error) { return late{}, nil }

func (late) Barrier(ctx context.Context, c coll.Comm, tag int) error {
	if err := c.Send(ctx, c.Rank(), tag, nil); err != nil {
		return err
	}
	return coll.ErrDecline
}

// The kit fails modules that break the rules it checks.
func TestCheckFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    coll.Module
		o    Options
		want string
	}{
		{"float order", reversed{}, Options{ExactFloats: true}, "differs from the flat algorithm's"},
		{"decline on one member", lopsided{}, Options{}, "members must decide alike"},
		{"decline after sending", late{}, Options{}, "declined after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(tc.m, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify = %v, want an error saying %q", err, tc.want)
			}
		})
	}
	// The float order is allowed when exact floats are not asked for.
	if _, err := Verify(reversed{}, Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestSubMapsRanks(t *testing.T) {
	j := NewJob([]string{"a", "b", "a", "b", "a"})
	errs := j.Run(func(c coll.Comm) error {
		if c.Rank()%2 != 0 {
			return nil
		}
		s := coll.Sub(c, []int{4, 0, 2})
		if want := map[int]int{4: 0, 0: 1, 2: 2}[c.Rank()]; s.Rank() != want || s.Size() != 3 || s.Node(0) != "a" {
			return errors.New("wrong view")
		}
		buf := []byte{byte(c.Rank())}
		if err := coll.Bcast(context.Background(), s, 9, buf, 0); err != nil {
			return err
		}
		if buf[0] != 4 {
			return errors.New("bcast through the view went astray")
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}
