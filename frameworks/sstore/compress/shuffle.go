package compress

import (
	"encoding/binary"
	"fmt"
	"io"

	"gompi/frameworks/sstore/snapshot"
)

// The byte-shuffle filter (HDF5's shuffle, Blosc's): for elements of k
// bytes, byte 0 of every element comes first, then byte 1 of every
// element, and so on. A smooth float64 field has near-equal sign and
// exponent bytes and noisy low mantissa bytes: shuffled, the high bytes
// form long runs the compressor finds, where interleaved it finds none.
//
// A stream is shuffled in blocks of ShuffleBlock bytes (the last one
// shorter), each on its own; within a block the whole elements are
// shuffled and the bytes after the last whole element are kept as they
// are. The block size is part of the stored format: a restore must cut
// the stream where the store cut it.
const ShuffleBlock = 1 << 20

// Shuffle writes src shuffled for elements of k bytes (k >= 1) into dst,
// which must be as long as src. The len(src) mod k trailing bytes are
// copied as they are.
func Shuffle(dst, src []byte, k int) {
	if len(dst) != len(src) {
		panic("compress: Shuffle: dst and src differ in length")
	}
	n := len(src) / k
	switch {
	case k == 8:
		shuffle8(dst, src, n)
	case k == 4:
		shuffle4(dst, src, n)
	default:
		for i := range n {
			for j := range k {
				dst[j*n+i] = src[i*k+j]
			}
		}
	}
	copy(dst[n*k:], src[n*k:])
}

// Unshuffle undoes Shuffle: dst receives the elements of k bytes whose
// shuffled form is src.
func Unshuffle(dst, src []byte, k int) {
	if len(dst) != len(src) {
		panic("compress: Unshuffle: dst and src differ in length")
	}
	n := len(src) / k
	switch {
	case k == 8:
		unshuffle8(dst, src, n)
	case k == 4:
		unshuffle4(dst, src, n)
	default:
		for i := range n {
			for j := range k {
				dst[i*k+j] = src[j*n+i]
			}
		}
	}
	copy(dst[n*k:], src[n*k:])
}

// transpose8 transposes the 8x8 byte matrix whose rows are the words
// (byte j of word i, least significant first, is element i's byte j) in
// three rounds of swapping blocks of 4, 2 and 1 bytes: 72 register
// operations for 64 bytes, where a byte loop needs 64 loads and stores
// with their index arithmetic. The transpose is its own inverse. Written
// out on locals so the words stay in registers.
func transpose8(a, b, c, d, e, f, g, h uint64) (uint64, uint64, uint64, uint64, uint64, uint64, uint64, uint64) {
	const m32, m16, m8 = 0x00000000FFFFFFFF, 0x0000FFFF0000FFFF, 0x00FF00FF00FF00FF
	var t uint64
	t = (a>>32 ^ e) & m32
	a, e = a^t<<32, e^t
	t = (b>>32 ^ f) & m32
	b, f = b^t<<32, f^t
	t = (c>>32 ^ g) & m32
	c, g = c^t<<32, g^t
	t = (d>>32 ^ h) & m32
	d, h = d^t<<32, h^t

	t = (a>>16 ^ c) & m16
	a, c = a^t<<16, c^t
	t = (b>>16 ^ d) & m16
	b, d = b^t<<16, d^t
	t = (e>>16 ^ g) & m16
	e, g = e^t<<16, g^t
	t = (f>>16 ^ h) & m16
	f, h = f^t<<16, h^t

	t = (a>>8 ^ b) & m8
	a, b = a^t<<8, b^t
	t = (c>>8 ^ d) & m8
	c, d = c^t<<8, d^t
	t = (e>>8 ^ f) & m8
	e, f = e^t<<8, f^t
	t = (g>>8 ^ h) & m8
	g, h = g^t<<8, h^t
	return a, b, c, d, e, f, g, h
}

// rows8 cuts the shuffled form of n elements of 8 bytes into its 8 byte
// planes.
func rows8(b []byte, n int) (r0, r1, r2, r3, r4, r5, r6, r7 []byte) {
	b = b[:8*n]
	return b[:n], b[n : 2*n], b[2*n : 3*n], b[3*n : 4*n], b[4*n : 5*n], b[5*n : 6*n], b[6*n : 7*n], b[7*n : 8*n]
}

