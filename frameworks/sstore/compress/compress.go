// Package compress compresses snapshot files for staged storage and
// restores them on restart, verifying the original bytes against the size
// and CRC-32C recorded in the snapshot metadata.
//
// Algorithms (klauspost/compress): zstd, s2 and gzip, or none. Every
// algorithm uses all processors: zstd and s2 compress the blocks of their
// stream concurrently; gzip cuts the input into blocks compressed as
// independent members by parallel workers and written in order, which any
// gzip decoder reads as one stream.
//
// Filters (shuffle.go): before the compressor a file's bytes may pass a
// byte shuffle for elements of 4 or 8 bytes, or the differences of 8-byte
// elements shuffled, in blocks of ShuffleBlock; floating-point state that
// no compressor shrinks as it is shrinks once shuffled. Choose (choose.go)
// picks, per file, whether to compress and through which filter by
// compressing samples of it; the snapshot metadata records the filter,
// and restore undoes it before checking the original size and CRC-32C.
package compress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Algorithm names, as the sstore_stage_compress parameter and the snapshot
// metadata spell them.
const (
	None = "none"
	Zstd = "zstd"
	S2   = "s2"
	Gzip = "gzip"
)

// Algorithms lists every algorithm, the parameter's choices.
var Algorithms = []string{None, Zstd, S2, Gzip}

// Levels is the range of levels an algorithm accepts. A level of 0 always
// means Default.
type Levels struct {
	Min, Max, Default int
	Help              string
}

var levels = map[string]Levels{
	None: {0, 0, 0, "none takes no level"},
	Zstd: {1, 22, 3, "zstd levels as the zstd tool numbers them: 1-2 fastest, 3-5 default, 6-9 better, 10-22 best"},
	S2:   {1, 3, 1, "s2: 1 fast, 2 better, 3 best"},
	Gzip: {1, 9, 6, "gzip: 1 fastest to 9 smallest"},
}

// LevelsOf returns the levels alg accepts.
func LevelsOf(alg string) (Levels, error) {
	l, ok := levels[alg]
	if !ok {
		return Levels{}, unknown(alg)
	}
	return l, nil
}

// Check reports whether alg is known and level is 0 or in its range.
func Check(alg string, level int) error {
	l, err := LevelsOf(alg)
	if err != nil {
		return err
	}
	if level != 0 && (level < l.Min || level > l.Max) {
		return fmt.Errorf("compress: %s level %d is out of range %d-%d (0 = default %d; %s)", alg, level, l.Min, l.Max, l.Default, l.Help)
	}
	return nil
}

// Suffix is appended to a file's name when it is stored compressed ("" for none).
func Suffix(alg string) string {
	switch alg {
	case Zstd:
		return ".zst"
	case S2:
		return ".s2"
	case Gzip:
		return ".gz"
	}
	return ""
}

func unknown(alg string) error {
	return fmt.Errorf("compress: unknown algorithm %q; choose one of %s", alg, strings.Join(Algorithms, ", "))
}

// Stats counts the bytes one call read and wrote.
type Stats struct {
	In, Out int64
}

// gzipBlock is the input each gzip member holds: restarting deflate's
// 32 KiB window once per MiB costs almost no ratio, and files of a few MiB
// still keep every processor busy.
const gzipBlock = 1 << 20

// Compress reads src to its end and writes it compressed with alg to dst.
// level 0 is the algorithm's default.
func Compress(ctx context.Context, dst io.Writer, src io.Reader, alg string, level int) (Stats, error) {
	return CompressFiltered(ctx, dst, src, alg, level, "")
}

// CompressFiltered is Compress with src's bytes passed through filter
// (Shuffle4, Shuffle8 or DeltaShuffle; "" for none), block by block, before alg, which must then not be
// None: a filter only serves a compressor. Stats.In counts src's bytes.
func CompressFiltered(ctx context.Context, dst io.Writer, src io.Reader, alg string, level int, filter string) (Stats, error) {
	if err := Check(alg, level); err != nil {
		return Stats{}, err
	}
	fwd, _, err := transforms(filter)
	if err != nil {
		return Stats{}, err
	}
	if fwd != nil && alg == None {
		return Stats{}, fmt.Errorf("compress: filter %s without compression", filter)
	}
	if level == 0 {
		level = levels[alg].Default
	}
	in := &ctxReader{ctx: ctx, r: src, soft: true}
	var r io.Reader = in
	if fwd != nil {
		r = newShuffleReader(in, fwd)
	}
	out := &countWriter{w: dst}
	err = compressWith(out, r, alg, level)
	if in.err != nil {
		err = in.err // the input failed: what was written is not the file
	}
	st := Stats{In: in.n, Out: out.n}
	if err != nil {
		return st, fmt.Errorf("compress: %s: %w", alg, err)
	}
	return st, nil
}

