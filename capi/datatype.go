package capi

/*
#include "gompi.h"
*/
import "C"

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"gompi/mpi"
)

// Datatypes in C. Every predefined C datatype handle of mpi.h maps to one
// of package mpi's Datatypes (predefined below); a derived one lives in
// types under GOMPI_HANDLE(GOMPI_KIND_TYPE, n), n its creation number.
// Each C datatype keeps the constructor call that made it (its envelope),
// which is what MPI_Type_get_envelope/get_contents return and from which
// mpi.Datatype is built: one function, construct, turns an envelope into
// a type map, so the two can never disagree.
//
// Every call taking (buffer, count, datatype) converts through dtypeOf and
// cbuf (or cbufOf, both at once): nothing else knows the registry's layout.

// MPI_COMBINER_* of mpi.h: what made a datatype.
const (
	combNamed        = 101
	combDup          = 102
	combContiguous   = 103
	combVector       = 104
	combHvector      = 105
	combIndexed      = 106
	combHindexed     = 107
	combIndexedBlock = 108
	combHindexedBlk  = 109
	combStruct       = 110
	combSubarray     = 111
	combResized      = 116
	orderFortranABI  = 15 // MPI_ORDER_FORTRAN
	kindType         = 3  // GOMPI_KIND_TYPE
	datatypeNull     = 0x200
	errCount         = 2
	errBuffer        = 1
)

// envelope is a datatype's constructor call as MPI_Type_get_contents
// lays it out: integers, addresses (byte displacements, strides, bounds)
// and the datatypes it was made of.
type envelope struct {
	combiner int
	ints     []int
	addrs    []int
	olds     []*ctype
}

// ctype is a C datatype: package mpi's type map, how it was made, and the
// handle that names it in C (each predefined one has its fixed handle).
type ctype struct {
	t         *mpi.Datatype
	env       envelope
	handle    uintptr
	committed bool
}

// predefined maps each predefined datatype handle of mpi.h to its type,
// with the name MPI gives it (Type_get_name). Sizes are LP64's, as the
// C side's gompi_type_size has them (a test compares the two).
var predefined = func() map[uintptr]*ctype {
	pair := func(n int, old *mpi.Datatype) *mpi.Datatype {
		t, err := mpi.TypeContiguous(n, old)
		if err != nil {
			panic(err)
		}
		return t
	}
	m := map[uintptr]*ctype{}
	for _, p := range []struct {
		h uintptr
		t *mpi.Datatype
	}{
		{0x201, mpi.TypeInt64}, {0x202, mpi.TypeInt64}, {0x203, mpi.TypeInt64}, // AINT, COUNT, OFFSET
		{0x207, mpi.TypePacked},
		{0x208, mpi.TypeInt16}, {0x209, mpi.TypeInt32}, {0x20a, mpi.TypeInt64}, {0x20b, mpi.TypeInt64},
		{0x20c, mpi.TypeUint16}, {0x20d, mpi.TypeUint32}, {0x20e, mpi.TypeUint64}, {0x20f, mpi.TypeUint64},
		{0x210, mpi.TypeFloat32}, {0x212, mpi.TypeComplex64}, {0x213, mpi.TypeComplex64},
		{0x214, mpi.TypeFloat64}, {0x216, mpi.TypeComplex128}, {0x217, mpi.TypeComplex128},
		// Fortran's, as gfortran lays them out by default.
		{0x218, mpi.TypeInt32}, {0x219, mpi.TypeInt32}, {0x21a, mpi.TypeFloat32}, {0x21b, mpi.TypeComplex64},
		{0x21c, mpi.TypeFloat64}, {0x21d, mpi.TypeComplex128}, {0x21e, mpi.TypeUint8},
		{0x220, mpi.TypeLongDouble}, {0x224, pair(2, mpi.TypeLongDouble)}, {0x225, pair(2, mpi.TypeLongDouble)},
		{0x228, mpi.TypeFloatInt}, {0x229, mpi.TypeDoubleInt}, {0x22a, mpi.TypeLongInt}, {0x22b, mpi.TypeTwoInt},
		{0x22c, mpi.TypeShortInt}, {0x22d, mpi.TypeLongDoubleInt},
		{0x230, pair(2, mpi.TypeFloat32)}, {0x231, pair(2, mpi.TypeFloat64)}, {0x232, pair(2, mpi.TypeInt32)},
		{0x238, mpi.TypeBool}, {0x239, mpi.TypeBool}, {0x23c, mpi.TypeInt32}, // C_BOOL, CXX_BOOL, WCHAR
		{0x240, mpi.TypeInt8}, {0x241, mpi.TypeUint8}, {0x243, mpi.TypeInt8}, {0x244, mpi.TypeInt8},
		{0x245, mpi.TypeUint8}, {0x247, mpi.TypeByte},
		{0x248, mpi.TypeInt16}, {0x249, mpi.TypeUint16}, {0x250, mpi.TypeInt32}, {0x251, mpi.TypeUint32},
		{0x258, mpi.TypeInt64}, {0x259, mpi.TypeUint64},
		{0x2c0, mpi.TypeUint8}, {0x2c1, mpi.TypeInt8}, {0x2c8, mpi.TypeUint16}, {0x2c9, mpi.TypeInt16},
		{0x2d0, mpi.TypeUint32}, {0x2d1, mpi.TypeInt32}, {0x2d2, mpi.TypeFloat32},
		{0x2d8, mpi.TypeUint64}, {0x2d9, mpi.TypeInt64}, {0x2da, mpi.TypeFloat64}, {0x2db, mpi.TypeComplex64},
		{0x2e3, mpi.TypeComplex128}, // COMPLEXn is n bytes: two REALn/2
		// Kinds Go has no arithmetic for: moved as bytes of their size
		// (REAL16 as x86's long double, as gfortran's quad is not).
		{0x2ca, mpi.TypeUint16}, {0x2d3, pair(2, mpi.TypeUint16)}, {0x2e0, pair(2, mpi.TypeUint64)},
		{0x2e1, pair(2, mpi.TypeInt64)}, {0x2e2, mpi.TypeLongDouble}, {0x2eb, pair(2, mpi.TypeLongDouble)},
	} {
		m[p.h] = &ctype{t: p.t, env: envelope{combiner: combNamed}, handle: p.h, committed: true}
	}
	return m
}()

