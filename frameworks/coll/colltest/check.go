package colltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"gompi/frameworks/coll"
	"gompi/mca"
)

// Select returns the module of component comp as a rank selects it, with
// settings (full parameter names) over its defaults.
func Select(t testing.TB, comp mca.Component[coll.Module], settings ...mca.Setting) coll.Module {
	t.Helper()
	params := mca.NewParams()
	fw := mca.NewFramework[coll.Module](params, coll.Name, "collective operations", mca.Stacked())
	fw.Register(comp)
	vals, err := params.ResolveSettings(settings)
	if err != nil {
		t.Fatal(err)
	}
	c, err := fw.SelectOne(context.Background(), vals, mca.RoleApp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.Module
}

// Options says what Check holds a module to.
type Options struct {
	// ExactFloats: floating-point reductions the module takes must give
	// the flat algorithms' bits (its order does not depend on the
	// layout). Without it they must give every member the same bits.
	ExactFloats bool
	// Cases is how many random communicators to try (default 60).
	Cases int
	// Seed seeds the random cases (the failure messages name it).
	Seed uint64
}

// Stats counts what the module did over Check's cases.
type Stats struct {
	// Skipped counts communicators the module did not apply to.
	Skipped int
	// Taken and Declined count calls per operation ("barrier", "bcast",
	// "reduce", "allreduce"), and per reduction kind ("reduce/float",
	// "allreduce/int", ...).
	Taken, Declined map[string]int
}

// Layout returns n node names for a random layout: between one node and
// one per member, members placed on them at random (not in rank order).
func Layout(rng *rand.Rand, n int) []string {
	k := 1 + rng.IntN(n)
	nodes := make([]string, n)
	for r := range nodes {
		nodes[r] = fmt.Sprintf("n%d", rng.IntN(k))
	}
	return nodes
}

// Check runs m's operations on random communicators (1 to 9 members, random
// layouts), buffer sizes, roots and reductions, and compares every result
// with the flat algorithms': integer results bit for bit, floating-point
// ones as Options says. Every member must decide alike, a decline must
// come before any message, and a module must decide whether it applies
// from the layout alone.
func Check(t testing.TB, m coll.Module, o Options) Stats {
	t.Helper()
	st, err := Verify(m, o)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Verify is Check returning the first failure.
func Verify(m coll.Module, o Options) (Stats, error) {
	if o.Cases == 0 {
		o.Cases = 60
	}
	rng := rand.New(rand.NewPCG(o.Seed, 32))
	st := Stats{Taken: map[string]int{}, Declined: map[string]int{}}
	for i := 0; i < o.Cases; i++ {
		n := 1 + rng.IntN(9)
		nodes := Layout(rng, n)
		if err := checkCase(m, nodes, rng, &st, o); err != nil {
			return st, fmt.Errorf("seed %d case %d, layout %v: %w", o.Seed, i, nodes, err)
		}
	}
	return st, nil
}

// checkCase runs one communicator: every operation m offers, once with an
// integer and once with a floating-point reduction.
func checkCase(m coll.Module, nodes []string, rng *rand.Rand, st *Stats, o Options) error {
	n := len(nodes)
	_, ops, skipped, err := newCase(m, nodes)
	if err != nil {
		return err
	}
	if skipped == n {
		st.Skipped++
		return nil
	}
	if skipped > 0 {
		return fmt.Errorf("%d of %d members skipped the communicator: members must decide alike", skipped, n)
	}
	root := rng.IntN(n)
	size := []int{0, 1, 8, 1000, 70000}[rng.IntN(5)]
	if err := checkBarrierBcast(m, ops[0], nodes, size, root, st); err != nil {
		return err
	}
	for _, float := range []bool{false, true} {
		c := newReduceCase(rng, n, float)
		if err := checkReduce(m, ops[0], nodes, c, root, st, o); err != nil {
			return fmt.Errorf("%v of %d elements (%s): %w", c.op, c.count, c.kind, err)
		}
	}
	return nil
}

// newCase makes a job of nodes and asks m for every member's operations
// on it (a module's operations are bound to the communicator they were
// asked for); skipped counts the members m did not apply to.
func newCase(m coll.Module, nodes []string) (j *Job, ops []any, skipped int, err error) {
	j = NewJob(nodes)
	ops = make([]any, len(nodes))
	for r := range nodes {
		v, err := m.Comm(&member{j: j, rank: r})
		switch {
		case errors.Is(err, mca.ErrSkip):
			skipped++
		case err != nil:
			return nil, nil, 0, fmt.Errorf("member %d: Comm: %w", r, err)
		}
		ops[r] = v
	}
	return j, ops, skipped, nil
}

// outcomeOn is outcome on a new job of nodes, call given the member's
// operations.
func outcomeOn(m coll.Module, nodes []string, st *Stats, name string, call func(c coll.Comm, ops any) error) (bool, error) {
	j, ops, _, err := newCase(m, nodes)
	if err != nil {
		return false, err
	}
	return outcome(j, st, name, func(c coll.Comm) error { return call(c, ops[c.Rank()]) })
}

// outcome runs one call on every member and sorts out declines: all
// members decline before sending, or none does.
func outcome(j *Job, st *Stats, name string, call func(c coll.Comm) error) (taken bool, err error) {
	errs := j.Run(call)
	declined := 0
	for _, e := range errs {
		if errors.Is(e, coll.ErrDecline) {
			declined++
		}
	}
	switch {
	case declined == len(errs):
		if j.Sent.Load() != 0 {
			return false, fmt.Errorf("%s: declined after %d messages", name, j.Sent.Load())
		}
		st.Declined[name]++
		return false, nil
	case declined > 0:
		return false, fmt.Errorf("%s: %d of %d members declined: members must decide alike", name, declined, len(errs))
	}
	if err := errors.Join(errs...); err != nil {
		return false, fmt.Errorf("%s: %w", name, err)
	}
	st.Taken[name]++
	return true, nil
}

func checkBarrierBcast(m coll.Module, ops any, nodes []string, size, root int, st *Stats) error {
	if _, ok := ops.(coll.Barrierer); ok {
		if _, err := outcomeOn(m, nodes, st, "barrier", func(c coll.Comm, ops any) error {
			return ops.(coll.Barrierer).Barrier(context.Background(), c, 1)
		}); err != nil {
			return err
		}
	}
	if _, ok := ops.(coll.Bcaster); !ok {
		return nil
	}
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*7 + root)
	}
	got := make([][]byte, len(nodes))
	taken, err := outcomeOn(m, nodes, st, "bcast", func(c coll.Comm, ops any) error {
		buf := make([]byte, size)
		if c.Rank() == root {
			copy(buf, want)
		}
		got[c.Rank()] = buf
		return ops.(coll.Bcaster).Bcast(context.Background(), c, 2, buf, root)
	})
	if err != nil || !taken {
		return err
	}
	for r, b := range got {
		if !bytes.Equal(b, want) {
			return fmt.Errorf("bcast of %d bytes from %d: member %d got other bytes", size, root, r)
		}
	}
	return nil
}

