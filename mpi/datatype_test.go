package mpi_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"gompi/frameworks/coll"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

func must(t testing.TB) func(*mpi.Datatype, error) *mpi.Datatype {
	return func(d *mpi.Datatype, err error) *mpi.Datatype {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
}

// offsets returns, byte by byte, the memory offsets count elements of d
// pack from (origin at 0): the type map flattened, in packing order.
func offsets(t *testing.T, d *mpi.Datatype, count int) []int {
	t.Helper()
	lo, hi := d.Span(count)
	mem := make([]byte, hi-lo)
	for i := range mem {
		mem[i] = byte(i)
	}
	out, err := mpi.Buf{Mem: mem, Base: -lo, Count: count, Type: d}.Packed()
	if err != nil {
		t.Fatal(err)
	}
	offs := make([]int, len(out))
	for i, b := range out {
		offs[i] = int(b) + lo
	}
	return offs
}

func run(lo, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = lo + i
	}
	return out
}

func cat(vs ...[]int) []int {
	var out []int
	for _, v := range vs {
		out = append(out, v...)
	}
	return out
}

// TestDatatypeLayouts checks each constructor's bounds, size and packing
// order against layouts computed by hand.
func TestDatatypeLayouts(t *testing.T) {
	m := must(t)
	i32, f64 := mpi.TypeInt32, mpi.TypeFloat64
	vec := m(mpi.TypeVector(3, 2, 4, i32)) // ints 0,1, 4,5, 8,9
	resized := m(mpi.TypeResized(i32, -4, 12))
	cases := []struct {
		name               string
		d                  *mpi.Datatype
		count              int
		lb, ext, tlb, text int
		size               int
		dense              bool
		offs               []int
	}{
		{"int32", i32, 2, 0, 4, 0, 4, 4, true, run(0, 8)},
		{"contiguous", m(mpi.TypeContiguous(3, f64)), 1, 0, 24, 0, 24, 24, true, run(0, 24)},
		{"vector", vec, 1, 0, 40, 0, 40, 24, false, cat(run(0, 8), run(16, 8), run(32, 8))},
		{"vector x2", vec, 2, 0, 40, 0, 40, 24, false, cat(run(0, 8), run(16, 8), run(32, 8), run(40, 8), run(56, 8), run(72, 8))},
		{"hvector", m(mpi.TypeHvector(2, 1, 6, mpi.TypeInt16)), 1, 0, 8, 0, 8, 4, false, cat(run(0, 2), run(6, 2))},
		{"negative stride", m(mpi.TypeHvector(2, 1, -8, i32)), 1, -8, 12, -8, 12, 8, false, cat(run(0, 4), run(-8, 4))},
		{"indexed", m(mpi.TypeIndexed([]int{2, 1}, []int{3, 0}, i32)), 1, 0, 20, 0, 20, 12, false, cat(run(12, 8), run(0, 4))},
		{"hindexed", m(mpi.TypeHindexed([]int{1, 1}, []int{5, 1}, mpi.TypeInt8)), 1, 1, 5, 1, 5, 2, false, []int{5, 1}},
		{"indexed_block", m(mpi.TypeIndexedBlock(2, []int{4, 0}, mpi.TypeInt16)), 1, 0, 12, 0, 12, 8, false, cat(run(8, 4), run(0, 4))},
		{"hindexed_block", m(mpi.TypeHindexedBlock(1, []int{2, 10}, mpi.TypeInt16)), 1, 2, 10, 2, 10, 4, false, cat(run(2, 2), run(10, 2))},
		{"struct", m(mpi.TypeStruct([]int{1, 2}, []int{0, 8}, []*mpi.Datatype{mpi.TypeInt8, f64})), 1, 0, 24, 0, 24, 17, false, cat(run(0, 1), run(8, 16))},
		// C pads a struct to its strictest member: double then char is 16 wide.
		{"struct padded", m(mpi.TypeStruct([]int{1, 1}, []int{0, 8}, []*mpi.Datatype{f64, mpi.TypeInt8})), 1, 0, 16, 0, 9, 9, false, run(0, 9)},
		{"resized", resized, 2, -4, 12, 0, 4, 4, false, cat(run(0, 4), run(12, 4))},
		{"resized in contiguous", m(mpi.TypeContiguous(2, resized)), 1, -4, 24, 0, 16, 8, false, cat(run(0, 4), run(12, 4))},
		{"double_int", mpi.TypeDoubleInt, 2, 0, 16, 0, 12, 12, false, cat(run(0, 12), run(16, 12))},
		{"short_int", mpi.TypeShortInt, 1, 0, 8, 0, 8, 6, false, cat(run(0, 2), run(4, 4))},
		{"2int", mpi.TypeTwoInt, 1, 0, 8, 0, 8, 8, true, run(0, 8)},
		// A 4x5 int8 array (C order), the 2x3 block at (1,2): rows at 7 and 12.
		{"subarray C", m(mpi.TypeSubarray([]int{4, 5}, []int{2, 3}, []int{1, 2}, mpi.OrderC, mpi.TypeInt8)), 1, 0, 20, 7, 8, 6, false, cat(run(7, 3), run(12, 3))},
		// The same in Fortran order: columns of 4, the 2x3 block at (1,2) is
		// rows 1..2 of columns 2..4: 9,10, 13,14, 17,18.
		{"subarray Fortran", m(mpi.TypeSubarray([]int{4, 5}, []int{2, 3}, []int{1, 2}, mpi.OrderFortran, mpi.TypeInt8)), 1, 0, 20, 9, 10, 6, false, cat(run(9, 2), run(13, 2), run(17, 2))},
		{"subarray 3d", m(mpi.TypeSubarray([]int{2, 2, 2}, []int{2, 1, 1}, []int{0, 1, 0}, mpi.OrderC, mpi.TypeInt8)), 1, 0, 8, 2, 5, 2, false, []int{2, 6}},
		{"empty", m(mpi.TypeContiguous(0, i32)), 3, 0, 0, 0, 0, 0, false, nil},
		{"dup", vec.Dup(), 1, 0, 40, 0, 40, 24, false, cat(run(0, 8), run(16, 8), run(32, 8))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := c.d
			got := []int{d.LB(), d.Extent(), d.TrueLB(), d.TrueExtent(), d.Size()}
			want := []int{c.lb, c.ext, c.tlb, c.text, c.size}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("lb, extent, true lb, true extent, size = %v, want %v", got, want)
			}
			if d.Dense() != c.dense {
				t.Errorf("dense %v, want %v", d.Dense(), c.dense)
			}
			if offs := offsets(t, d, c.count); fmt.Sprint(offs) != fmt.Sprint(c.offs) && len(offs)+len(c.offs) > 0 {
				t.Errorf("packs bytes %v, want %v", offs, c.offs)
			}
			if d.PackSize(c.count) != c.count*c.size {
				t.Errorf("pack size %d", d.PackSize(c.count))
			}
		})
	}
}

