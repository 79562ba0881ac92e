package capi

import (
	"errors"
	"testing"
	"unsafe"

	"gompi/mpi"
)

// The C side's fast path and the registry agree on every predefined
// datatype's size, and every predefined handle has MPI's name.
func TestPredefinedSizes(t *testing.T) {
	for h, ct := range predefined {
		if n := cTypeSize(h); n >= 0 && (int(n) != ct.t.Size() || !ct.t.Dense()) {
			t.Errorf("handle %#x (%s): C says %d bytes, Go %d (dense %v)", h, predefinedNames[h], n, ct.t.Size(), ct.t.Dense())
		}
		if predefinedNames[h] == "" {
			t.Errorf("handle %#x has no name", h)
		}
	}
	for h, name := range predefinedNames {
		if predefined[h] == nil {
			t.Errorf("%s (%#x) is named but not mapped", name, h)
		}
	}
	// Every handle C knows a size of is mapped.
	for h := uintptr(0x200); h < 0x300; h++ {
		if cTypeSize(h) >= 0 && predefined[h] == nil {
			t.Errorf("C knows handle %#x, the registry does not", h)
		}
	}
}

func TestConstruct(t *testing.T) {
	i32 := predefined[0x209]
	f64 := predefined[0x214]
	cases := []struct {
		name                       string
		env                        envelope
		size, lb, extent, tlb, tex int
	}{
		{"contiguous", envelope{combContiguous, []int{3}, nil, []*ctype{i32}}, 12, 0, 12, 0, 12},
		{"vector", envelope{combVector, []int{3, 2, 4}, nil, []*ctype{i32}}, 24, 0, 40, 0, 40},
		{"hvector", envelope{combHvector, []int{2, 3}, []int{20}, []*ctype{i32}}, 24, 0, 32, 0, 32},
		{"indexed", envelope{combIndexed, []int{3, 2, 1, 3, 0, 4, 7}, nil, []*ctype{i32}}, 24, 0, 40, 0, 40},
		{"hindexed", envelope{combHindexed, []int{2, 1, 1}, []int{8, 0}, []*ctype{i32}}, 8, 0, 12, 0, 12},
		{"indexed_block", envelope{combIndexedBlock, []int{2, 2, 1, 5}, nil, []*ctype{i32}}, 16, 4, 24, 4, 24},
		{"hindexed_block", envelope{combHindexedBlk, []int{1, 1}, []int{-8}, []*ctype{f64}}, 8, -8, 8, -8, 8},
		{"struct", envelope{combStruct, []int{2, 1, 1}, []int{0, 8}, []*ctype{i32, f64}}, 12, 0, 16, 0, 16},
		{"subarray C", envelope{combSubarray, []int{2, 4, 4, 2, 2, 1, 1, 12}, nil, []*ctype{i32}}, 16, 0, 64, 20, 24},
		{"subarray Fortran", envelope{combSubarray, []int{2, 4, 4, 2, 2, 1, 0, orderFortranABI}, nil, []*ctype{i32}}, 16, 0, 64, 4, 24},
		{"resized", envelope{combResized, nil, []int{-4, 16}, []*ctype{i32}}, 4, -4, 16, 0, 4},
		{"dup", envelope{combDup, nil, nil, []*ctype{f64}}, 8, 0, 8, 0, 8},
	}
	for _, c := range cases {
		if !envelopeOK(c.env) {
			t.Errorf("%s: envelope refused", c.name)
			continue
		}
		d, err := construct(c.env)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		got := [5]int{d.Size(), d.LB(), d.Extent(), d.TrueLB(), d.TrueExtent()}
		if want := [5]int{c.size, c.lb, c.extent, c.tlb, c.tex}; got != want {
			t.Errorf("%s: size, lb, extent, true lb, true extent = %v, want %v", c.name, got, want)
		}
	}
}

