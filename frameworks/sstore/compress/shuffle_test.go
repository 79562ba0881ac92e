package compress

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gompi/frameworks/sstore/snapshot"
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

// naiveDeltaShuffle8 is the definition DeltaShuffle8 must match.
func naiveDeltaShuffle8(src []byte) []byte {
	d := append([]byte(nil), src...)
	var prev uint64
	for i := 0; i+8 <= len(src); i += 8 {
		v := binary.LittleEndian.Uint64(src[i:])
		binary.LittleEndian.PutUint64(d[i:], v-prev)
		prev = v
	}
	return naiveShuffle(d, 8)
}

func checkDeltaShuffle(t *testing.T, src []byte) {
	got := make([]byte, len(src))
	DeltaShuffle8(got, src)
	if want := naiveDeltaShuffle8(src); !bytes.Equal(got, want) {
		t.Fatalf("len=%d: DeltaShuffle8 differs from the definition", len(src))
	}
	back := make([]byte, len(src))
	UndoDeltaShuffle8(back, got)
	if !bytes.Equal(back, src) {
		t.Fatalf("len=%d: UndoDeltaShuffle8(DeltaShuffle8(x)) != x", len(src))
	}
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
			checkDeltaShuffle(t, src)
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
		checkDeltaShuffle(t, src)
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

// smoothField is n bytes of float64 values smooth in space with full
// mantissas and no zeros, as a simulation's temperature field is.
func smoothField(n int) []byte {
	return warmGrid(n)
}

func TestFilteredRoundTrip(t *testing.T) {
	data := map[string][]byte{
		"empty":       nil,
		"odd":         []byte("0123456789abc"),
		"warm-2.3MiB": smoothField(ShuffleBlock*2 + 300<<10 + 5),
		"random-1MiB": randomBytes(ShuffleBlock+3, 4),
	}
	for _, alg := range []string{Zstd, S2, Gzip} {
		for _, filter := range []string{Shuffle4, Shuffle8, DeltaShuffle} {
			for name, src := range data {
				t.Run(alg+"/"+filter+"/"+name, func(t *testing.T) {
					var c bytes.Buffer
					st, err := CompressFiltered(t.Context(), &c, bytes.NewReader(src), alg, 0, filter)
					if err != nil {
						t.Fatal(err)
					}
					if st.In != int64(len(src)) {
						t.Errorf("in %d, want %d", st.In, len(src))
					}
					var d bytes.Buffer
					dst, err := DecompressFiltered(t.Context(), &d, &c, alg, filter)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(d.Bytes(), src) || dst.Out != int64(len(src)) {
						t.Fatalf("round trip changed the data (%d bytes back, %d in)", d.Len(), len(src))
					}
				})
			}
		}
	}
}

// The shuffle is what makes a smooth float64 field compress: zstd alone
// barely shrinks it.
func TestShuffleHelpsSmoothField(t *testing.T) {
	src := smoothField(8 << 20)
	size := func(filter string) int {
		var c bytes.Buffer
		if _, err := CompressFiltered(t.Context(), &c, bytes.NewReader(src), Zstd, 1, filter); err != nil {
			t.Fatal(err)
		}
		return c.Len()
	}
	plain, shuffled, delta := size(""), size(Shuffle8), size(DeltaShuffle)
	if float64(plain) < 1.2*float64(shuffled) {
		t.Errorf("zstd alone %d bytes, shuffled %d: want the shuffle at least 1.2x smaller", plain, shuffled)
	}
	if delta >= shuffled {
		t.Errorf("shuffled %d bytes, differences shuffled %d: want the delta to help on a smooth field", shuffled, delta)
	}
}

func TestFilterRefused(t *testing.T) {
	for _, tc := range []struct{ alg, filter, want string }{
		{None, Shuffle8, "without compression"},
		{Zstd, "shuffle16", "unknown filter"},
	} {
		_, err := CompressFiltered(t.Context(), io.Discard, strings.NewReader("x"), tc.alg, 0, tc.filter)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("compress %s %s: %v, want %q", tc.alg, tc.filter, err, tc.want)
		}
	}
	if _, err := DecompressFiltered(t.Context(), io.Discard, strings.NewReader("x"), Zstd, "rot13"); err == nil || !strings.Contains(err.Error(), "unknown filter") {
		t.Errorf("decompress with an unknown filter: %v", err)
	}
}

// The size and checksum check runs on the unshuffled bytes: a file
// restored through the wrong filter (or none) is corrupt, named.
func TestFilteredFileChecked(t *testing.T) {
	src := smoothField(ShuffleBlock + 1000)
	dir := t.TempDir()
	sum := snapshot.NewChecksum()
	sum.Write(src)
	var c bytes.Buffer
	if _, err := CompressFiltered(t.Context(), &c, bytes.NewReader(src), S2, 0, Shuffle8); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f.s2"), c.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := snapshot.FileRecord{Name: "f", Size: int64(len(src)), Checksum: snapshot.FormatChecksum(sum.Sum32()), Compression: S2, Stored: "f.s2", Filter: Shuffle8}
	out := t.TempDir()
	if err := DecompressFile(t.Context(), dir, rec, out); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(out, "f")); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("restored file differs (%v)", err)
	}
	for _, wrong := range []string{"", Shuffle4, DeltaShuffle} {
		r := rec
		r.Filter = wrong
		err := VerifyFile(t.Context(), dir, r)
		if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), "f.s2") {
			t.Errorf("filter %q instead of shuffle8: %v, want ErrCorrupt naming f.s2", wrong, err)
		}
	}
}

// FuzzFiltered: any input survives the filtered round trip at any
// compressor, and any bytes fed to the filtered decoder give an error or
// output, never a panic.
func FuzzFiltered(f *testing.F) {
	f.Add([]byte("0123456789abcdefghij"), uint8(0), false)
	f.Add(bytes.Repeat([]byte{1, 2, 3}, 1000), uint8(5), true)
	f.Fuzz(func(t *testing.T, data []byte, which uint8, decodeOnly bool) {
		algs := []string{Zstd, S2, Gzip}
		alg := algs[int(which)%len(algs)]
		filter := []string{Shuffle4, Shuffle8, DeltaShuffle}[int(which/3)%3]
		if decodeOnly {
			DecompressFiltered(context.Background(), io.Discard, bytes.NewReader(data), alg, filter)
			return
		}
		var c, d bytes.Buffer
		if _, err := CompressFiltered(context.Background(), &c, bytes.NewReader(data), alg, 1, filter); err != nil {
			t.Fatal(err)
		}
		if _, err := DecompressFiltered(context.Background(), &d, &c, alg, filter); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(d.Bytes(), data) {
			t.Fatalf("%s+%s: round trip changed %d bytes", filter, alg, len(data))
		}
	})
}

// float32Field is n bytes of a smooth float32 field.
func float32Field(n int) []byte {
	side := int(math.Sqrt(float64(n / 4)))
	b := make([]byte, n)
	for i := 0; i+4 <= n; i += 4 {
		x, y := float64((i/4)%side), float64((i/4)/side)
		v := float32(20 + 80*math.Exp(-x/float64(side)) + math.Sin(x/17)*math.Cos(y/23))
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v))
	}
	return b
}
