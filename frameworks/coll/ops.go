package coll

import (
	"fmt"
	"unsafe"
)

// The operations MPI predefines beyond Sum, Prod, Min and Max. Logical
// ones treat a nonzero element as true and yield 0 or 1; bitwise ones
// apply to integers and bytes; MinLoc and MaxLoc combine pair kinds
// (value, index): the smaller (larger) value wins, and on a tie the lower
// index, whatever the order. Replace keeps the later contribution and
// NoOp the earlier (MPI's one-sided operations name them).
const (
	Land Op = iota + Max + 1
	Lor
	Lxor
	Band
	Bor
	Bxor
	MinLoc
	MaxLoc
	Replace
	NoOp
)

var opNames = map[Op]string{
	Sum: "sum", Prod: "prod", Min: "min", Max: "max", Land: "land", Lor: "lor", Lxor: "lxor",
	Band: "band", Bor: "bor", Bxor: "bxor", MinLoc: "minloc", MaxLoc: "maxloc",
	Replace: "replace", NoOp: "no_op",
}

// integer is the kinds the bitwise operations take.
type integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// ReductionOf returns a predefined op on elements of kind k: the
// non-generic form of NewReduction, for callers that know the element
// type only as a value (the C interface). Unsigned kinds compare as
// unsigned. An op the kind does not take (Min on complex, MinLoc on a
// plain integer, anything on LongDouble) is an error wrapping ErrOp.
func ReductionOf(op Op, k Kind) (Reduction, error) {
	var f func(inout, in []byte)
	switch op {
	case Replace:
		f = func(a, b []byte) { copy(a, b) }
	case NoOp:
		f = func(_, _ []byte) {}
	case MinLoc, MaxLoc:
		f = locFn(op, k)
	default:
		f = kindFn(op, k)
	}
	if f == nil || !k.valid() {
		return Reduction{}, fmt.Errorf("%w %v on %v", ErrOp, op, k)
	}
	return Reduction{Fn: f, Elem: k.Size(), Float: k.Float()}, nil
}

// kindFn is the element-wise function of a non-pair op on kind k, nil when
// the kind does not take it.
func kindFn(op Op, k Kind) func(inout, in []byte) {
	switch k {
	case Int8:
		return intFn[int8](op)
	case Int16:
		return intFn[int16](op)
	case Int32:
		return intFn[int32](op)
	case Int64:
		return intFn[int64](op)
	case Uint8:
		return intFn[uint8](op)
	case Uint16:
		return intFn[uint16](op)
	case Uint32:
		return intFn[uint32](op)
	case Uint64:
		return intFn[uint64](op)
	case Float32:
		return numFn[float32](op)
	case Float64:
		return numFn[float64](op)
	case Complex64:
		return complexFn[complex64](op)
	case Complex128:
		return complexFn[complex128](op)
	case Bool:
		return logicFn[uint8](op)
	case Byte:
		return bitFn[uint8](op)
	}
	return nil
}

// numFn is the arithmetic and ordering ops of a real type.
func numFn[T Numeric](op Op) func(inout, in []byte) {
	switch op {
	case Sum, Prod, Min, Max:
		r, err := NewReduction[T](op)
		if err != nil {
			return nil
		}
		return r.Fn
	}
	return nil
}

// intFn is every op an integer kind takes.
func intFn[T integer](op Op) func(inout, in []byte) {
	if f := numFn[T](op); f != nil {
		return f
	}
	if f := logicFn[T](op); f != nil {
		return f
	}
	return bitFn[T](op)
}

func logicFn[T integer](op Op) func(inout, in []byte) {
	var g func(x, y bool) bool
	switch op {
	case Land:
		g = func(x, y bool) bool { return x && y }
	case Lor:
		g = func(x, y bool) bool { return x || y }
	case Lxor:
		g = func(x, y bool) bool { return x != y }
	default:
		return nil
	}
	return func(a, b []byte) {
		x, y := elemsOf[T](a), elemsOf[T](b)
		for i := range x {
			v := g(x[i] != 0, y[i] != 0)
			x[i] = 0
			if v {
				x[i] = 1
			}
		}
	}
}

func bitFn[T integer](op Op) func(inout, in []byte) {
	var g func(x, y T) T
	switch op {
	case Band:
		g = func(x, y T) T { return x & y }
	case Bor:
		g = func(x, y T) T { return x | y }
	case Bxor:
		g = func(x, y T) T { return x ^ y }
	default:
		return nil
	}
	return func(a, b []byte) {
		x, y := elemsOf[T](a), elemsOf[T](b)
		for i := range x {
			x[i] = g(x[i], y[i])
		}
	}
}

func complexFn[T complex64 | complex128](op Op) func(inout, in []byte) {
	switch op {
	case Sum:
		return func(a, b []byte) {
			x, y := elemsOf[T](a), elemsOf[T](b)
			for i := range x {
				x[i] += y[i]
			}
		}
	case Prod:
		return func(a, b []byte) {
			x, y := elemsOf[T](a), elemsOf[T](b)
			for i := range x {
				x[i] *= y[i]
			}
		}
	}
	return nil
}

// locFn is MinLoc or MaxLoc on pair kind k, nil when k is no pair kind
// that can be compared.
func locFn(op Op, k Kind) func(inout, in []byte) {
	val, idx, ok := k.Pair()
	if !ok {
		return nil
	}
	size, max := k.Size(), op == MaxLoc
	switch val {
	case Float32:
		return pairFn[float32](size, idx, max)
	case Float64:
		return pairFn[float64](size, idx, max)
	case Int64:
		return pairFn[int64](size, idx, max)
	case Int32:
		return pairFn[int32](size, idx, max)
	case Int16:
		return pairFn[int16](size, idx, max)
	}
	return nil
}

// pairFn compares (value, index) pairs of size bytes with the int32 index
// at offset idx.
func pairFn[T Numeric](size, idx int, max bool) func(inout, in []byte) {
	return func(a, b []byte) {
		for off := 0; off+size <= len(a); off += size {
			xv, yv := (*T)(unsafe.Pointer(&a[off])), (*T)(unsafe.Pointer(&b[off]))
			xi, yi := (*int32)(unsafe.Pointer(&a[off+idx])), (*int32)(unsafe.Pointer(&b[off+idx]))
			better := *yv < *xv
			if max {
				better = *yv > *xv
			}
			switch {
			case better:
				*xv, *xi = *yv, *yi
			case *yv == *xv && *yi < *xi:
				*xi = *yi
			}
		}
	}
}

// elemsOf views bytes as elements of any fixed-size type, as elems does
// for Numeric ones.
func elemsOf[T any](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/int(unsafe.Sizeof(z)))
}

func sizeOf[T any]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

// UserReduction is a user-defined op (MPI_Op_create) as a Reduction. fn
// has MPI's form: it combines in into inout element by element as
// inout = in op inout, on elements of elem bytes (the datatype's extent),
// in being the lower ranks' contribution when the op does not commute.
// A commutative op is called as it is; a non-commutative one is given the
// operands in the order Fn's contract needs, at the cost of a copy.
func UserReduction(fn func(in, inout []byte), elem int, commute bool) Reduction {
	red := Reduction{Elem: elem, Float: true, NonCommutative: !commute}
	if commute {
		red.Fn = func(inout, in []byte) { fn(in, inout) }
		return red
	}
	red.Fn = func(inout, in []byte) {
		hi := AlignedBuf(len(in))
		copy(hi, in)
		fn(inout, hi)
		copy(inout, hi)
	}
	return red
}
