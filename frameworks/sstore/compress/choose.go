package compress

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Shuffle modes, as the sstore_stage_compress_shuffle parameter spells
// them: auto samples each file with and without each filter, on shuffles
// every compressed file for elements of 8 bytes (float64 state), with or
// without the delta as samples say, off never filters.
const (
	ShuffleAuto = "auto"
	ShuffleOn   = "on"
	ShuffleOff  = "off"
)

// ShuffleModes lists the shuffle modes, the parameter's choices.
var ShuffleModes = []string{ShuffleAuto, ShuffleOn, ShuffleOff}

// Choice is how a file is best stored: compressed or as is, and when
// compressed through which filter ("" for none).
type Choice struct {
	Compress bool
	Filter   string
}

// Sampling: a file of at least SampleMin bytes is compressed only when
// samples of it shrink below sampleRatio. Incompressible state (random,
// or already compressed) then costs no compression time on the way out
// and no decode at restart; a file that shrinks a little gains less on
// the wire than its compression costs on this project's 2-core nodes. A
// filter is kept when its samples come out smaller than without it by
// filterMargin: a filter that merely ties costs a pass over the bytes
// each way for nothing.
const (
	sampleSize   = 128 << 10
	nSamples     = 4
	SampleMin    = 2 * nSamples * sampleSize
	sampleRatio  = 0.95
	filterMargin = 0.97
	// giveUp: when no candidate shrinks the first sample below it, the
	// file is taken for incompressible without reading more samples.
	giveUp = 0.99
)

// Choose decides how the file r (of size bytes) is stored with alg at
// level and the shuffle mode: alg None is never compressed; a file smaller
// than SampleMin is compressed (sampling would cost about as much as
// compressing), shuffled for 8-byte elements only in mode on. A larger
// file is sampled in samples spread over it, compressed through each
// candidate filter of the mode.
func Choose(ctx context.Context, r io.ReaderAt, size int64, alg string, level int, mode string) (Choice, error) {
	var cands []string
	switch mode {
	case ShuffleAuto:
		cands = []string{"", Shuffle8, DeltaShuffle, Shuffle4}
	case ShuffleOn:
		cands = []string{Shuffle8, DeltaShuffle}
	case ShuffleOff:
		cands = []string{""}
	default:
		return Choice{}, fmt.Errorf("compress: unknown shuffle mode %q; choose one of auto, on, off", mode)
	}
	if alg == None {
		return Choice{}, nil
	}
	if level == 0 {
		level = levels[alg].Default
	}
	if size < SampleMin {
		if mode == ShuffleOn {
			return Choice{Compress: true, Filter: Shuffle8}, nil
		}
		return Choice{Compress: true}, nil
	}
	buf, filtered := make([]byte, sampleSize), make([]byte, sampleSize)
	var scratch []byte
	var in int64
	out := make([]int64, len(cands))
	for i := range int64(nSamples) {
		if err := ctx.Err(); err != nil {
			return Choice{}, err
		}
		n, err := r.ReadAt(buf, size*i/nSamples)
		if err != nil && err != io.EOF {
			return Choice{}, err
		}
		in += int64(n)
		for c, filter := range cands {
			fwd, _, err := transforms(filter)
			if err != nil {
				return Choice{}, err
			}
			sample := buf[:n]
			if fwd != nil {
				fwd(filtered[:n], sample)
				sample = filtered[:n]
			}
			if scratch, err = encodeBlock(scratch[:0], sample, alg, level); err != nil {
				return Choice{}, err
			}
			out[c] += int64(len(scratch))
		}
		if i == 0 && float64(out[best(out)]) >= giveUp*float64(in) {
			return Choice{}, nil
		}
	}
	b := best(out)
	if float64(out[b]) >= sampleRatio*float64(in) {
		return Choice{}, nil
	}
	if cands[b] != "" && cands[0] == "" && float64(out[b]) >= filterMargin*float64(out[0]) {
		b = 0 // the filter does not win by its margin
	}
	return Choice{Compress: true, Filter: cands[b]}, nil
}

// sampleEncoders keeps one single-threaded zstd encoder per level for the
// samples: building one allocates its tables, and a sample is too small to
// share among processors.
var sampleEncoders sync.Map // int -> *sync.Pool of *zstd.Encoder

// encodeBlock appends src compressed with alg at level (not 0) to dst, in
// memory: a stream writer per sample would cost more in allocations than
// compressing it does.
func encodeBlock(dst, src []byte, alg string, level int) ([]byte, error) {
	switch alg {
	case Zstd:
		p, _ := sampleEncoders.LoadOrStore(level, &sync.Pool{})
		pool := p.(*sync.Pool)
		e, _ := pool.Get().(*zstd.Encoder)
		if e == nil {
			var err error
			if e, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)), zstd.WithEncoderConcurrency(1)); err != nil {
				return nil, err
			}
		}
		dst = e.EncodeAll(src, dst)
		pool.Put(e)
		return dst, nil
	case S2:
		var b []byte
		switch level {
		case 2:
			b = s2.EncodeBetter(dst[:cap(dst)], src)
		case 3:
			b = s2.EncodeBest(dst[:cap(dst)], src)
		default:
			b = s2.Encode(dst[:cap(dst)], src)
		}
		return b, nil
	case Gzip:
		return gzipBlockEncode(dst, src, level)
	}
	return nil, unknown(alg)
}

// best is the index of the smallest of out (the first of equals).
func best(out []int64) int {
	b := 0
	for i, o := range out {
		if o < out[b] {
			b = i
		}
	}
	return b
}
