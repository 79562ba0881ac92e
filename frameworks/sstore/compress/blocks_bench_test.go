package compress

import (
	"bytes"
	"context"
	"io"
	"testing"

	"gompi/frameworks/sstore/snapshot"
)

// BenchmarkBlocks: ratio and MB per processor second of a 32 MiB smooth
// float64 field compressed as differential checkpoints store it (each
// 1 MiB block by itself, BlockEncoder) against the whole file in one
// stream with the same filter: what compressing block by block costs in
// ratio and speed.
func BenchmarkBlocks(b *testing.B) {
	data := fieldGrid(32 << 20)
	for _, tc := range []struct {
		alg    string
		filter string
	}{{Zstd, snapshot.FilterDeltaShuffle8}, {Zstd, snapshot.FilterShuffle8}, {S2, snapshot.FilterShuffle8}} {
		choice := Choice{Compress: true, Filter: tc.filter}
		b.Run(tc.alg+"+"+tc.filter+"/whole", func(b *testing.B) {
			var out countingWriter
			b.SetBytes(int64(len(data)))
			start := cpuTime(b)
			for b.Loop() {
				out = 0
				if _, err := CompressFiltered(context.Background(), &out, bytes.NewReader(data), tc.alg, 0, tc.filter); err != nil {
					b.Fatal(err)
				}
			}
			perCPU(b, len(data), start)
			b.ReportMetric(float64(len(data))/float64(out), "ratio")
		})
		b.Run(tc.alg+"+"+tc.filter+"/blocks", func(b *testing.B) {
			var out countingWriter
			b.SetBytes(int64(len(data)))
			start := cpuTime(b)
			for b.Loop() {
				out = 0
				enc := BlockEncoder(context.Background(), tc.alg, 0, choice)
				for o := 0; o < len(data); o += 1 << 20 {
					if _, _, err := enc(&out, data[o:o+1<<20]); err != nil {
						b.Fatal(err)
					}
				}
			}
			perCPU(b, len(data), start)
			b.ReportMetric(float64(len(data))/float64(out), "ratio")
		})
	}
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

var _ io.Writer = (*countingWriter)(nil)
