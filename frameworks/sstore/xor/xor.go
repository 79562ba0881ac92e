// Package xor is the parity math of XOR redundancy sets, as SCR has them:
// a set of k ≥ 3 members (nodes), each holding its own data and one
// parity segment. Member m's data is cut into k−1 chunks, one for each
// segment j ≠ m; segment j is the XOR of the chunks the other members
// give it, and member j keeps it. So every member holds 1/(k−1) of the
// set's parity (RAID-5: the parity rotates over the members), and a lost
// member's data is rebuilt from the k−1 others: each of its chunks is
// the XOR of a surviving segment and the other members' chunks of it.
//
// Members may hold data of different sizes: each member's chunks are
// ceil(size/(k−1)) bytes, the last one shorter or empty, and every chunk
// is padded with zeros to its segment's length, logically (nothing is
// written). A Set records the sizes, which a rebuild needs.
//
// The XOR itself works a machine word at a time (Into); the streaming
// functions read members through io.ReaderAt in blocks, so neither a
// member nor a segment has to fit in memory.
package xor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MinMembers is the smallest set: with two members the parity would be
// a plain copy, which the partner level does better.
const MinMembers = 3

// blockSize is how much of each member is read and XORed at once.
const blockSize = 1 << 20

// Set is the layout of one XOR set: the data size of each member, in set
// order.
type Set struct {
	Sizes []int64
}

// Check reports whether s is a set the math handles.
func (s Set) Check() error {
	if len(s.Sizes) < MinMembers {
		return fmt.Errorf("xor: a set needs at least %d members, this one has %d", MinMembers, len(s.Sizes))
	}
	for m, n := range s.Sizes {
		if n < 0 {
			return fmt.Errorf("xor: member %d has a negative size %d", m, n)
		}
	}
	return nil
}

// K is the number of members.
func (s Set) K() int { return len(s.Sizes) }

// ChunkSize is the size of member m's chunks: ceil(size/(k−1)).
func (s Set) ChunkSize(m int) int64 {
	d := int64(s.K() - 1)
	return (s.Sizes[m] + d - 1) / d
}

// Chunk is where member m's chunk for segment j (j ≠ m) lies in m's
// data: offset and length, the length possibly short (or 0) at the end.
func (s Set) Chunk(m, j int) (off, n int64) {
	c := j
	if j > m {
		c = j - 1
	}
	cs := s.ChunkSize(m)
	off = int64(c) * cs
	n = min(cs, max(0, s.Sizes[m]-off))
	return min(off, s.Sizes[m]), n
}

// SegmentSize is the length of parity segment j: its longest chunk.
func (s Set) SegmentSize(j int) int64 {
	var n int64
	for m := range s.Sizes {
		if m != j {
			n = max(n, s.ChunkSize(m))
		}
	}
	return n
}

// Into XORs src into dst word by word: dst[i] ^= src[i] for i < len(src).
// src must not be longer than dst; a shorter src is dst's tail XORed with
// zeros, which leaves it as it is.
func Into(dst, src []byte) {
	if len(src) > len(dst) {
		panic("xor: source longer than destination")
	}
	dst = dst[:len(src)]
	i := 0
	for ; i+32 <= len(src); i += 32 {
		d, s := dst[i:i+32:i+32], src[i:i+32:i+32]
		a0 := binary.NativeEndian.Uint64(d[0:]) ^ binary.NativeEndian.Uint64(s[0:])
		a1 := binary.NativeEndian.Uint64(d[8:]) ^ binary.NativeEndian.Uint64(s[8:])
		a2 := binary.NativeEndian.Uint64(d[16:]) ^ binary.NativeEndian.Uint64(s[16:])
		a3 := binary.NativeEndian.Uint64(d[24:]) ^ binary.NativeEndian.Uint64(s[24:])
		binary.NativeEndian.PutUint64(d[0:], a0)
		binary.NativeEndian.PutUint64(d[8:], a1)
		binary.NativeEndian.PutUint64(d[16:], a2)
		binary.NativeEndian.PutUint64(d[24:], a3)
	}
	for ; i+8 <= len(src); i += 8 {
		binary.NativeEndian.PutUint64(dst[i:], binary.NativeEndian.Uint64(dst[i:])^binary.NativeEndian.Uint64(src[i:]))
	}
	for ; i < len(src); i++ {
		dst[i] ^= src[i]
	}
}

// Segment writes parity segment j of s to w: the XOR of every other
// member's chunk for j, read from members (indexed like s.Sizes; member
// j's own entry is not read and may be nil).
func Segment(w io.Writer, s Set, j int, members []io.ReaderAt) error {
	if err := s.checkCall(j, members); err != nil {
		return err
	}
	var others []int
	for m := range s.Sizes {
		if m != j {
			others = append(others, m)
		}
	}
	return s.combine(w, s.SegmentSize(j), others, func(m int) (io.ReaderAt, int64, int64) {
		off, n := s.Chunk(m, j)
		return members[m], off, n
	})
}

// Rebuild writes the data of the lost member of s to w, from the other
// members' data (members, indexed like s.Sizes, the lost one's entry not
// read) and their parity segments (segments, likewise).
func Rebuild(w io.Writer, s Set, lost int, members, segments []io.ReaderAt) error {
	if err := s.checkCall(lost, members); err != nil {
		return err
	}
	if len(segments) != s.K() {
		return fmt.Errorf("xor: %d segments given for a set of %d", len(segments), s.K())
	}
	for j := range s.Sizes {
		if j == lost {
			continue
		}
		// Chunk (lost, j) = segment j ^ every other survivor's chunk for j.
		var sources []int
		for m := range s.Sizes {
			if m != lost && m != j {
				sources = append(sources, m)
			}
		}
		_, n := s.Chunk(lost, j)
		err := s.combine(w, n, append([]int{-1}, sources...), func(m int) (io.ReaderAt, int64, int64) {
			if m == -1 {
				return segments[j], 0, s.SegmentSize(j)
			}
			off, cn := s.Chunk(m, j)
			return members[m], off, cn
		})
		if err != nil {
			return fmt.Errorf("xor: rebuild member %d from segment %d: %w", lost, j, err)
		}
	}
	return nil
}

func (s Set) checkCall(own int, members []io.ReaderAt) error {
	if err := s.Check(); err != nil {
		return err
	}
	if own < 0 || own >= s.K() {
		return fmt.Errorf("xor: member %d is not in a set of %d", own, s.K())
	}
	if len(members) != s.K() {
		return fmt.Errorf("xor: %d members given for a set of %d", len(members), s.K())
	}
	for m, r := range members {
		if m != own && r == nil {
			return fmt.Errorf("xor: member %d is needed and missing", m)
		}
	}
	return nil
}

// combine writes length bytes to w: the XOR of the sources, each a range
// (off, n) of a reader that counts as zeros past n.
func (s Set) combine(w io.Writer, length int64, sources []int, src func(int) (io.ReaderAt, int64, int64)) error {
	acc := make([]byte, min(length, blockSize))
	buf := make([]byte, len(acc))
	for pos := int64(0); pos < length; {
		b := acc[:min(int64(len(acc)), length-pos)]
		clear(b)
		for _, m := range sources {
			r, off, n := src(m)
			if pos >= n {
				continue
			}
			part := buf[:min(int64(len(b)), n-pos)]
			// A ReaderAt may report io.EOF with a full read at the end.
			if got, err := r.ReadAt(part, off+pos); got < len(part) {
				if err == nil || errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return fmt.Errorf("read %d bytes at %d: %w", len(part), off+pos, err)
			}
			Into(b, part)
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		pos += int64(len(b))
	}
	return nil
}