// predefinedNames are the names MPI_Type_get_name gives the predefined
// datatypes; of two names of one handle, the one MPICH's tests accept
// (MPI_LONG_LONG_INT, MPI_C_COMPLEX).
var predefinedNames = map[uintptr]string{
	0x201: "MPI_AINT", 0x202: "MPI_COUNT", 0x203: "MPI_OFFSET", 0x207: "MPI_PACKED",
	0x208: "MPI_SHORT", 0x209: "MPI_INT", 0x20a: "MPI_LONG", 0x20b: "MPI_LONG_LONG_INT",
	0x20c: "MPI_UNSIGNED_SHORT", 0x20d: "MPI_UNSIGNED", 0x20e: "MPI_UNSIGNED_LONG",
	0x20f: "MPI_UNSIGNED_LONG_LONG", 0x210: "MPI_FLOAT", 0x212: "MPI_C_COMPLEX",
	0x213: "MPI_CXX_FLOAT_COMPLEX", 0x214: "MPI_DOUBLE", 0x216: "MPI_C_DOUBLE_COMPLEX",
	0x217: "MPI_CXX_DOUBLE_COMPLEX", 0x218: "MPI_LOGICAL", 0x219: "MPI_INTEGER", 0x21a: "MPI_REAL",
	0x21b: "MPI_COMPLEX", 0x21c: "MPI_DOUBLE_PRECISION", 0x21d: "MPI_DOUBLE_COMPLEX",
	0x21e: "MPI_CHARACTER", 0x220: "MPI_LONG_DOUBLE", 0x224: "MPI_C_LONG_DOUBLE_COMPLEX",
	0x225: "MPI_CXX_LONG_DOUBLE_COMPLEX", 0x228: "MPI_FLOAT_INT", 0x229: "MPI_DOUBLE_INT",
	0x22a: "MPI_LONG_INT", 0x22b: "MPI_2INT", 0x22c: "MPI_SHORT_INT", 0x22d: "MPI_LONG_DOUBLE_INT",
	0x230: "MPI_2REAL", 0x231: "MPI_2DOUBLE_PRECISION", 0x232: "MPI_2INTEGER", 0x238: "MPI_C_BOOL",
	0x239: "MPI_CXX_BOOL", 0x23c: "MPI_WCHAR", 0x240: "MPI_INT8_T", 0x241: "MPI_UINT8_T",
	0x243: "MPI_CHAR", 0x244: "MPI_SIGNED_CHAR", 0x245: "MPI_UNSIGNED_CHAR", 0x247: "MPI_BYTE",
	0x248: "MPI_INT16_T", 0x249: "MPI_UINT16_T", 0x250: "MPI_INT32_T", 0x251: "MPI_UINT32_T",
	0x258: "MPI_INT64_T", 0x259: "MPI_UINT64_T", 0x2c0: "MPI_LOGICAL1", 0x2c1: "MPI_INTEGER1",
	0x2c8: "MPI_LOGICAL2", 0x2c9: "MPI_INTEGER2", 0x2d0: "MPI_LOGICAL4", 0x2d1: "MPI_INTEGER4",
	0x2d2: "MPI_REAL4", 0x2d8: "MPI_LOGICAL8", 0x2d9: "MPI_INTEGER8",
	0x2da: "MPI_REAL8", 0x2db: "MPI_COMPLEX8", 0x2e3: "MPI_COMPLEX16", 0x2ca: "MPI_REAL2", 0x2d3: "MPI_COMPLEX4",
	0x2e0: "MPI_LOGICAL16", 0x2e1: "MPI_INTEGER16", 0x2e2: "MPI_REAL16", 0x2eb: "MPI_COMPLEX32",
}