func TestDatatypeErrors(t *testing.T) {
	bad := []func() (*mpi.Datatype, error){
		func() (*mpi.Datatype, error) { return mpi.TypeContiguous(-1, mpi.TypeInt8) },
		func() (*mpi.Datatype, error) { return mpi.TypeVector(1, 1, 1, nil) },
		func() (*mpi.Datatype, error) { return mpi.TypeIndexed([]int{1}, []int{0, 1}, mpi.TypeInt8) },
		func() (*mpi.Datatype, error) {
			return mpi.TypeSubarray([]int{4}, []int{3}, []int{2}, mpi.OrderC, mpi.TypeInt8)
		},
	}
	for i, f := range bad {
		if _, err := f(); !errors.Is(err, mpi.ErrArg) {
			t.Errorf("case %d: err %v, want ErrArg", i, err)
		}
	}
	vec := must(t)(mpi.TypeVector(2, 1, 3, mpi.TypeInt32))
	if _, err := (mpi.Buf{Mem: make([]byte, 15), Count: 1, Type: vec}).Packed(); !errors.Is(err, mpi.ErrArg) {
		t.Errorf("packing past the buffer: err %v", err)
	}
	if n := (mpi.Status{Count: 10}).CountOf(mpi.TypeInt32); n != mpi.Undefined {
		t.Errorf("count of 10 bytes in int32: %d, want Undefined", n)
	}
	if n := (mpi.Status{Count: 16}).CountOf(vec); n != 2 {
		t.Errorf("count of 16 bytes in a vector of 2 ints: %d", n)
	}
	if mpi.TypeFor[float64]() != mpi.TypeFloat64 || mpi.TypeFor[uint]() != mpi.TypeUint64 || mpi.TypeOf(coll.Int16) != mpi.TypeInt16 {
		t.Error("TypeFor/TypeOf do not give the predefined types")
	}
}