// shuffle8 shuffles n elements of 8 bytes: 8 elements at a time through
// transpose8, the rest (fewer than 8) byte by byte.
func shuffle8(dst, src []byte, n int) {
	le := binary.LittleEndian
	r0, r1, r2, r3, r4, r5, r6, r7 := rows8(dst, n)
	g := n / 8 * 8
	for i := 0; i < g; i += 8 {
		s := src[i*8 : i*8+64 : i*8+64]
		a, b, c, d, e, f, gg, h := transpose8(le.Uint64(s[0:]), le.Uint64(s[8:]), le.Uint64(s[16:]), le.Uint64(s[24:]),
			le.Uint64(s[32:]), le.Uint64(s[40:]), le.Uint64(s[48:]), le.Uint64(s[56:]))
		le.PutUint64(r0[i:], a)
		le.PutUint64(r1[i:], b)
		le.PutUint64(r2[i:], c)
		le.PutUint64(r3[i:], d)
		le.PutUint64(r4[i:], e)
		le.PutUint64(r5[i:], f)
		le.PutUint64(r6[i:], gg)
		le.PutUint64(r7[i:], h)
	}
	for i := g; i < n; i++ {
		for j := range 8 {
			dst[j*n+i] = src[i*8+j]
		}
	}
}

func unshuffle8(dst, src []byte, n int) {
	le := binary.LittleEndian
	r0, r1, r2, r3, r4, r5, r6, r7 := rows8(src, n)
	g := n / 8 * 8
	for i := 0; i < g; i += 8 {
		a, b, c, d, e, f, gg, h := transpose8(le.Uint64(r0[i:]), le.Uint64(r1[i:]), le.Uint64(r2[i:]), le.Uint64(r3[i:]),
			le.Uint64(r4[i:]), le.Uint64(r5[i:]), le.Uint64(r6[i:]), le.Uint64(r7[i:]))
		o := dst[i*8 : i*8+64 : i*8+64]
		le.PutUint64(o[0:], a)
		le.PutUint64(o[8:], b)
		le.PutUint64(o[16:], c)
		le.PutUint64(o[24:], d)
		le.PutUint64(o[32:], e)
		le.PutUint64(o[40:], f)
		le.PutUint64(o[48:], gg)
		le.PutUint64(o[56:], h)
	}
	for i := g; i < n; i++ {
		for j := range 8 {
			dst[i*8+j] = src[j*n+i]
		}
	}
}

// DeltaShuffle8 is Shuffle for 8-byte elements with each element first
// replaced by its difference, as a little-endian integer, from the one
// before it (the first from 0). Neighbours of a smooth float64 field share
// sign, exponent and high mantissa bits: their differences have high
// bytes of all zeros or all ones, which the shuffle gathers into long
// runs. Measured on examples/field's grid it raises zstd's ratio from
// 1.52 (shuffle alone) to 1.84 and s2's from 1.41 to 1.61, and the
// compressors run faster on the better-compressing bytes.
func DeltaShuffle8(dst, src []byte) {
	if len(dst) != len(src) {
		panic("compress: DeltaShuffle8: dst and src differ in length")
	}
	n := len(src) / 8
	le := binary.LittleEndian
	r0, r1, r2, r3, r4, r5, r6, r7 := rows8(dst, n)
	var prev uint64
	g := n / 8 * 8
	for i := 0; i < g; i += 8 {
		s := src[i*8 : i*8+64 : i*8+64]
		v0, v1, v2, v3 := le.Uint64(s[0:]), le.Uint64(s[8:]), le.Uint64(s[16:]), le.Uint64(s[24:])
		v4, v5, v6, v7 := le.Uint64(s[32:]), le.Uint64(s[40:]), le.Uint64(s[48:]), le.Uint64(s[56:])
		a, b, c, d, e, f, gg, h := transpose8(v0-prev, v1-v0, v2-v1, v3-v2, v4-v3, v5-v4, v6-v5, v7-v6)
		prev = v7
		le.PutUint64(r0[i:], a)
		le.PutUint64(r1[i:], b)
		le.PutUint64(r2[i:], c)
		le.PutUint64(r3[i:], d)
		le.PutUint64(r4[i:], e)
		le.PutUint64(r5[i:], f)
		le.PutUint64(r6[i:], gg)
		le.PutUint64(r7[i:], h)
	}
	var w [8]byte
	for i := g; i < n; i++ {
		v := le.Uint64(src[i*8:])
		le.PutUint64(w[:], v-prev)
		prev = v
		for j := range 8 {
			dst[j*n+i] = w[j]
		}
	}
	copy(dst[n*8:], src[n*8:])
}

