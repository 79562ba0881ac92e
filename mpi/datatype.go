package mpi

import (
	"fmt"

	"gompi/frameworks/coll"
)

// Datatype is an MPI datatype: a type map, the byte runs of one element
// in the order MPI packs them, with its bounds. It is immutable once made
// (a derived one needs no commit) and safe to share. Values move as the
// packed bytes of their runs, in the machine's byte order.
//
// Bounds follow MPI: Extent is UB-LB, the stride between consecutive
// elements of a count; TrueLB/TrueExtent bound the bytes actually
// touched; Size is the bytes an element packs into.
type Datatype struct {
	name string
	// kind is the predefined kind, KindNone for a derived type; base is
	// the one kind every basic element has (the pair kind for the pair
	// types), KindNone when they differ.
	kind, base coll.Kind
	segs       []seg
	lb, ub     int
	tlb, tub   int
	size       int
	// align is the largest alignment of its basic elements in C, to
	// which TypeStruct rounds its extent up as C pads a struct.
	align int
}

// seg is a run of bytes at an offset from an element's origin.
type seg struct{ off, n int }

// Order is how a Subarray's dimensions are laid out.
type Order int

// Row-major (C) and column-major (Fortran) order.
const (
	OrderC Order = iota
	OrderFortran
)

// basicType is a predefined datatype of one kind, laid out as in C.
func basicType(k coll.Kind, name string) *Datatype {
	d := &Datatype{name: name, kind: k, base: k, lb: 0, ub: k.Size(), tub: k.Size(), size: k.Size(), align: k.Size()}
	d.segs = []seg{{0, k.Size()}}
	if k == coll.Complex64 || k == coll.Complex128 {
		d.align = k.Size() / 2
	}
	if val, idx, ok := k.Pair(); ok {
		d.align = max(4, val.Size())
		d.segs = []seg{{0, val.Size()}, {idx, 4}}
		d.size, d.tub = val.Size()+4, idx+4
		if idx == val.Size() {
			d.segs = []seg{{0, val.Size() + 4}}
		}
	}
	return d
}

// The predefined datatypes, one per coll.Kind (TypeOf returns them by
// kind). TypePacked is raw bytes, as MPI_PACKED and MPI_BYTE.
var (
	TypeInt8          = basicType(coll.Int8, "int8")
	TypeInt16         = basicType(coll.Int16, "int16")
	TypeInt32         = basicType(coll.Int32, "int32")
	TypeInt64         = basicType(coll.Int64, "int64")
	TypeUint8         = basicType(coll.Uint8, "uint8")
	TypeUint16        = basicType(coll.Uint16, "uint16")
	TypeUint32        = basicType(coll.Uint32, "uint32")
	TypeUint64        = basicType(coll.Uint64, "uint64")
	TypeFloat32       = basicType(coll.Float32, "float32")
	TypeFloat64       = basicType(coll.Float64, "float64")
	TypeComplex64     = basicType(coll.Complex64, "complex64")
	TypeComplex128    = basicType(coll.Complex128, "complex128")
	TypeBool          = basicType(coll.Bool, "bool")
	TypeByte          = basicType(coll.Byte, "byte")
	TypeLongDouble    = basicType(coll.LongDouble, "long double")
	TypeFloatInt      = basicType(coll.FloatInt, "float_int")
	TypeDoubleInt     = basicType(coll.DoubleInt, "double_int")
	TypeLongInt       = basicType(coll.LongInt, "long_int")
	TypeTwoInt        = basicType(coll.TwoInt, "2int")
	TypeShortInt      = basicType(coll.ShortInt, "short_int")
	TypeLongDoubleInt = basicType(coll.LongDoubleInt, "long_double_int")
	TypePacked        = basicType(coll.Byte, "packed")
)