// Envelopes whose arrays do not fit their combiner are refused before
// construct indexes them.
func TestEnvelopeRefused(t *testing.T) {
	i32 := predefined[0x209]
	for _, e := range []envelope{
		{combContiguous, nil, nil, []*ctype{i32}},
		{combVector, []int{1, 1}, nil, []*ctype{i32}},
		{combIndexed, []int{2, 1, 1, 0}, nil, []*ctype{i32}},
		{combHindexed, []int{-1}, nil, []*ctype{i32}},
		{combStruct, []int{2, 1, 1}, []int{0, 4}, []*ctype{i32}},
		{combSubarray, []int{0, 12}, nil, []*ctype{i32}},
		{combResized, nil, []int{0}, []*ctype{i32}},
		{combNamed, nil, nil, nil},
		{999, nil, nil, nil},
	} {
		if envelopeOK(e) {
			t.Errorf("envelope %+v accepted", e)
		}
	}
	if _, err := construct(envelope{combiner: 999}); !errors.Is(err, errUnsupported) {
		t.Errorf("unknown combiner: %v", err)
	}
}

// cbuf lends the bytes count elements touch, addressed from the origin.
func TestCbuf(t *testing.T) {
	mem := make([]int32, 16)
	for i := range mem {
		mem[i] = int32(i)
	}
	vec, err := mpi.TypeVector(2, 1, 3, mpi.TypeInt32)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := mpi.TypeResized(vec, -4, 8)
	if err != nil {
		t.Fatal(err)
	}
	b := cbuf(unsafePtr(&mem[1]), 3, rs)
	out := make([]byte, rs.PackSize(3))
	if _, err := mpi.Pack(b, out, 0); err != nil {
		t.Fatal(err)
	}
	want := []int32{1, 4, 3, 6, 5, 8}
	for i, w := range want {
		if got := int32(out[4*i]); got != w {
			t.Errorf("packed element %d = %d, want %d", i, got, w)
		}
	}
	if e := cbuf(nil, 0, rs); len(e.Mem) != 0 || e.Count != 0 {
		t.Errorf("empty cbuf: %+v", e)
	}
}

func unsafePtr(p *int32) unsafe.Pointer { return unsafe.Pointer(p) }

// MPI_Get_elements' count: whole elements, then the basic elements a
// partial one completes.
func TestElements(t *testing.T) {
	i32, f64 := predefined[0x209], predefined[0x214]
	vec := &ctype{env: envelope{combVector, []int{3, 2, 4}, nil, []*ctype{i32}}}
	st := &ctype{env: envelope{combStruct, []int{2, 1, 2}, []int{0, 8}, []*ctype{i32, f64}}}
	outer := &ctype{env: envelope{combContiguous, []int{2}, nil, []*ctype{st}}}
	for _, c := range []*ctype{vec, st, outer} {
		var err error
		if c.t, err = construct(c.env); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		t     *ctype
		bytes int
		want  int
	}{
		{"vector whole", vec, 48, 12},
		{"vector partial", vec, 30, 7},
		{"struct int only", st, 4, 1},
		{"struct int and a double", st, 12, 2},
		{"struct whole", st, 20, 3},
		{"struct one and a half", st, 20 + 13, 5},
		{"nested", outer, 40 + 4, 7},
		{"double_int", predefined[0x229], 12 + 8, 3},
		{"int", i32, 12, 3},
	} {
		if got := elementsIn(c.t, c.bytes); got != c.want {
			t.Errorf("%s: %d bytes hold %d elements, want %d", c.name, c.bytes, got, c.want)
		}
	}
}

// A freed derived type's handle is given to the next type made, the
// smallest freed first.
func TestHandleReuse(t *testing.T) {
	mk := func() uintptr { return uintptr(newType(&ctype{t: mpi.TypeInt32})) }
	a, b, c := mk(), mk(), mk()
	for _, h := range []uintptr{c, a} {
		x := cUintptr(h)
		if rc := gompi_go_type_free(&x); rc != 0 {
			t.Fatalf("free %#x: %d", h, rc)
		}
	}
	if got := mk(); got != a {
		t.Errorf("after freeing %#x and %#x got %#x, want %#x", c, a, got, a)
	}
	if got := mk(); got != c {
		t.Errorf("then %#x, want %#x", got, c)
	}
	if got := mk(); got <= c || got == b {
		t.Errorf("then %#x, want a new handle", got)
	}
}