// types holds the derived datatypes C has handles to, and every
// datatype's name set by MPI_Type_set_name. A freed handle leaves the
// table; what still uses its type (a pending request, a type built on
// it) holds the *mpi.Datatype itself.
//
// A freed handle's number is given again, the smallest first, as MPICH
// and Open MPI give a freed type's handle to the next type made (MPICH's
// tests rely on it): handles stay a function of the calls made.
var types = struct {
	mu    sync.Mutex
	m     map[uintptr]*ctype
	names map[uintptr]string
	next  uint64
	freed []uint64
}{m: map[uintptr]*ctype{}, names: map[uintptr]string{}}

// ctypeOf returns the C datatype behind a handle, nil if there is none.
func ctypeOf(h C.uintptr_t) *ctype {
	if t := predefined[uintptr(h)]; t != nil {
		return t
	}
	types.mu.Lock()
	defer types.mu.Unlock()
	return types.m[uintptr(h)]
}

// dtypeOf returns package mpi's datatype behind a C handle, predefined or
// derived, or the error code MPI_ERR_TYPE.
func dtypeOf(h C.uintptr_t) (*mpi.Datatype, C.int) {
	if t := ctypeOf(h); t != nil {
		return t.t, 0
	}
	return nil, errType
}

// cbuf lends count elements of dt at C address p as a Buf: Mem covers
// dt.Span(count) around p, Base = -lo. p may be MPI_BOTTOM (nil) when the
// type's displacements are absolute addresses (MPI_Get_address).
func cbuf(p unsafe.Pointer, count int, dt *mpi.Datatype) mpi.Buf {
	lo, hi := dt.Span(count)
	b := mpi.Buf{Mem: []byte{}, Base: -lo, Count: count, Type: dt}
	if hi > lo {
		b.Mem = unsafe.Slice((*byte)(unsafe.Add(p, lo)), hi-lo)
	}
	return b
}

// cbufOf is dtypeOf and cbuf at once: count elements of the datatype
// behind handle h at p, or MPI_ERR_TYPE / MPI_ERR_COUNT.
func cbufOf(p unsafe.Pointer, count C.int64_t, h C.uintptr_t) (mpi.Buf, C.int) {
	dt, rc := dtypeOf(h)
	if rc != 0 {
		return mpi.Buf{}, rc
	}
	if count < 0 {
		return mpi.Buf{}, errCount
	}
	return cbuf(p, int(count), dt), 0
}

// newType files a derived datatype and returns its handle.
func newType(t *ctype) C.uintptr_t {
	types.mu.Lock()
	defer types.mu.Unlock()
	id := types.next + 1
	if n := len(types.freed); n > 0 {
		i := slices.Index(types.freed, slices.Min(types.freed))
		id = types.freed[i]
		types.freed[i] = types.freed[n-1]
		types.freed = types.freed[:n-1]
	} else {
		types.next = id
	}
	t.handle = handleOf(kindType, id)
	types.m[t.handle] = t
	return C.uintptr_t(t.handle)
}

