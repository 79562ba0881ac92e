package coll

import "fmt"

// Kind is the element kind of a buffer a reduction combines, named
// without Go generics so that a caller holding only a value (the C
// interface's MPI_Datatype) can ask for a Reduction (ReductionOf). The
// pair kinds are C's MINLOC/MAXLOC structs as a C compiler lays them out
// on a 64-bit machine: the value at offset 0, the int index after it,
// padding up to the struct's alignment (Kind.Size is that extent).
type Kind uint8

// The element kinds.
const (
	KindNone Kind = iota
	Int8
	Int16
	Int32
	Int64
	Uint8
	Uint16
	Uint32
	Uint64
	Float32
	Float64
	Complex64
	Complex128
	// Bool is a one-byte C bool (0 false, anything else true).
	Bool
	// Byte is raw bytes: only the bitwise operations apply.
	Byte
	// LongDouble is C's 16-byte long double: moved, never reduced.
	LongDouble
	FloatInt      // struct { float v; int i }: 8 bytes
	DoubleInt     // struct { double v; int i }: 16 bytes
	LongInt       // struct { long v; int i }: 16 bytes
	TwoInt        // struct { int v; int i }: 8 bytes
	ShortInt      // struct { short v; int i }: 8 bytes
	LongDoubleInt // struct { long double v; int i }: 32 bytes, never reduced
	numKinds
)

var kindInfo = [numKinds]struct {
	name string
	size int
	// val is the value's kind and idx the index's offset in a pair kind.
	val Kind
	idx int
}{
	KindNone: {"none", 0, 0, 0}, Int8: {"int8", 1, 0, 0}, Int16: {"int16", 2, 0, 0},
	Int32: {"int32", 4, 0, 0}, Int64: {"int64", 8, 0, 0}, Uint8: {"uint8", 1, 0, 0},
	Uint16: {"uint16", 2, 0, 0}, Uint32: {"uint32", 4, 0, 0}, Uint64: {"uint64", 8, 0, 0},
	Float32: {"float32", 4, 0, 0}, Float64: {"float64", 8, 0, 0},
	Complex64: {"complex64", 8, 0, 0}, Complex128: {"complex128", 16, 0, 0},
	Bool: {"bool", 1, 0, 0}, Byte: {"byte", 1, 0, 0}, LongDouble: {"long double", 16, 0, 0},
	FloatInt: {"float_int", 8, Float32, 4}, DoubleInt: {"double_int", 16, Float64, 8},
	LongInt: {"long_int", 16, Int64, 8}, TwoInt: {"2int", 8, Int32, 4},
	ShortInt: {"short_int", 8, Int16, 4}, LongDoubleInt: {"long_double_int", 32, LongDouble, 16},
}

func (k Kind) valid() bool { return k > KindNone && k < numKinds }

// Size is the bytes one element of the kind takes in memory (a pair
// kind's padding included).
func (k Kind) Size() int {
	if !k.valid() {
		return 0
	}
	return kindInfo[k].size
}

// Pair reports whether k is a MINLOC/MAXLOC pair kind, and if so the kind
// of its value and the offset of its int index.
func (k Kind) Pair() (val Kind, idx int, ok bool) {
	if !k.valid() || kindInfo[k].val == KindNone {
		return KindNone, 0, false
	}
	return kindInfo[k].val, kindInfo[k].idx, true
}

func (k Kind) String() string {
	if k < numKinds {
		return kindInfo[k].name
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Float reports whether the kind holds floating-point values (complex and
// the floating pair kinds included): the order of combination changes a
// reduction's bits.
func (k Kind) Float() bool {
	switch k {
	case Float32, Float64, Complex64, Complex128, LongDouble, FloatInt, DoubleInt, LongDoubleInt:
		return true
	}
	return false
}

// KindOf returns the kind of Go type T (int and uint as their 64-bit
// kinds, uintptr as Uint64).
func KindOf[T Numeric]() Kind {
	var z T
	switch any(z).(type) {
	case int8:
		return Int8
	case int16:
		return Int16
	case int32:
		return Int32
	case uint8:
		return Uint8
	case uint16:
		return Uint16
	case uint32:
		return Uint32
	case uint64, uint, uintptr:
		return Uint64
	case float32:
		return Float32
	case float64:
		return Float64
	}
	return kindBySize[T]()
}

// kindBySize classifies named types (~int32 and the like) by size,
// signedness and floatness.
func kindBySize[T Numeric]() Kind {
	var z T
	size, float, signed := sizeOf[T](), isFloat[T](), z-1 < 0
	switch {
	case float && size == 4:
		return Float32
	case float:
		return Float64
	}
	kinds := map[int][2]Kind{1: {Uint8, Int8}, 2: {Uint16, Int16}, 4: {Uint32, Int32}, 8: {Uint64, Int64}}
	if signed {
		return kinds[size][1]
	}
	return kinds[size][0]
}