// reduceCase is one reduction: each member's contribution, the kind and
// operation.
type reduceCase struct {
	kind  string
	op    coll.Op
	count int
	red   coll.Reduction
	in    [][]byte // per member
}

func newReduceCase(rng *rand.Rand, n int, float bool) reduceCase {
	c := reduceCase{op: coll.Op(rng.IntN(4)), count: []int{1, 3, 100, 9000}[rng.IntN(4)]}
	gen := []func(*reduceCase, *rand.Rand, int){genInts[int64], genInts[int32], genInts[uint8]}
	if float {
		gen = []func(*reduceCase, *rand.Rand, int){genFloats[float64], genFloats[float32]}
	}
	gen[rng.IntN(len(gen))](&c, rng, n)
	return c
}

func genInts[T int64 | int32 | uint8](c *reduceCase, rng *rand.Rand, n int) {
	c.kind = fmt.Sprintf("%T", T(0))
	c.red, _ = coll.NewReduction[T](c.op)
	for r := 0; r < n; r++ {
		v := make([]T, c.count)
		for i := range v {
			v[i] = T(rng.Int64N(1<<20) - 1<<19) // products wrap around, as they may
		}
		c.in = append(c.in, asBytes(v))
	}
}

func genFloats[T float64 | float32](c *reduceCase, rng *rand.Rand, n int) {
	c.kind = fmt.Sprintf("%T", T(0))
	c.red, _ = coll.NewReduction[T](c.op)
	for r := 0; r < n; r++ {
		v := make([]T, c.count)
		for i := range v {
			// Magnitudes far apart: the order of a sum shows in its bits.
			v[i] = T((rng.Float64() - 0.5) * float64(uint64(1)<<rng.IntN(40)))
		}
		c.in = append(c.in, asBytes(v))
	}
}