// construct builds the type map an envelope describes.
func construct(e envelope) (*mpi.Datatype, error) {
	olds := make([]*mpi.Datatype, len(e.olds))
	for i, o := range e.olds {
		olds[i] = o.t
	}
	in, ad := e.ints, e.addrs
	switch e.combiner {
	case combDup:
		return olds[0].Dup(), nil
	case combContiguous:
		return mpi.TypeContiguous(in[0], olds[0])
	case combVector:
		return mpi.TypeVector(in[0], in[1], in[2], olds[0])
	case combHvector:
		return mpi.TypeHvector(in[0], in[1], ad[0], olds[0])
	case combIndexed:
		return mpi.TypeIndexed(in[1:1+in[0]], in[1+in[0]:], olds[0])
	case combHindexed:
		return mpi.TypeHindexed(in[1:], ad, olds[0])
	case combIndexedBlock:
		return mpi.TypeIndexedBlock(in[1], in[2:], olds[0])
	case combHindexedBlk:
		return mpi.TypeHindexedBlock(in[1], ad, olds[0])
	case combStruct:
		return mpi.TypeStruct(in[1:], ad, olds)
	case combSubarray:
		n := in[0]
		order := mpi.OrderC
		if in[1+3*n] == orderFortranABI {
			order = mpi.OrderFortran
		}
		return mpi.TypeSubarray(in[1:1+n], in[1+n:1+2*n], in[1+2*n:1+3*n], order, olds[0])
	case combResized:
		return mpi.TypeResized(olds[0], ad[0], ad[1])
	}
	return nil, fmt.Errorf("datatype combiner %d: %w", e.combiner, errUnsupported)
}

// envelopeOK checks that an envelope's arrays have the lengths its
// combiner's get_contents layout has, so construct cannot index out of
// them.
func envelopeOK(e envelope) bool {
	ni, na, nt := len(e.ints), len(e.addrs), len(e.olds)
	n := -1
	if ni > 0 {
		n = e.ints[0]
	}
	switch e.combiner {
	case combDup:
		return ni == 0 && na == 0 && nt == 1
	case combContiguous:
		return ni == 1 && na == 0 && nt == 1
	case combVector:
		return ni == 3 && na == 0 && nt == 1
	case combHvector:
		return ni == 2 && na == 1 && nt == 1
	case combIndexed:
		return n >= 0 && ni == 1+2*n && na == 0 && nt == 1
	case combHindexed:
		return n >= 0 && ni == 1+n && na == n && nt == 1
	case combIndexedBlock:
		return n >= 0 && ni == 2+n && na == 0 && nt == 1
	case combHindexedBlk:
		return n >= 0 && ni == 2 && na == n && nt == 1
	case combStruct:
		return n >= 0 && ni == 1+n && na == n && nt == n
	case combSubarray:
		return n > 0 && ni == 2+3*n && na == 0 && nt == 1
	case combResized:
		return ni == 0 && na == 2 && nt == 1
	}
	return false
}

// gompi_go_type_new makes a derived datatype from its constructor's
// arguments, laid out as MPI_Type_get_contents returns them: ni integers,
// na addresses and nt datatype handles.
//
//export gompi_go_type_new
func gompi_go_type_new(combiner C.int, ni C.int, ints *C.int64_t, na C.int, addrs *C.int64_t, nt C.int,
	olds *C.uintptr_t, out *C.uintptr_t) C.int {
	e := envelope{combiner: int(combiner), ints: int64s(ints, int(ni)), addrs: int64s(addrs, int(na))}
	for _, h := range unsafe.Slice(olds, int(nt)) {
		t := ctypeOf(h)
		if t == nil {
			return errType
		}
		e.olds = append(e.olds, t)
	}
	if !envelopeOK(e) {
		return errArg
	}
	dt, err := construct(e)
	if err != nil {
		return code(err)
	}
	*out = newType(&ctype{t: dt, env: e})
	return 0
}

// int64s copies n C int64s at p.
func int64s(p *C.int64_t, n int) []int {
	out := make([]int, n)
	if n > 0 {
		for i, v := range unsafe.Slice(p, n) {
			out[i] = int(v)
		}
	}
	return out
}

//export gompi_go_type_commit
func gompi_go_type_commit(h C.uintptr_t) C.int {
	t := ctypeOf(h)
	if t == nil {
		return errType
	}
	types.mu.Lock()
	t.committed = true
	types.mu.Unlock()
	return 0
}

