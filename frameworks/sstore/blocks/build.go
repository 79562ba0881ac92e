package blocks

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	"gompi/frameworks/sstore/snapshot"
)

// Encoder stores one changed block into dst and says how: the encoding
// (None or a compression algorithm) and the filter before it.
type Encoder func(dst io.Writer, block []byte) (enc, filter string, err error)

// Stats is what Build did.
type Stats struct {
	Size     int64  // the file's bytes
	Checksum string // their CRC-32C, as snapshot metadata records it
	Blocks   int    // blocks of the file
	Changed  int    // blocks stored in this sequence's pack
	Stored   int64  // bytes written to the pack
}

// Base says whether prev may serve as the base of a differential
// sequence of a file stored in blocks of blockSize: of that block size,
// and with room left in the chain sstore_stage_full_every bounds (a full
// checkpoint every fullEvery sequences; 1 makes every one full).
func (m *Manifest) Base(blockSize, fullEvery int) bool {
	return m != nil && m.BlockSize == blockSize && m.Chain+1 < fullEvery
}

// Build splits src into blocks of blockSize for sequence seq: a block whose
// hash is the one prev (the manifest of the previous sequence, nil for a
// full checkpoint) records at the same index is referenced where prev has
// it; every other block is encoded into pack, which is named packName in
// this sequence's rank folder. The caller checks Stats' size and checksum
// against what the rank recorded.
func Build(ctx context.Context, src io.Reader, prev *Manifest, seq, blockSize int, pack io.Writer, packName string, enc Encoder) (*Manifest, Stats, error) {
	if blockSize < MinBlockSize || blockSize > MaxBlockSize {
		return nil, Stats{}, fmt.Errorf("blocks: block size %d outside [%d, %d]", blockSize, MinBlockSize, MaxBlockSize)
	}
	if prev != nil && prev.BlockSize != blockSize {
		prev = nil
	}
	m := &Manifest{Seq: seq, BlockSize: blockSize, Packs: map[int]string{}}
	crc := snapshot.NewChecksum()
	cw := &countWriter{w: pack}
	buf := make([]byte, blockSize)
	var st Stats
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return nil, Stats{}, err
		}
		n, err := io.ReadFull(src, buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, Stats{}, fmt.Errorf("blocks: read block %d: %w", i, err)
		}
		if i >= MaxBlocks {
			return nil, Stats{}, fmt.Errorf("blocks: more than %d blocks of %d bytes: use a larger block size", MaxBlocks, blockSize)
		}
		b := buf[:n]
		crc.Write(b)
		e := Entry{Sum: sha256.Sum256(b)}
		if prev != nil && i < len(prev.Blocks) && prev.Blocks[i].Sum == e.Sum && prev.blockLen(i) == int64(n) {
			e = prev.Blocks[i]
			m.Packs[e.Seq] = prev.Packs[e.Seq]
		} else {
			e.Seq, e.Off = seq, cw.n
			if e.Enc, e.Filter, err = enc(cw, b); err != nil {
				return nil, Stats{}, fmt.Errorf("blocks: store block %d: %w", i, err)
			}
			e.Len = cw.n - e.Off
			m.Packs[seq] = packName
			st.Changed++
		}
		m.Blocks = append(m.Blocks, e)
		m.Size += int64(n)
		if n < blockSize {
			break
		}
	}
	if len(m.Referenced()) > 0 {
		m.Chain = prev.Chain + 1
	}
	st.Size, st.Checksum, st.Blocks, st.Stored = m.Size, snapshot.FormatChecksum(crc.Sum32()), len(m.Blocks), cw.n
	return m, st, nil
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