var byKind = map[coll.Kind]*Datatype{
	coll.Int8: TypeInt8, coll.Int16: TypeInt16, coll.Int32: TypeInt32, coll.Int64: TypeInt64,
	coll.Uint8: TypeUint8, coll.Uint16: TypeUint16, coll.Uint32: TypeUint32, coll.Uint64: TypeUint64,
	coll.Float32: TypeFloat32, coll.Float64: TypeFloat64, coll.Complex64: TypeComplex64,
	coll.Complex128: TypeComplex128, coll.Bool: TypeBool, coll.Byte: TypeByte,
	coll.LongDouble: TypeLongDouble, coll.FloatInt: TypeFloatInt, coll.DoubleInt: TypeDoubleInt,
	coll.LongInt: TypeLongInt, coll.TwoInt: TypeTwoInt, coll.ShortInt: TypeShortInt,
	coll.LongDoubleInt: TypeLongDoubleInt,
}

// TypeOf returns the predefined datatype of a kind, nil for KindNone.
func TypeOf(k coll.Kind) *Datatype { return byKind[k] }

// TypeFor returns the predefined datatype of Go type T.
func TypeFor[T Numeric]() *Datatype { return byKind[coll.KindOf[T]()] }

// Name is the datatype's name (the kind's for a predefined one).
func (d *Datatype) Name() string { return d.name }

// Kind is the predefined kind, coll.KindNone for a derived datatype.
func (d *Datatype) Kind() coll.Kind { return d.kind }

// BaseKind is the kind every basic element of the datatype has,
// coll.KindNone when they differ: what a predefined reduction combines.
func (d *Datatype) BaseKind() coll.Kind { return d.base }

// Size is the number of bytes one element packs into.
func (d *Datatype) Size() int { return d.size }

// LB is the lower bound; Extent is UB-LB.
func (d *Datatype) LB() int     { return d.lb }
func (d *Datatype) Extent() int { return d.ub - d.lb }

// TrueLB and TrueExtent bound the bytes one element really touches.
func (d *Datatype) TrueLB() int     { return d.tlb }
func (d *Datatype) TrueExtent() int { return d.tub - d.tlb }

// Dense reports whether count elements occupy exactly their packed bytes
// from the origin on (one run, no holes, lower bound 0): then the memory is
// the packed form and nothing is copied.
func (d *Datatype) Dense() bool {
	return d.lb == 0 && d.size == d.ub && len(d.segs) == 1 && d.segs[0].off == 0
}

// Span is the range of bytes, relative to the buffer's origin, that
// count elements touch: what memory a caller holding only an address
// (C) must lend as Buf.Mem, with Base = -lo.
func (d *Datatype) Span(count int) (lo, hi int) {
	if count <= 0 || d.size == 0 {
		return 0, 0
	}
	step := (count - 1) * d.Extent()
	return d.tlb + min(0, step), d.tub + max(0, step)
}

// PackSize is the number of bytes count elements pack into.
func (d *Datatype) PackSize(count int) int { return count * d.size }

func (d *Datatype) String() string { return d.name }

// Dup returns a copy of d with the same type map (MPI_Type_dup).
func (d *Datatype) Dup() *Datatype {
	c := *d
	c.kind = coll.KindNone
	c.name = "dup(" + d.name + ")"
	return &c
}

// block is count consecutive elements of typ at byte displacement disp.
type block struct {
	count, disp int
	typ         *Datatype
}

// build makes the datatype whose type map is the blocks' in order.
func build(name string, blocks []block) (*Datatype, error) {
	d := &Datatype{name: name}
	first, base := true, coll.KindNone
	for i, b := range blocks {
		if b.count < 0 || b.typ == nil {
			return nil, fmt.Errorf("mpi: %s: %w: block %d has count %d or no type", name, ErrArg, i, b.count)
		}
		if b.count == 0 {
			continue
		}
		ext, step := b.typ.Extent(), (b.count-1)*b.typ.Extent()
		lb, ub := b.disp+b.typ.lb+min(0, step), b.disp+b.typ.ub+max(0, step)
		tlb, tub := b.disp+b.typ.tlb+min(0, step), b.disp+b.typ.tub+max(0, step)
		if first {
			d.lb, d.ub, d.tlb, d.tub, base = lb, ub, tlb, tub, b.typ.base
			first = false
		}
		d.lb, d.ub, d.tlb, d.tub = min(d.lb, lb), max(d.ub, ub), min(d.tlb, tlb), max(d.tub, tub)
		if b.typ.base != base {
			base = coll.KindNone
		}
		d.align = max(d.align, b.typ.align)
		d.size += b.count * b.typ.size
		if b.typ.Dense() && b.typ.size == ext {
			d.add(seg{b.disp, b.count * ext})
			continue
		}
		for j := 0; j < b.count; j++ {
			for _, s := range b.typ.segs {
				d.add(seg{b.disp + j*ext + s.off, s.n})
			}
		}
	}
	if d.size == 0 {
		d.tlb, d.tub = d.lb, d.lb
	}
	d.base = base
	return d, nil
}

