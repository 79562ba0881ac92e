package coll

import (
	"errors"
	"fmt"
	"unsafe"
)

// Numeric is the element types a reduction combines (package mpi's
// typed helpers take the same). Values travel in the machine's byte
// order: every rank of a job must run on the same architecture.
type Numeric interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64
}

// Op is a predefined reduction operation (ops.go lists those beyond these
// four). All are commutative; floating-point results are still bitwise
// deterministic for a given order of combination, which each algorithm
// fixes.
type Op int

// The reduction operations.
const (
	Sum Op = iota
	Prod
	Min
	Max
)

func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// ErrOp is wrapped by NewReduction for an operation it does not know.
var ErrOp = errors.New("unknown reduction")

// NewReduction returns op on elements of type T.
func NewReduction[T Numeric](op Op) (Reduction, error) {
	var f func(inout, in []byte)
	switch op {
	case Sum:
		f = func(a, b []byte) {
			x, y := elems[T](a), elems[T](b)
			for i := range x {
				x[i] += y[i]
			}
		}
	case Prod:
		f = func(a, b []byte) {
			x, y := elems[T](a), elems[T](b)
			for i := range x {
				x[i] *= y[i]
			}
		}
	case Min:
		f = func(a, b []byte) {
			x, y := elems[T](a), elems[T](b)
			for i := range x {
				if y[i] < x[i] {
					x[i] = y[i]
				}
			}
		}
	case Max:
		f = func(a, b []byte) {
			x, y := elems[T](a), elems[T](b)
			for i := range x {
				if y[i] > x[i] {
					x[i] = y[i]
				}
			}
		}
	default:
		return Reduction{}, fmt.Errorf("%w %v", ErrOp, op)
	}
	var z T
	return Reduction{Fn: f, Elem: int(unsafe.Sizeof(z)), Float: isFloat[T]()}, nil
}

// isFloat reports whether T is a floating-point type: only then is a half
// not zero.
func isFloat[T Numeric]() bool {
	var one T = 1
	return one/2 != 0
}

// elems views bytes as elements of T; b must be aligned for T and a
// multiple of its size (every buffer the algorithms reduce into is).
func elems[T Numeric](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/int(unsafe.Sizeof(z)))
}