// compressWith writes in compressed with alg at level to out.
func compressWith(out *countWriter, in io.Reader, alg string, level int) error {
	var err error
	switch alg {
	case None:
		_, err = io.CopyBuffer(out, in, make([]byte, 1<<20))
	case Zstd:
		err = zstdCompress(out, in, level)
	case Gzip:
		err = parallel(out, in, gzipBlock, func(dst, src []byte) ([]byte, error) {
			return gzipBlockEncode(dst, src, level)
		})
	case S2:
		opts := []s2.WriterOption{s2.WriterConcurrency(runtime.GOMAXPROCS(0))}
		switch level {
		case 2:
			opts = append(opts, s2.WriterBetterCompression())
		case 3:
			opts = append(opts, s2.WriterBestCompression())
		}
		w := s2.NewWriter(out, opts...)
		_, err = w.ReadFrom(in)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err == nil && out.n == 0 {
			// s2 writes nothing for no input; a lone stream identifier
			// keeps "empty file" apart from "lost file".
			_, err = io.WriteString(out, s2StreamIdentifier)
		}
	}
	return err
}

// Decompress reads the alg stream src to its end and writes the original
// bytes to dst. Damaged or truncated input is an error (never a panic); a
// stream cut exactly between two blocks decodes without error, which is
// why DecompressFile also checks the recorded size and checksum.
func Decompress(ctx context.Context, dst io.Writer, src io.Reader, alg string) (Stats, error) {
	return DecompressFiltered(ctx, dst, src, alg, "")
}

// DecompressFiltered undoes CompressFiltered: it decodes the alg stream
// src and passes the bytes back through filter's inverse into dst.
func DecompressFiltered(ctx context.Context, dst io.Writer, src io.Reader, alg, filter string) (Stats, error) {
	if _, err := LevelsOf(alg); err != nil {
		return Stats{}, err
	}
	_, inv, err := transforms(filter)
	if err != nil {
		return Stats{}, err
	}
	in := &ctxReader{ctx: ctx, r: src}
	out := &countWriter{w: dst}
	if inv == nil {
		err = decompress(out, in, alg)
	} else {
		u := newUnshuffleWriter(out, inv)
		if err = decompress(u, in, alg); err == nil {
			err = u.Close()
		}
	}
	st := Stats{In: in.n, Out: out.n}
	if err != nil {
		return st, fmt.Errorf("decompress: %s: %w", alg, err)
	}
	return st, nil
}

// maxWindow bounds the memory a zstd frame may ask for. The encoders here
// never use more than 8 MiB; damaged input must not make us allocate more.
const maxWindow = 64 << 20

func decompress(out io.Writer, in *ctxReader, alg string) error {
	buf := make([]byte, 1<<20)
	if alg == None {
		_, err := io.CopyBuffer(out, in, buf)
		return err
	}
	// A compressed stream always holds at least one frame, even for an
	// empty file: no bytes at all is a truncated file, not an empty one.
	var first [1]byte
	if n, err := io.ReadFull(in, first[:]); n == 0 {
		if err == io.EOF {
			return fmt.Errorf("no compressed data (the stored file is empty: truncated?)")
		}
		return err
	}
	src := io.MultiReader(strings.NewReader(string(first[:])), in)
	switch alg {
	case Zstd:
		d, err := zstd.NewReader(src,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecoderMaxWindow(maxWindow),
			zstd.WithDecoderMaxMemory(1<<40))
		if err != nil {
			return err
		}
		defer d.Close()
		_, err = io.CopyBuffer(out, d, buf)
		return err
	case Gzip:
		r, err := gzip.NewReader(src)
		if err != nil {
			return err
		}
		if _, err := io.CopyBuffer(out, r, buf); err != nil {
			return err
		}
		return r.Close()
	case S2:
		r := s2.NewReader(src)
		_, err := io.CopyBuffer(out, r, buf)
		return err
	}
	return unknown(alg)
}

