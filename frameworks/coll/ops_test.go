package coll_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"gompi/frameworks/coll"
	"gompi/frameworks/coll/colltest"
)

// enc lays out values as elements of kind k in the machine's (little-
// endian) order; a complex element is (v, -v).
func enc(k coll.Kind, vals ...float64) []byte {
	b := coll.AlignedBuf(len(vals) * k.Size())
	for i, v := range vals {
		e := b[i*k.Size():]
		switch k {
		case coll.Int8, coll.Uint8, coll.Bool, coll.Byte:
			e[0] = byte(int64(v))
			if k == coll.Uint8 || k == coll.Byte {
				e[0] = byte(uint64(v))
			}
		case coll.Int16, coll.Uint16:
			binary.LittleEndian.PutUint16(e, uint16(int64(v)))
		case coll.Int32:
			binary.LittleEndian.PutUint32(e, uint32(int32(v)))
		case coll.Uint32:
			binary.LittleEndian.PutUint32(e, uint32(v))
		case coll.Int64:
			binary.LittleEndian.PutUint64(e, uint64(int64(v)))
		case coll.Uint64:
			binary.LittleEndian.PutUint64(e, uint64(v))
		case coll.Float32:
			binary.LittleEndian.PutUint32(e, math.Float32bits(float32(v)))
		case coll.Float64:
			binary.LittleEndian.PutUint64(e, math.Float64bits(v))
		case coll.Complex64:
			binary.LittleEndian.PutUint32(e, math.Float32bits(float32(v)))
			binary.LittleEndian.PutUint32(e[4:], math.Float32bits(float32(-v)))
		case coll.Complex128:
			binary.LittleEndian.PutUint64(e, math.Float64bits(v))
			binary.LittleEndian.PutUint64(e[8:], math.Float64bits(-v))
		}
	}
	return b
}

var (
	ints     = []coll.Kind{coll.Int8, coll.Int16, coll.Int32, coll.Int64}
	uints    = []coll.Kind{coll.Uint8, coll.Uint16, coll.Uint32, coll.Uint64}
	floats   = []coll.Kind{coll.Float32, coll.Float64}
	complexs = []coll.Kind{coll.Complex64, coll.Complex128}
)