// gompi_go_type_free frees a derived datatype's handle; freeing a
// predefined one is an error. Operations pending on it go on: they hold
// its type map.
//
//export gompi_go_type_free
func gompi_go_type_free(h *C.uintptr_t) C.int {
	if predefined[uintptr(*h)] != nil {
		return errType
	}
	types.mu.Lock()
	defer types.mu.Unlock()
	if _, ok := types.m[uintptr(*h)]; !ok {
		return errType
	}
	delete(types.m, uintptr(*h))
	delete(types.names, uintptr(*h))
	types.freed = append(types.freed, uint64((uintptr(*h)-handleBase)>>4))
	*h = datatypeNull
	return 0
}

// gompi_go_type_info reports a datatype's size, bounds and true bounds.
//
//export gompi_go_type_info
func gompi_go_type_info(h C.uintptr_t, size, lb, extent, tlb, textent *C.int64_t) C.int {
	dt, rc := dtypeOf(h)
	if rc != 0 {
		return rc
	}
	*size, *lb, *extent = C.int64_t(dt.Size()), C.int64_t(dt.LB()), C.int64_t(dt.Extent())
	*tlb, *textent = C.int64_t(dt.TrueLB()), C.int64_t(dt.TrueExtent())
	return 0
}

// gompi_go_type_name copies a datatype's name (at most MPI_MAX_OBJECT_NAME-1
// bytes) into buf: the one set, else MPI's for a predefined type, else "".
//
//export gompi_go_type_name
func gompi_go_type_name(h C.uintptr_t, buf *C.char, max C.int, n *C.int) C.int {
	if ctypeOf(h) == nil {
		return errType
	}
	types.mu.Lock()
	name, ok := types.names[uintptr(h)]
	types.mu.Unlock()
	if !ok {
		name = predefinedNames[uintptr(h)]
	}
	name = name[:min(len(name), int(max)-1)]
	out := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(max))
	copy(out, name)
	out[len(name)] = 0
	*n = C.int(len(name))
	return 0
}

//export gompi_go_type_set_name
func gompi_go_type_set_name(h C.uintptr_t, name *C.char) C.int {
	if ctypeOf(h) == nil {
		return errType
	}
	types.mu.Lock()
	types.names[uintptr(h)] = C.GoString(name)
	types.mu.Unlock()
	return 0
}

// gompi_go_type_envelope reports how a datatype was made: its combiner
// and how many integers, addresses and datatypes get_contents returns.
//
//export gompi_go_type_envelope
func gompi_go_type_envelope(h C.uintptr_t, ni, na, nt, combiner *C.int64_t) C.int {
	t := ctypeOf(h)
	if t == nil {
		return errType
	}
	*ni, *na, *nt = C.int64_t(len(t.env.ints)), C.int64_t(len(t.env.addrs)), C.int64_t(len(t.env.olds))
	*combiner = C.int64_t(t.env.combiner)
	return 0
}

// gompi_go_type_contents returns a derived datatype's constructor
// arguments. A derived datatype among them comes back as a new handle
// (the caller frees it, as MPI says); a predefined one as itself.
//
//export gompi_go_type_contents
func gompi_go_type_contents(h C.uintptr_t, maxi, maxa, maxt C.int64_t, ints *C.int64_t, addrs *C.int64_t,
	olds *C.uintptr_t) C.int {
	t := ctypeOf(h)
	switch {
	case t == nil:
		return errType
	case t.env.combiner == combNamed:
		return errArg
	case int(maxi) < len(t.env.ints) || int(maxa) < len(t.env.addrs) || int(maxt) < len(t.env.olds):
		return errArg
	}
	for i, v := range t.env.ints {
		unsafe.Slice(ints, len(t.env.ints))[i] = C.int64_t(v)
	}
	for i, v := range t.env.addrs {
		unsafe.Slice(addrs, len(t.env.addrs))[i] = C.int64_t(v)
	}
	for i, o := range t.env.olds {
		h := C.uintptr_t(o.handle)
		if o.env.combiner != combNamed {
			h = newType(&ctype{t: o.t, env: o.env, committed: o.committed})
		}
		unsafe.Slice(olds, len(t.env.olds))[i] = h
	}
	return 0
}

// cTypeSize is the C side's size of a predefined datatype handle (-1 for
// one C leaves to Go): what a test compares with the registry.
func cTypeSize(h uintptr) int64 { return int64(C.gompi_type_size_of(C.uintptr_t(h))) }

