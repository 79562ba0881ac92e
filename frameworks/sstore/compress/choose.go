package compress

import (
	"bytes"
	"context"
	"fmt"
	"io"
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
	if size < SampleMin {
		if mode == ShuffleOn {
			return Choice{Compress: true, Filter: Shuffle8}, nil
		}
		return Choice{Compress: true}, nil
	}
	buf := make([]byte, sampleSize)
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
			// In memory and quick: not cancelled midway.
			st, err := CompressFiltered(context.WithoutCancel(ctx), io.Discard, bytes.NewReader(buf[:n]), alg, level, filter)
			if err != nil {
				return Choice{}, err
			}
			out[c] += st.Out
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