// add appends a run, merging it with the last when they touch.
func (d *Datatype) add(s seg) {
	if s.n == 0 {
		return
	}
	if k := len(d.segs) - 1; k >= 0 && d.segs[k].off+d.segs[k].n == s.off {
		d.segs[k].n += s.n
		return
	}
	d.segs = append(d.segs, s)
}

// TypeContiguous is count elements of old back to back.
func TypeContiguous(count int, old *Datatype) (*Datatype, error) {
	if old == nil {
		return nil, fmt.Errorf("mpi: contiguous: %w: no type", ErrArg)
	}
	return build(fmt.Sprintf("contiguous(%d,%s)", count, old.name), []block{{count, 0, old}})
}

// TypeVector is count blocks of blocklen elements of old, the blocks
// stride elements of old apart.
func TypeVector(count, blocklen, stride int, old *Datatype) (*Datatype, error) {
	if old == nil {
		return nil, fmt.Errorf("mpi: vector: %w: no type", ErrArg)
	}
	return hvector(fmt.Sprintf("vector(%d,%d,%d,%s)", count, blocklen, stride, old.name), count, blocklen, stride*old.Extent(), old)
}

// TypeHvector is TypeVector with the stride in bytes.
func TypeHvector(count, blocklen, stride int, old *Datatype) (*Datatype, error) {
	if old == nil {
		return nil, fmt.Errorf("mpi: hvector: %w: no type", ErrArg)
	}
	return hvector(fmt.Sprintf("hvector(%d,%d,%d,%s)", count, blocklen, stride, old.name), count, blocklen, stride, old)
}

func hvector(name string, count, blocklen, stride int, old *Datatype) (*Datatype, error) {
	if count < 0 || blocklen < 0 {
		return nil, fmt.Errorf("mpi: %s: %w: negative count", name, ErrArg)
	}
	blocks := make([]block, count)
	for i := range blocks {
		blocks[i] = block{blocklen, i * stride, old}
	}
	return build(name, blocks)
}

// TypeIndexed is blocks of blocklens[i] elements of old at displs[i]
// elements of old.
func TypeIndexed(blocklens, displs []int, old *Datatype) (*Datatype, error) {
	if old == nil {
		return nil, fmt.Errorf("mpi: indexed: %w: no type", ErrArg)
	}
	return hindexed("indexed", blocklens, scale(displs, old.Extent()), old)
}

// TypeHindexed is TypeIndexed with displacements in bytes.
func TypeHindexed(blocklens, displs []int, old *Datatype) (*Datatype, error) {
	return hindexed("hindexed", blocklens, displs, old)
}

// TypeIndexedBlock is TypeIndexed with every block blocklen long.
func TypeIndexedBlock(blocklen int, displs []int, old *Datatype) (*Datatype, error) {
	if old == nil {
		return nil, fmt.Errorf("mpi: indexed_block: %w: no type", ErrArg)
	}
	return hindexed("indexed_block", repeat(blocklen, len(displs)), scale(displs, old.Extent()), old)
}

