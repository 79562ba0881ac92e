package compress

import (
	"bytes"
	"testing"
)

// naiveShuffle is the definition Shuffle's fast paths must match.
func naiveShuffle(src []byte, k int) []byte {
	dst := make([]byte, len(src))
	n := len(src) / k
	for i := range n {
		for j := range k {
			dst[j*n+i] = src[i*k+j]
		}
	}
	copy(dst[n*k:], src[n*k:])
	return dst
}

func TestShuffleMatchesDefinition(t *testing.T) {
	for _, k := range []int{1, 2, 3, 4, 5, 8, 16} {
		for _, n := range []int{0, 1, 7, 8, 9, 63, 64, 65, 1000, 4099} {
			src := make([]byte, n)
			for i := range src {
				src[i] = byte(i*131 + i>>8)
			}
			got := make([]byte, n)
			Shuffle(got, src, k)
			if want := naiveShuffle(src, k); !bytes.Equal(got, want) {
				t.Fatalf("k=%d n=%d: Shuffle differs from the definition", k, n)
			}
			back := make([]byte, n)
			Unshuffle(back, got, k)
			if !bytes.Equal(back, src) {
				t.Fatalf("k=%d n=%d: Unshuffle(Shuffle(x)) != x", k, n)
			}
		}
	}
}

func FuzzShuffle(f *testing.F) {
	f.Add([]byte("0123456789abcdefghij"), uint8(8))
	f.Add([]byte{}, uint8(4))
	f.Add(bytes.Repeat([]byte{1, 2, 3}, 100), uint8(3))
	f.Fuzz(func(t *testing.T, src []byte, k8 uint8) {
		k := int(k8%32) + 1
		got := make([]byte, len(src))
		Shuffle(got, src, k)
		if want := naiveShuffle(src, k); !bytes.Equal(got, want) {
			t.Fatalf("k=%d len=%d: Shuffle differs from the definition", k, len(src))
		}
		back := make([]byte, len(src))
		Unshuffle(back, got, k)
		if !bytes.Equal(back, src) {
			t.Fatalf("k=%d len=%d: Unshuffle(Shuffle(x)) != x", k, len(src))
		}
	})
}

func BenchmarkShuffle(b *testing.B) {
	src := make([]byte, 32<<20)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, len(src))
	for _, k := range []int{4, 8} {
		b.Run("shuffle"+string(rune('0'+k)), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				for o := 0; o < len(src); o += ShuffleBlock {
					Shuffle(dst[o:o+ShuffleBlock], src[o:o+ShuffleBlock], k)
				}
			}
		})
		b.Run("unshuffle"+string(rune('0'+k)), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				for o := 0; o < len(src); o += ShuffleBlock {
					Unshuffle(src[o:o+ShuffleBlock], dst[o:o+ShuffleBlock], k)
				}
			}
		})
	}
}