// s2StreamIdentifier is the chunk an s2 stream starts with.
const s2StreamIdentifier = "\xff\x06\x00\x00S2sTwO"

// zstdEncoders keeps stream encoders per level for reuse: building one
// allocates its tables.
var zstdEncoders sync.Map // int -> *sync.Pool of *zstd.Encoder

// zstdCompress writes one zstd stream. The encoder compresses blocks
// asynchronously on up to GOMAXPROCS goroutines; measured on this project's
// 2-core machines it is 1.5-2x faster than cutting the input into frames
// encoded in parallel (EncodeAll), at the same ratio.
func zstdCompress(out io.Writer, in io.Reader, level int) error {
	p, _ := zstdEncoders.LoadOrStore(level, &sync.Pool{})
	pool := p.(*sync.Pool)
	e, _ := pool.Get().(*zstd.Encoder)
	if e == nil {
		var err error
		e, err = zstd.NewWriter(out,
			zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithEncoderCRC(true),
			zstd.WithZeroFrames(true))
		if err != nil {
			return err
		}
	} else {
		e.Reset(out)
	}
	_, err := e.ReadFrom(in)
	if cerr := e.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		pool.Put(e)
	}
	return err
}

func gzipBlockEncode(dst, src []byte, level int) ([]byte, error) {
	b := appendWriter{dst}
	w, err := gzip.NewWriterLevel(&b, level)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(src); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.b, nil
}

type appendWriter struct{ b []byte }

func (a *appendWriter) Write(p []byte) (int, error) { a.b = append(a.b, p...); return len(p), nil }

// block is one piece of input on its way through a worker to the writer.
type block struct {
	in, out []byte
	err     error
	done    chan struct{}
}

// parallel reads src in blocks of size bs, encodes each with enc on its own
// goroutine (at most GOMAXPROCS+1 at a time) and writes the results to dst
// in input order. An empty input still yields one (empty) block, so the
// output is never empty.
func parallel(dst io.Writer, src io.Reader, bs int, enc func(dst, src []byte) ([]byte, error)) error {
	workers := runtime.GOMAXPROCS(0)
	queue := make(chan *block, workers)
	pool := sync.Pool{New: func() any { return &block{in: make([]byte, bs)} }}
	werr := make(chan error, 1)
	stop := make(chan struct{}) // closed when the writer gives up
	go func() {
		var err error
		for b := range queue {
			<-b.done
			if err == nil {
				err = b.err
				if err == nil {
					_, err = dst.Write(b.out)
				}
				if err != nil {
					close(stop)
				}
			}
			b.in, b.out, b.err = b.in[:cap(b.in)], b.out[:0], nil
			pool.Put(b)
		}
		werr <- err
	}()
	var rerr error
	for first := true; !isClosed(stop); first = false {
		b := pool.Get().(*block)
		n, err := io.ReadFull(src, b.in)
		if n == 0 && !first && (err == io.EOF || err == io.ErrUnexpectedEOF) {
			pool.Put(b)
			break
		}
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			pool.Put(b)
			rerr = err
			break
		}
		b.in, b.done = b.in[:n], make(chan struct{})
		select {
		case queue <- b:
			// Once queued a block is always encoded: the writer waits for it.
			go func() {
				b.out, b.err = enc(b.out[:0], b.in)
				close(b.done)
			}()
		case <-stop:
			pool.Put(b)
		}
		if err != nil { // the short last block
			break
		}
	}
	close(queue)
	return errors.Join(rerr, <-werr)
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// ctxReader stops reading once ctx is done and counts what it read.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
	n   int64
	// soft: a cancel or read error ends the input with io.EOF and is kept
	// in err. The compressors get a clean end of input that way: the zstd
	// encoder, handed an error instead, returns from Close before its
	// block writer has stopped writing to the destination.
	soft bool
	err  error
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, io.EOF
	}
	if err := c.ctx.Err(); err != nil {
		if c.soft {
			c.err = err
			return 0, io.EOF
		}
		return 0, err
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.soft && err != nil && !errors.Is(err, io.EOF) {
		c.err = err
		return n, io.EOF
	}
	return n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