// UndoDeltaShuffle8 undoes DeltaShuffle8.
func UndoDeltaShuffle8(dst, src []byte) {
	if len(dst) != len(src) {
		panic("compress: UndoDeltaShuffle8: dst and src differ in length")
	}
	n := len(src) / 8
	le := binary.LittleEndian
	r0, r1, r2, r3, r4, r5, r6, r7 := rows8(src, n)
	var prev uint64
	g := n / 8 * 8
	for i := 0; i < g; i += 8 {
		a, b, c, d, e, f, gg, h := transpose8(le.Uint64(r0[i:]), le.Uint64(r1[i:]), le.Uint64(r2[i:]), le.Uint64(r3[i:]),
			le.Uint64(r4[i:]), le.Uint64(r5[i:]), le.Uint64(r6[i:]), le.Uint64(r7[i:]))
		a += prev
		b += a
		c += b
		d += c
		e += d
		f += e
		gg += f
		h += gg
		prev = h
		o := dst[i*8 : i*8+64 : i*8+64]
		le.PutUint64(o[0:], a)
		le.PutUint64(o[8:], b)
		le.PutUint64(o[16:], c)
		le.PutUint64(o[24:], d)
		le.PutUint64(o[32:], e)
		le.PutUint64(o[40:], f)
		le.PutUint64(o[48:], gg)
		le.PutUint64(o[56:], h)
	}
	var w [8]byte
	for i := g; i < n; i++ {
		for j := range 8 {
			w[j] = src[j*n+i]
		}
		prev += le.Uint64(w[:])
		le.PutUint64(dst[i*8:], prev)
	}
	copy(dst[n*8:], src[n*8:])
}

// transpose4 transposes the 4x4 byte matrix of four 32-bit words in two
// rounds, as transpose8 does in three.
func transpose4(a, b, c, d uint32) (uint32, uint32, uint32, uint32) {
	const m16, m8 = 0x0000FFFF, 0x00FF00FF
	var t uint32
	t = (a>>16 ^ c) & m16
	a, c = a^t<<16, c^t
	t = (b>>16 ^ d) & m16
	b, d = b^t<<16, d^t
	t = (a>>8 ^ b) & m8
	a, b = a^t<<8, b^t
	t = (c>>8 ^ d) & m8
	c, d = c^t<<8, d^t
	return a, b, c, d
}

func rows4(b []byte, n int) (r0, r1, r2, r3 []byte) {
	b = b[:4*n]
	return b[:n], b[n : 2*n], b[2*n : 3*n], b[3*n : 4*n]
}

func shuffle4(dst, src []byte, n int) {
	le := binary.LittleEndian
	r0, r1, r2, r3 := rows4(dst, n)
	g := n / 4 * 4
	for i := 0; i < g; i += 4 {
		s := src[i*4 : i*4+16 : i*4+16]
		a, b, c, d := transpose4(le.Uint32(s[0:]), le.Uint32(s[4:]), le.Uint32(s[8:]), le.Uint32(s[12:]))
		le.PutUint32(r0[i:], a)
		le.PutUint32(r1[i:], b)
		le.PutUint32(r2[i:], c)
		le.PutUint32(r3[i:], d)
	}
	for i := g; i < n; i++ {
		for j := range 4 {
			dst[j*n+i] = src[i*4+j]
		}
	}
}

