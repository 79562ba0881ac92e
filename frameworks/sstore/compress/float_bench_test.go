package compress

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"testing"
)

// fieldGrid is n bytes of examples/field's smooth float64 field at step
// 0 (the same formula): around 300, no zeros, full mantissas.
func fieldGrid(n int) []byte {
	side := int(math.Sqrt(float64(n / 8)))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		u := float64((i/8)%side) / float64(side)
		y := float64((i/8)/side) / float64(side)
		v := 300 + 20*math.Sin(2*math.Pi*u) + 8*math.Sin(2*math.Pi*3*y+1) +
			3*math.Sin(2*math.Pi*(5*u+2*y)) + 0.5*math.Cos(2*math.Pi*11*u*y)
		binary.LittleEndian.PutUint64(b[i:], math.Float64bits(v))
	}
	return b
}

// deltaReader replaces each 8-byte element by its difference (as an
// integer) from the one before: what a delta filter before the shuffle
// would do. Measured here only, to decide whether such a filter earns its
// place (see BenchmarkFloat).
type deltaReader struct {
	r    io.Reader
	prev uint64
	buf  [8]byte
	n    int
}

func (d *deltaReader) Read(p []byte) (int, error) {
	p = p[:len(p)/8*8]
	n, err := io.ReadFull(d.r, p)
	le := binary.LittleEndian
	for i := 0; i+8 <= n; i += 8 {
		v := le.Uint64(p[i:])
		le.PutUint64(p[i:], v-d.prev)
		d.prev = v
	}
	if err == io.ErrUnexpectedEOF {
		err = io.EOF
	}
	return n, err
}

// BenchmarkFloat: ratio and MB/s per core on a 32 MiB smooth float64
// field, side by side: each compressor alone, with the shuffle before it,
// the shuffle alone, and a delta filter before the shuffle.
func BenchmarkFloat(b *testing.B) {
	data := fieldGrid(32 << 20)
	type run struct {
		name   string
		alg    string
		level  int
		filter string
		delta  bool
	}
	for _, r := range []run{
		{"zstd-default", Zstd, 3, "", false},
		{"zstd-fastest", Zstd, 1, "", false},
		{"s2", S2, 1, "", false},
		{"shuffle+zstd-fastest", Zstd, 1, Shuffle8, false},
		{"shuffle+zstd-default", Zstd, 3, Shuffle8, false},
		{"shuffle+s2", S2, 1, Shuffle8, false},
		{"delta+shuffle+zstd-fastest", Zstd, 1, Shuffle8, true},
		{"delta+shuffle+s2", S2, 1, Shuffle8, true},
	} {
		var stored []byte
		b.Run(r.name, func(b *testing.B) {
			var out bytes.Buffer
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				out.Reset()
				var src io.Reader = bytes.NewReader(data)
				if r.delta {
					src = &deltaReader{r: src}
				}
				if _, err := CompressFiltered(b.Context(), &out, src, r.alg, r.level, r.filter); err != nil {
					b.Fatal(err)
				}
			}
			perCore(b, len(data))
			b.ReportMetric(float64(len(data))/float64(out.Len()), "ratio")
			stored = out.Bytes()
		})
		if r.delta {
			continue
		}
		b.Run("decompress-"+r.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := DecompressFiltered(b.Context(), io.Discard, bytes.NewReader(stored), r.alg, r.filter); err != nil {
					b.Fatal(err)
				}
			}
			perCore(b, len(data))
		})
	}
	dst := make([]byte, len(data))
	b.Run("shuffle-alone", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			for o := 0; o < len(data); o += ShuffleBlock {
				Shuffle(dst[o:o+ShuffleBlock], data[o:o+ShuffleBlock], 8)
			}
		}
		perCore(b, len(data))
	})
	back := make([]byte, len(data))
	b.Run("unshuffle-alone", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			for o := 0; o < len(data); o += ShuffleBlock {
				Unshuffle(back[o:o+ShuffleBlock], dst[o:o+ShuffleBlock], 8)
			}
		}
		perCore(b, len(data))
	})
}
