package xor

import (
	"bytes"
	"crypto/subtle"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// encode returns every member's parity segment of s over data.
func encode(t testing.TB, s Set, data [][]byte) [][]byte {
	t.Helper()
	segs := make([][]byte, s.K())
	for j := range segs {
		var b bytes.Buffer
		if err := Segment(&b, s, j, readers(data, -1)); err != nil {
			t.Fatalf("segment %d: %v", j, err)
		}
		if int64(b.Len()) != s.SegmentSize(j) {
			t.Fatalf("segment %d: %d bytes, SegmentSize says %d", j, b.Len(), s.SegmentSize(j))
		}
		segs[j] = b.Bytes()
	}
	return segs
}

// readers returns the data as ReaderAts, nil at skip.
func readers(data [][]byte, skip int) []io.ReaderAt {
	rs := make([]io.ReaderAt, len(data))
	for i, d := range data {
		if i != skip {
			rs[i] = bytes.NewReader(d)
		}
	}
	return rs
}

func setOf(data [][]byte) Set {
	s := Set{}
	for _, d := range data {
		s.Sizes = append(s.Sizes, int64(len(d)))
	}
	return s
}

// checkEveryLoss encodes data and rebuilds each member from the others.
func checkEveryLoss(t testing.TB, data [][]byte) {
	t.Helper()
	s := setOf(data)
	segs := encode(t, s, data)
	for lost := range data {
		var b bytes.Buffer
		if err := Rebuild(&b, s, lost, readers(data, lost), readers(segs, lost)); err != nil {
			t.Fatalf("rebuild %d of sizes %v: %v", lost, s.Sizes, err)
		}
		if !bytes.Equal(b.Bytes(), data[lost]) {
			t.Fatalf("rebuild %d of sizes %v: %d bytes differ from the %d lost", lost, s.Sizes, b.Len(), len(data[lost]))
		}
	}
}

func randomData(r *rand.Rand, sizes ...int) [][]byte {
	out := make([][]byte, len(sizes))
	for i, n := range sizes {
		out[i] = make([]byte, n)
		for j := range out[i] {
			out[i][j] = byte(r.Uint32())
		}
	}
	return out
}

func TestRebuild(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name  string
		sizes []int
	}{
		{"three equal", []int{96, 96, 96}},
		{"three unequal", []int{1000, 7, 333}},
		{"one empty", []int{0, 64, 65}},
		{"all empty", []int{0, 0, 0}},
		{"odd sizes, five", []int{1, 2, 3, 5, 8}},
		{"smaller than k-1", []int{1, 0, 2, 1}},
		{"longer than a block", []int{blockSize + 13, 3*blockSize - 1, 17}},
		{"eight", []int{4096, 4095, 4097, 1, 0, 8191, 100, 31}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkEveryLoss(t, randomData(r, tc.sizes...)) })
	}
}

func TestChunksCoverData(t *testing.T) {
	for _, sizes := range [][]int64{{10, 10, 10}, {0, 5, 11}, {7, 1, 1, 1}, {100, 3, 99, 64, 65}} {
		s := Set{Sizes: sizes}
		for m := range sizes {
			var next int64
			for j := range sizes {
				if j == m {
					continue
				}
				off, n := s.Chunk(m, j)
				if n > 0 && off != next {
					t.Errorf("sizes %v member %d segment %d: chunk at %d, want %d", sizes, m, j, off, next)
				}
				if n > s.SegmentSize(j) {
					t.Errorf("sizes %v member %d segment %d: chunk %d longer than its segment %d", sizes, m, j, n, s.SegmentSize(j))
				}
				next += n
			}
			if next != sizes[m] {
				t.Errorf("sizes %v member %d: chunks cover %d bytes of %d", sizes, m, next, sizes[m])
			}
		}
	}
}

func TestParityShare(t *testing.T) {
	// Equal members: each holds 1/(k−1) of its size as parity.
	s := Set{Sizes: []int64{1200, 1200, 1200, 1200, 1200}}
	for j := range s.Sizes {
		if got := s.SegmentSize(j); got != 300 {
			t.Errorf("segment %d: %d bytes, want 300", j, got)
		}
	}
}

func TestBadCalls(t *testing.T) {
	data := randomData(rand.New(rand.NewPCG(3, 4)), 10, 10, 10)
	s := setOf(data)
	segs := encode(t, s, data)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"two members", Segment(io.Discard, Set{Sizes: []int64{1, 1}}, 0, readers(data[:2], -1)), "at least 3"},
		{"negative size", Segment(io.Discard, Set{Sizes: []int64{1, -1, 1}}, 0, readers(data, -1)), "negative"},
		{"member out of range", Segment(io.Discard, s, 3, readers(data, -1)), "not in a set"},
		{"missing member", Rebuild(io.Discard, s, 0, readers(data, 1), readers(segs, 0)), "member 1 is needed"},
		{"short member", Segment(io.Discard, s, 0, readers([][]byte{data[0], data[1][:2], data[2]}, -1)), "unexpected EOF"},
		{"wrong segment count", Rebuild(io.Discard, s, 0, readers(data, 0), readers(segs[:2], 0)), "2 segments"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, tc.err, tc.want)
		}
	}
}

func TestInto(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for n := range 80 {
		a, b := randomData(r, n, n)[0], randomData(r, n, n)[1]
		want := make([]byte, n)
		subtle.XORBytes(want, a, b)
		Into(a, b)
		if !bytes.Equal(a, want) {
			t.Fatalf("length %d: wrong XOR", n)
		}
	}
}

func FuzzRebuild(f *testing.F) {
	f.Add([]byte("seed"), uint8(3), uint16(10), uint16(0), uint16(1000))
	f.Add([]byte{}, uint8(5), uint16(0), uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, seed []byte, k uint8, a, b, c uint16) {
		n := MinMembers + int(k)%6
		var s1, s2 uint64
		for i, x := range seed {
			s1 = s1*31 + uint64(x) + uint64(i)
		}
		s2 = uint64(a)<<32 | uint64(b)<<16 | uint64(c)
		r := rand.New(rand.NewPCG(s1, s2))
		sizes := make([]int, n)
		for i := range sizes {
			switch i % 3 {
			case 0:
				sizes[i] = int(a)
			case 1:
				sizes[i] = int(b)
			default:
				sizes[i] = int(c) ^ int(r.IntN(64))
			}
		}
		checkEveryLoss(t, randomData(r, sizes...))
	})
}

func BenchmarkInto(b *testing.B) {
	d := randomData(rand.New(rand.NewPCG(7, 8)), blockSize, blockSize)
	b.SetBytes(blockSize)
	for b.Loop() {
		Into(d[0], d[1])
	}
}

func BenchmarkByteLoop(b *testing.B) {
	d := randomData(rand.New(rand.NewPCG(7, 8)), blockSize, blockSize)
	b.SetBytes(blockSize)
	for b.Loop() {
		for i := range d[1] {
			d[0][i] ^= d[1][i]
		}
	}
}