func unshuffle4(dst, src []byte, n int) {
	le := binary.LittleEndian
	r0, r1, r2, r3 := rows4(src, n)
	g := n / 4 * 4
	for i := 0; i < g; i += 4 {
		a, b, c, d := transpose4(le.Uint32(r0[i:]), le.Uint32(r1[i:]), le.Uint32(r2[i:]), le.Uint32(r3[i:]))
		o := dst[i*4 : i*4+16 : i*4+16]
		le.PutUint32(o[0:], a)
		le.PutUint32(o[4:], b)
		le.PutUint32(o[8:], c)
		le.PutUint32(o[12:], d)
	}
	for i := g; i < n; i++ {
		for j := range 4 {
			dst[i*4+j] = src[j*n+i]
		}
	}
}

// transform is a filter's forward or inverse pass over one block.
type transform func(dst, src []byte)

// transforms returns filter's forward and inverse passes (nil for none).
func transforms(filter string) (fwd, inv transform, err error) {
	switch filter {
	case "":
		return nil, nil, nil
	case Shuffle4:
		return func(d, s []byte) { Shuffle(d, s, 4) }, func(d, s []byte) { Unshuffle(d, s, 4) }, nil
	case Shuffle8:
		return func(d, s []byte) { Shuffle(d, s, 8) }, func(d, s []byte) { Unshuffle(d, s, 8) }, nil
	case DeltaShuffle:
		return DeltaShuffle8, UndoDeltaShuffle8, nil
	}
	return nil, nil, fmt.Errorf("compress: unknown filter %q; this gompi knows %s, %s and %s", filter, Shuffle4, Shuffle8, DeltaShuffle)
}

// shuffleReader passes what it reads from r through a filter, block by
// block.
type shuffleReader struct {
	r        io.Reader
	fwd      transform
	in, out  []byte
	pos, end int // unread shuffled bytes: out[pos:end]
	err      error
}

func newShuffleReader(r io.Reader, fwd transform) *shuffleReader {
	return &shuffleReader{r: r, fwd: fwd, in: make([]byte, ShuffleBlock), out: make([]byte, ShuffleBlock)}
}

func (s *shuffleReader) Read(p []byte) (int, error) {
	if s.pos == s.end {
		if s.err != nil {
			return 0, s.err
		}
		n, err := io.ReadFull(s.r, s.in)
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		s.err = err
		s.fwd(s.out[:n], s.in[:n])
		s.pos, s.end = 0, n
		if n == 0 {
			return 0, s.err
		}
	}
	n := copy(p, s.out[s.pos:s.end])
	s.pos += n
	return n, nil
}

// unshuffleWriter passes what is written to it through a filter's
// inverse, block by block, into w; Close writes the last (short) block.
type unshuffleWriter struct {
	w       io.Writer
	inv     transform
	in, out []byte
	n       int // bytes of in filled
}

func newUnshuffleWriter(w io.Writer, inv transform) *unshuffleWriter {
	return &unshuffleWriter{w: w, inv: inv, in: make([]byte, ShuffleBlock), out: make([]byte, ShuffleBlock)}
}

func (u *unshuffleWriter) Write(p []byte) (int, error) {
	done := 0
	for len(p) > 0 {
		c := copy(u.in[u.n:], p)
		u.n += c
		p = p[c:]
		if u.n == len(u.in) {
			if err := u.flush(); err != nil {
				return done, err
			}
		}
		done += c
	}
	return done, nil
}

func (u *unshuffleWriter) flush() error {
	u.inv(u.out[:u.n], u.in[:u.n])
	_, err := u.w.Write(u.out[:u.n])
	u.n = 0
	return err
}

// Close writes the bytes of the last block.
func (u *unshuffleWriter) Close() error {
	if u.n == 0 {
		return nil
	}
	return u.flush()
}

// Filter names, as the snapshot metadata records them: a filter applies
// to a file's bytes before they are compressed.
const (
	Shuffle4 = snapshot.FilterShuffle4 // float32, int32
	Shuffle8 = snapshot.FilterShuffle8 // float64, int64
	// DeltaShuffle: differences of 8-byte elements, shuffled
	// (DeltaShuffle8): smooth float64 fields.
	DeltaShuffle = snapshot.FilterDeltaShuffle8
)