// gompi_go_pack packs count elements of dt at in into out (size bytes)
// at *pos, advancing it (MPI_Pack).
//
//export gompi_go_pack
func gompi_go_pack(in unsafe.Pointer, count C.int64_t, dt C.uintptr_t, out unsafe.Pointer, size C.int64_t, pos *C.int64_t) C.int {
	b, rc := cbufOf(in, count, dt)
	if rc != 0 {
		return rc
	}
	p, err := mpi.Pack(b, bytes(out, size), int(*pos))
	if err != nil {
		return code(err)
	}
	*pos = C.int64_t(p)
	return 0
}

// gompi_go_unpack unpacks count elements of dt from in (size bytes) at
// *pos into out, advancing *pos (MPI_Unpack).
//
//export gompi_go_unpack
func gompi_go_unpack(in unsafe.Pointer, size C.int64_t, pos *C.int64_t, out unsafe.Pointer, count C.int64_t, dt C.uintptr_t) C.int {
	b, rc := cbufOf(out, count, dt)
	if rc != 0 {
		return rc
	}
	p, err := mpi.Unpack(bytes(in, size), int(*pos), b)
	if err != nil {
		return code(err)
	}
	*pos = C.int64_t(p)
	return 0
}

// gompi_go_type_elements counts the basic elements in n packed bytes of
// datatype h (MPI_Get_elements): whole elements of h and, of a partial
// one, the basic elements its first bytes complete.
//
//export gompi_go_type_elements
func gompi_go_type_elements(h C.uintptr_t, n C.int64_t, out *C.int64_t) C.int {
	t := ctypeOf(h)
	if t == nil {
		return errType
	}
	*out = C.int64_t(elementsIn(t, int(n)))
	return 0
}

// elementsIn is how many basic elements n packed bytes of t hold.
func elementsIn(t *ctype, n int) int {
	size := t.t.Size()
	if size == 0 {
		return 0
	}
	return n/size*basicCount(t) + partial(t, n%size)
}

// part is a run of reps consecutive elements of one type in a datatype's
// type map, in packing order.
type part struct {
	t    *ctype
	reps int
}

// parts is t's type map as runs of its constituent types; nil for a
// predefined type.
func parts(t *ctype) []part {
	e := t.env
	in := e.ints
	switch e.combiner {
	case combDup, combResized:
		return []part{{e.olds[0], 1}}
	case combContiguous:
		return []part{{e.olds[0], in[0]}}
	case combVector, combHvector, combIndexedBlock, combHindexedBlk:
		return []part{{e.olds[0], in[0] * in[1]}}
	case combIndexed, combHindexed:
		return []part{{e.olds[0], sum(in[1 : 1+in[0]])}}
	case combSubarray:
		n := in[0]
		return []part{{e.olds[0], product(in[1+n : 1+2*n])}}
	case combStruct:
		ps := make([]part, len(e.olds))
		for i, o := range e.olds {
			ps[i] = part{o, in[1+i]}
		}
		return ps
	}
	return nil
}

// basicCount is the number of basic elements in one element of t: a pair
// type (MPI_DOUBLE_INT...) holds two.
func basicCount(t *ctype) int {
	if t.env.combiner == combNamed {
		if _, _, ok := t.t.Kind().Pair(); ok {
			return 2
		}
		return 1
	}
	n := 0
	for _, p := range parts(t) {
		n += p.reps * basicCount(p.t)
	}
	return n
}

// partial is how many basic elements the first n (< size) packed bytes of
// one element of t complete.
func partial(t *ctype, n int) int {
	if t.env.combiner == combNamed {
		if val, _, ok := t.t.Kind().Pair(); ok && n >= val.Size() {
			return 1
		}
		return 0
	}
	count := 0
	for _, p := range parts(t) {
		size := p.t.t.Size()
		if size == 0 {
			continue
		}
		if n < p.reps*size {
			return count + n/size*basicCount(p.t) + partial(p.t, n%size)
		}
		count += p.reps * basicCount(p.t)
		n -= p.reps * size
	}
	return count
}

func sum(v []int) int {
	s := 0
	for _, x := range v {
		s += x
	}
	return s
}

func product(v []int) int {
	p := 1
	for _, x := range v {
		p *= x
	}
	return p
}

// cUintptr converts a handle for tests, which cannot name C types.
type cUintptr = C.uintptr_t
