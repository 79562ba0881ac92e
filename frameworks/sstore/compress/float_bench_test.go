package compress

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the processor time this process has used (user and system,
// all threads).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// perCPU reports MB/s per processor second: n bytes each of b.N
// iterations over the processor time they took since start, whatever
// number of processors they ran on. On a loaded machine it is the figure
// that holds up; MB/s (wall clock) does not.
func perCPU(b *testing.B, n int, start time.Duration) {
	b.ReportMetric(float64(n)*float64(b.N)/(cpuTime(b)-start).Seconds()/1e6, "MB/cpu-s")
}

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

// BenchmarkFloat: ratio and MB per processor second on a 32 MiB smooth
// float64 field, side by side: each compressor alone, with the shuffle or
// the delta-shuffle before it, each compressor on bytes shuffled
// beforehand (what the compressor itself costs on them), and the filters
// alone.
func BenchmarkFloat(b *testing.B) {
	data := fieldGrid(32 << 20)
	pre := make([]byte, len(data))
	for o := 0; o < len(data); o += ShuffleBlock {
		Shuffle(pre[o:o+ShuffleBlock], data[o:o+ShuffleBlock], 8)
	}
	type run struct {
		name   string
		alg    string
		level  int
		filter string
		pre    bool // compress pre, the bytes shuffled beforehand
	}
	for _, r := range []run{
		{"zstd-default", Zstd, 3, "", false},
		{"zstd-fastest", Zstd, 1, "", false},
		{"s2", S2, 1, "", false},
		{"shuffle+zstd-default", Zstd, 3, Shuffle8, false},
		{"shuffle+zstd-fastest", Zstd, 1, Shuffle8, false},
		{"shuffle+s2", S2, 1, Shuffle8, false},
		{"delta-shuffle+zstd-default", Zstd, 3, DeltaShuffle, false},
		{"delta-shuffle+zstd-fastest", Zstd, 1, DeltaShuffle, false},
		{"delta-shuffle+s2", S2, 1, DeltaShuffle, false},
		{"preshuffled:zstd-fastest", Zstd, 1, "", true},
		{"preshuffled:s2", S2, 1, "", true},
	} {
		var stored []byte
		b.Run(r.name, func(b *testing.B) {
			var out bytes.Buffer
			b.SetBytes(int64(len(data)))
			cpu := cpuTime(b)
			for b.Loop() {
				out.Reset()
				src := bytes.NewReader(data)
				if r.pre {
					src = bytes.NewReader(pre)
				}
				if _, err := CompressFiltered(b.Context(), &out, src, r.alg, r.level, r.filter); err != nil {
					b.Fatal(err)
				}
			}
			perCPU(b, len(data), cpu)
			b.ReportMetric(float64(len(data))/float64(out.Len()), "ratio")
			stored = out.Bytes()
		})
		if r.pre {
			continue
		}
		b.Run("decompress-"+r.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			cpu := cpuTime(b)
			for b.Loop() {
				if _, err := DecompressFiltered(b.Context(), io.Discard, bytes.NewReader(stored), r.alg, r.filter); err != nil {
					b.Fatal(err)
				}
			}
			perCPU(b, len(data), cpu)
		})
	}
	// The filters alone, in ShuffleBlock blocks as the stream filters,
	// on one goroutine.
	dst, back := make([]byte, len(data)), make([]byte, len(data))
	for _, f := range []struct {
		name     string
		fn       transform
		src, dst []byte
	}{
		{"shuffle-alone", func(d, s []byte) { Shuffle(d, s, 8) }, data, dst},
		{"unshuffle-alone", func(d, s []byte) { Unshuffle(d, s, 8) }, dst, back},
		{"delta-shuffle-alone", DeltaShuffle8, data, dst},
		{"undo-delta-shuffle-alone", UndoDeltaShuffle8, dst, back},
	} {
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			cpu := cpuTime(b)
			for b.Loop() {
				for o := 0; o < len(data); o += ShuffleBlock {
					f.fn(f.dst[o:o+ShuffleBlock], f.src[o:o+ShuffleBlock])
				}
			}
			perCPU(b, len(data), cpu)
		})
	}
}