// FuzzPackRoundTrip packs an element layout built from the input, unpacks
// it into a clean buffer, and checks the bytes the type map covers came
// back and no other byte was written.
func FuzzPackRoundTrip(f *testing.F) {
	f.Add(uint8(3), uint8(2), int8(5), int8(-2), uint8(2))
	f.Add(uint8(1), uint8(0), int8(0), int8(3), uint8(1))
	f.Fuzz(func(t *testing.T, count, blen uint8, stride, lb int8, n uint8) {
		vec, err := mpi.TypeHvector(int(count%6), int(blen%4), int(stride), mpi.TypeInt16)
		if err != nil {
			t.Fatal(err)
		}
		d, err := mpi.TypeResized(vec, int(lb), vec.Extent()+int(lb%3))
		if err != nil {
			t.Fatal(err)
		}
		cnt := int(n % 4)
		lo, hi := d.Span(cnt)
		src, dst := make([]byte, hi-lo), make([]byte, hi-lo)
		for i := range src {
			src[i] = byte(i*7 + 1)
		}
		b := mpi.Buf{Mem: src, Base: -lo, Count: cnt, Type: d}
		packed := make([]byte, d.PackSize(cnt))
		if _, err := mpi.Pack(b, packed, 0); err != nil {
			t.Fatal(err)
		}
		b.Mem = dst
		if _, err := mpi.Unpack(packed, 0, b); err != nil {
			t.Fatal(err)
		}
		again := make([]byte, len(packed))
		b.Mem = dst
		if _, err := mpi.Pack(b, again, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(packed, again) {
			t.Fatalf("round trip changed the packed bytes: % x, then % x", packed, again)
		}
		for i := range dst {
			if dst[i] != 0 && dst[i] != src[i] {
				t.Fatalf("byte %d became %d, neither 0 nor the source's %d", i, dst[i], src[i])
			}
		}
	})
}

// TestSendRecvDatatype sends a column of a 4x4 int32 matrix (a vector)
// and receives it into a row, a resized type with a negative lower bound
// and a struct, blocking and not, at 2 to 4 ranks.
func TestSendRecvDatatype(t *testing.T) {
	for n := 2; n <= 4; n++ {
		mpitest.Run(t, n, "tcp", func(p *mpi.Proc) error {
			w := p.World()
			col, err := mpi.TypeVector(4, 1, 4, mpi.TypeInt32)
			if err != nil {
				return err
			}
			mat := make([]int32, 16)
			for i := range mat {
				mat[i] = int32(100*w.Rank() + i)
			}
			mem := bytesOfInts(mat)
			right, left := (w.Rank()+1)%w.Size(), (w.Rank()-1+w.Size())%w.Size()
			// Column 1 (elements 1, 5, 9, 13) goes right.
			sr, err := w.IsendBuf(mpi.Buf{Mem: mem, Base: 4, Count: 1, Type: col}, right, 7)
			if err != nil {
				return err
			}
			row := make([]int32, 4)
			st, err := w.RecvBuf(mpi.Buf{Mem: bytesOfInts(row), Count: 4, Type: mpi.TypeInt32}, left, 7)
			if err != nil {
				return err
			}
			if _, err := sr.Wait(); err != nil {
				return err
			}
			if want := []int32{1, 5, 9, 13}; fmt.Sprint(row) != fmt.Sprint(addAll(want, int32(100*left))) || st.CountOf(col) != 1 || st.CountOf(mpi.TypeInt32) != 4 {
				return fmt.Errorf("row %v from %d, counts %d/%d", row, left, st.CountOf(col), st.CountOf(mpi.TypeInt32))
			}
			// A row goes back into a column of a zeroed matrix, non-blocking.
			got := make([]int32, 16)
			rr, err := w.IrecvBuf(mpi.Buf{Mem: bytesOfInts(got), Base: 8, Count: 1, Type: col}, right, 8)
			if err != nil {
				return err
			}
			if err := w.SendBuf(mpi.Buf{Mem: bytesOfInts(row), Count: 4, Type: mpi.TypeInt32}, left, 8); err != nil {
				return err
			}
			if _, err := rr.Wait(); err != nil {
				return err
			}
			for i, v := range got {
				want := int32(0)
				if i%4 == 2 {
					want = int32(100*w.Rank() + 1 + 4*(i/4))
				}
				if v != want {
					return fmt.Errorf("column received: %v", got)
				}
			}
			return nil
		})
	}
}

func addAll(v []int32, k int32) []int32 {
	out := make([]int32, len(v))
	for i := range v {
		out[i] = v[i] + k
	}
	return out
}

func bytesOfInts(v []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}