// TypeHindexedBlock is TypeIndexedBlock with displacements in bytes.
func TypeHindexedBlock(blocklen int, displs []int, old *Datatype) (*Datatype, error) {
	return hindexed("hindexed_block", repeat(blocklen, len(displs)), displs, old)
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func hindexed(name string, blocklens, displs []int, old *Datatype) (*Datatype, error) {
	if len(displs) != len(blocklens) || old == nil {
		return nil, fmt.Errorf("mpi: %s: %w: %d block lengths, %d displacements", name, ErrArg, len(blocklens), len(displs))
	}
	blocks := make([]block, len(blocklens))
	for i := range blocks {
		blocks[i] = block{blocklens[i], displs[i], old}
	}
	return build(name, blocks)
}

// TypeStruct is blocks of blocklens[i] elements of types[i] at byte
// displacements displs[i] (MPI_Type_create_struct).
func TypeStruct(blocklens, displs []int, types []*Datatype) (*Datatype, error) {
	if len(displs) != len(blocklens) || len(types) != len(blocklens) {
		return nil, fmt.Errorf("mpi: struct: %w: %d block lengths, %d displacements, %d types", ErrArg, len(blocklens), len(displs), len(types))
	}
	blocks := make([]block, len(blocklens))
	for i := range blocks {
		blocks[i] = block{blocklens[i], displs[i], types[i]}
	}
	d, err := build("struct", blocks)
	if err != nil {
		return nil, err
	}
	if a := d.align; a > 1 && d.Extent()%a != 0 {
		d.ub += a - d.Extent()%a
	}
	return d, nil
}

// TypeResized is old with lower bound lb and extent extent; the bytes it
// touches are old's.
func TypeResized(old *Datatype, lb, extent int) (*Datatype, error) {
	if old == nil {
		return nil, fmt.Errorf("mpi: resized: %w: no type", ErrArg)
	}
	d := *old
	d.name = fmt.Sprintf("resized(%s,%d,%d)", old.name, lb, extent)
	d.kind, d.lb, d.ub = coll.KindNone, lb, lb+extent
	return &d, nil
}

// TypeSubarray is the subsizes block at starts of an array of sizes
// elements of old, laid out in order; its extent is the whole array's.
func TypeSubarray(sizes, subsizes, starts []int, order Order, old *Datatype) (*Datatype, error) {
	n := len(sizes)
	if n == 0 || len(subsizes) != n || len(starts) != n || old == nil {
		return nil, fmt.Errorf("mpi: subarray: %w: %d sizes, %d subsizes, %d starts", ErrArg, n, len(subsizes), len(starts))
	}
	sz, sub, st := sizes, subsizes, starts
	if order == OrderFortran {
		sz, sub, st = reversed(sizes), reversed(subsizes), reversed(starts)
	}
	total := 1
	for i := range sz {
		if sz[i] <= 0 || sub[i] < 0 || st[i] < 0 || st[i]+sub[i] > sz[i] {
			return nil, fmt.Errorf("mpi: subarray: %w: dimension %d: %d at %d outside %d", ErrArg, i, sub[i], st[i], sz[i])
		}
		total *= sz[i]
	}
	// One block per row of the last (fastest) dimension, in memory order.
	var blocks, rows []block
	idx := make([]int, n-1)
	for i := 0; i < n-1 && len(blocks) == 0; i++ {
		if sub[i] == 0 {
			blocks = []block{} // no row at all
		}
	}
	for blocks == nil {
		off := 0
		for i := 0; i < n; i++ {
			at := st[i]
			if i < n-1 {
				at += idx[i]
			}
			off = off*sz[i] + at
		}
		rows = append(rows, block{sub[n-1], off * old.Extent(), old})
		if !nextIndex(idx, sub[:n-1]) {
			blocks = rows
		}
	}
	d, err := build("subarray", blocks)
	if err != nil {
		return nil, err
	}
	d.lb, d.ub = 0, total*old.Extent()
	return d, nil
}

// nextIndex steps a row-major index within limits; false after the last
// (or when some limit is 0, so there is no row at all).
func nextIndex(idx, limits []int) bool {
	for i := len(idx) - 1; i >= 0; i-- {
		if idx[i]++; idx[i] < limits[i] {
			return true
		}
		idx[i] = 0
	}
	return false
}

func reversed(v []int) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[len(v)-1-i] = x
	}
	return out
}