func kinds(groups ...[]coll.Kind) []coll.Kind {
	var out []coll.Kind
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// TestReductionOf checks every predefined op on every kind that takes it
// against hand-computed results, and that the kinds that do not take it
// are refused.
func TestReductionOf(t *testing.T) {
	cases := []struct {
		op         coll.Op
		kinds      []coll.Kind
		a, b, want []float64
	}{
		{coll.Sum, kinds(ints, uints, floats, complexs), []float64{1, 2, 0}, []float64{3, 4, 5}, []float64{4, 6, 5}},
		{coll.Prod, kinds(ints, uints, floats), []float64{2, 3, 0}, []float64{3, 4, 5}, []float64{6, 12, 0}},
		{coll.Min, kinds(ints, uints, floats), []float64{1, 7, 3}, []float64{2, 5, 3}, []float64{1, 5, 3}},
		{coll.Max, kinds(ints, uints, floats), []float64{1, 7, 3}, []float64{2, 5, 3}, []float64{2, 7, 3}},
		{coll.Min, kinds(ints, floats), []float64{-1, 7}, []float64{2, -5}, []float64{-1, -5}},
		// Unsigned kinds compare as unsigned: 200 > 100 in every width.
		{coll.Max, uints, []float64{100, 200}, []float64{200, 100}, []float64{200, 200}},
		{coll.Min, uints, []float64{100, 200}, []float64{200, 100}, []float64{100, 100}},
		{coll.Land, kinds(ints, uints, []coll.Kind{coll.Bool}), []float64{0, 1, 2, 0}, []float64{0, 0, 3, 5}, []float64{0, 0, 1, 0}},
		{coll.Lor, kinds(ints, uints, []coll.Kind{coll.Bool}), []float64{0, 1, 2, 0}, []float64{0, 0, 3, 5}, []float64{0, 1, 1, 1}},
		{coll.Lxor, kinds(ints, uints, []coll.Kind{coll.Bool}), []float64{0, 1, 2, 0}, []float64{0, 0, 3, 5}, []float64{0, 1, 0, 1}},
		{coll.Band, kinds(ints, uints, []coll.Kind{coll.Byte}), []float64{12, 10}, []float64{10, 6}, []float64{8, 2}},
		{coll.Bor, kinds(ints, uints, []coll.Kind{coll.Byte}), []float64{12, 10}, []float64{10, 6}, []float64{14, 14}},
		{coll.Bxor, kinds(ints, uints, []coll.Kind{coll.Byte}), []float64{12, 10}, []float64{10, 6}, []float64{6, 12}},
		{coll.Replace, kinds(ints, floats, complexs), []float64{1, 2}, []float64{3, 4}, []float64{3, 4}},
		{coll.NoOp, kinds(ints, floats, complexs), []float64{1, 2}, []float64{3, 4}, []float64{1, 2}},
	}
	for _, c := range cases {
		for _, k := range c.kinds {
			t.Run(fmt.Sprintf("%v/%v", c.op, k), func(t *testing.T) {
				red, err := coll.ReductionOf(c.op, k)
				if err != nil {
					t.Fatal(err)
				}
				if red.Elem != k.Size() || red.Float != k.Float() || red.NonCommutative {
					t.Fatalf("reduction %+v for %v", red, k)
				}
				a := enc(k, c.a...)
				red.Fn(a, enc(k, c.b...))
				if want := enc(k, c.want...); !bytes.Equal(a, want) {
					t.Fatalf("got % x, want % x", a, want)
				}
			})
		}
	}
	refused := []struct {
		op coll.Op
		k  coll.Kind
	}{
		{coll.Min, coll.Complex64}, {coll.Band, coll.Float64}, {coll.Land, coll.Float32},
		{coll.Sum, coll.Bool}, {coll.Sum, coll.Byte}, {coll.Sum, coll.LongDouble},
		{coll.MinLoc, coll.Int32}, {coll.MaxLoc, coll.LongDoubleInt}, {coll.Sum, coll.DoubleInt},
		{coll.Op(99), coll.Int32}, {coll.Sum, coll.KindNone},
	}
	for _, r := range refused {
		if _, err := coll.ReductionOf(r.op, r.k); !errors.Is(err, coll.ErrOp) {
			t.Errorf("%v on %v: err %v, want ErrOp", r.op, r.k, err)
		}
	}
}

// pairs lays out (value, index) pairs of kind k.
func pairs(k coll.Kind, vals ...float64) []byte {
	val, idx, _ := k.Pair()
	b := coll.AlignedBuf(len(vals) / 2 * k.Size())
	for i := 0; i < len(vals); i += 2 {
		e := b[i/2*k.Size():]
		copy(e, enc(val, vals[i]))
		binary.LittleEndian.PutUint32(e[idx:], uint32(int32(vals[i+1])))
	}
	return b
}

// TestMinMaxLoc checks MINLOC and MAXLOC on every comparable pair kind:
// the better value wins with its index, a tie keeps the lower index
// whichever side holds it.
func TestMinMaxLoc(t *testing.T) {
	for _, k := range []coll.Kind{coll.FloatInt, coll.DoubleInt, coll.LongInt, coll.TwoInt, coll.ShortInt} {
		a := []float64{1, 5, 3, 9, 2, 7, 4, 1, -2, 3}
		b := []float64{2, 1, 1, 4, 2, 3, 4, 8, -2, 0}
		for _, c := range []struct {
			op   coll.Op
			want []float64
		}{
			{coll.MinLoc, []float64{1, 5, 1, 4, 2, 3, 4, 1, -2, 0}},
			{coll.MaxLoc, []float64{2, 1, 3, 9, 2, 3, 4, 1, -2, 0}},
		} {
			red, err := coll.ReductionOf(c.op, k)
			if err != nil {
				t.Fatal(err)
			}
			x := pairs(k, a...)
			red.Fn(x, pairs(k, b...))
			if want := pairs(k, c.want...); !bytes.Equal(x, want) {
				t.Errorf("%v on %v: got % x, want % x", c.op, k, x, want)
			}
		}
	}
}

// matmul is the product of 2x2 int64 matrices, row-major: associative,
// not commutative, and exact.
func matmul(x, y []int64) []int64 {
	return []int64{
		x[0]*y[0] + x[1]*y[2], x[0]*y[1] + x[1]*y[3],
		x[2]*y[0] + x[3]*y[2], x[2]*y[1] + x[3]*y[3],
	}
}

func mat(r int) []int64 { return []int64{1, int64(r + 1), int64(2*r + 3), 1} }

func ints64(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[i*8:]))
	}
	return out
}

func matBytes(m []int64) []byte {
	b := coll.AlignedBuf(len(m) * 8)
	for i, v := range m {
		binary.LittleEndian.PutUint64(b[i*8:], uint64(v))
	}
	return b
}

// TestNonCommutativeOrder reduces one matrix per rank with a user op (in
// MPI's form) whose result depends on the order: Reduce at every root
// and Allreduce must give M0·M1·…·Mn-1 at 1 to 8 ranks.
func TestNonCommutativeOrder(t *testing.T) {
	op := func(in, inout []byte) {
		for off := 0; off < len(in); off += 32 {
			copy(inout[off:off+32], matBytes(matmul(ints64(in[off:off+32]), ints64(inout[off:off+32]))))
		}
	}
	red := coll.UserReduction(op, 32, false)
	for n := 1; n <= 8; n++ {
		want := mat(0)
		for r := 1; r < n; r++ {
			want = matmul(want, mat(r))
		}
		for root := -1; root < n; root++ {
			got := make([][]byte, n)
			errs := colltest.NewJob(make([]string, n)).Run(func(c coll.Comm) error {
				send, recv := matBytes(append(mat(c.Rank()), mat(c.Rank())...)), coll.AlignedBuf(64)
				got[c.Rank()] = recv
				if root < 0 {
					return coll.Allreduce(context.Background(), c, 1, send, recv, red)
				}
				return coll.Reduce(context.Background(), c, 1, send, recv, red, root)
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("%d ranks, root %d: rank %d: %v", n, root, r, err)
				}
				if root >= 0 && r != root {
					continue
				}
				if g := ints64(got[r]); fmt.Sprint(g) != fmt.Sprint(append(want, want...)) {
					t.Errorf("%d ranks, root %d: rank %d has %v, want %v twice", n, root, r, g, want)
				}
			}
		}
	}
}