func asBytes[T any](v []T) []byte {
	var z T
	b := coll.AlignedBuf(len(v) * int(unsafe.Sizeof(z)))
	copy(b, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(b)))
	return b
}

// checkReduce runs Reduce (to root) and Allreduce with c on the flat
// algorithms and on the module, and compares.
func checkReduce(m coll.Module, ops any, nodes []string, c reduceCase, root int, st *Stats, o Options) error {
	n, size := len(nodes), len(c.in[0])
	kind := "/int"
	if c.red.Float {
		kind = "/float"
	}
	exact := !c.red.Float || o.ExactFloats
	if _, ok := ops.(coll.Reducer); ok {
		flat, mod := make([][]byte, n), make([][]byte, n)
		run := func(out [][]byte, f func(coll.Comm, any, []byte, []byte) error) func(coll.Comm, any) error {
			return func(cm coll.Comm, ops any) error {
				var recv []byte
				if cm.Rank() == root {
					recv = coll.AlignedBuf(size)
				}
				out[cm.Rank()] = recv
				return f(cm, ops, bytes.Clone(c.in[cm.Rank()]), recv)
			}
		}
		if err := errors.Join(NewJob(nodes).Run(func(cm coll.Comm) error {
			return run(flat, func(cm coll.Comm, _ any, s, r []byte) error {
				return coll.Reduce(context.Background(), cm, 3, s, r, c.red, root)
			})(cm, nil)
		})...); err != nil {
			return fmt.Errorf("flat reduce: %w", err)
		}
		taken, err := outcomeOn(m, nodes, st, "reduce", run(mod, func(cm coll.Comm, ops any, s, r []byte) error {
			return ops.(coll.Reducer).Reduce(context.Background(), cm, 3, s, r, c.red, root)
		}))
		if err != nil {
			return err
		}
		if taken {
			st.Taken["reduce"+kind]++
			if exact && !bytes.Equal(flat[root], mod[root]) {
				return fmt.Errorf("reduce to %d: the result differs from the flat algorithm's", root)
			}
		} else {
			st.Declined["reduce"+kind]++
		}
	}
	if _, ok := ops.(coll.Allreducer); !ok {
		return nil
	}
	flat, mod := make([][]byte, n), make([][]byte, n)
	run := func(out [][]byte, f func(coll.Comm, any, []byte, []byte) error) func(coll.Comm, any) error {
		return func(cm coll.Comm, ops any) error {
			out[cm.Rank()] = coll.AlignedBuf(size)
			return f(cm, ops, bytes.Clone(c.in[cm.Rank()]), out[cm.Rank()])
		}
	}
	if err := errors.Join(NewJob(nodes).Run(func(cm coll.Comm) error {
		return run(flat, func(cm coll.Comm, _ any, s, r []byte) error {
			return coll.Allreduce(context.Background(), cm, 4, s, r, c.red)
		})(cm, nil)
	})...); err != nil {
		return fmt.Errorf("flat allreduce: %w", err)
	}
	taken, err := outcomeOn(m, nodes, st, "allreduce", run(mod, func(cm coll.Comm, ops any, s, r []byte) error {
		return ops.(coll.Allreducer).Allreduce(context.Background(), cm, 4, s, r, c.red)
	}))
	if err != nil || !taken {
		if err == nil {
			st.Declined["allreduce"+kind]++
		}
		return err
	}
	st.Taken["allreduce"+kind]++
	for r := range mod {
		if !bytes.Equal(mod[r], mod[0]) {
			return fmt.Errorf("allreduce: members 0 and %d got different bits", r)
		}
		if exact && !bytes.Equal(mod[r], flat[r]) {
			return fmt.Errorf("allreduce: member %d's result differs from the flat algorithm's", r)
		}
	}
	return nil
}
