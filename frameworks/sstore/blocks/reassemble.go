package blocks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gompi/frameworks/sstore/snapshot"
)

// Decoder writes the bytes of one block, stored in src with encoding enc
// (None or a compression algorithm) after filter, into dst.
type Decoder func(ctx context.Context, dst io.Writer, src io.Reader, enc, filter string) error

// Opener opens the pack named pack of sequence seq (of the same rank).
type Opener func(seq int, pack string) (*os.File, error)

// DirOpener opens packs in the layout of a reference, the rank folder
// rankDir being <ref>/<seq>/<rank folder>: sequence s's pack is
// <ref>/<s>/<rank folder>/<pack>. Neither folder may be a symbolic link,
// and the pack is opened as snapshot.OpenFile opens a snapshot's files,
// so a manifest cannot make a restart read outside the reference.
func DirOpener(rankDir string) Opener {
	root, rank := filepath.Dir(filepath.Dir(rankDir)), filepath.Base(rankDir)
	return func(seq int, pack string) (*os.File, error) {
		if err := CheckName(pack); err != nil {
			return nil, err
		}
		dir := root
		for i, part := range []string{strconv.Itoa(seq), rank} {
			dir = filepath.Join(dir, part)
			fi, err := os.Lstat(dir)
			if errors.Is(err, fs.ErrNotExist) {
				what := []string{"sequence " + strconv.Itoa(seq), rank + " in sequence " + strconv.Itoa(seq)}[i]
				return nil, fmt.Errorf("%s does not exist in the reference (%s): %w", what, dir, err)
			}
			if err != nil {
				return nil, err
			}
			if !fi.IsDir() {
				return nil, fmt.Errorf("%w: %s is not a folder (a symbolic link?)", snapshot.ErrCorrupt, dir)
			}
		}
		return snapshot.OpenFile(filepath.Join(dir, pack))
	}
}

// ReadManifest reads the manifest of sequence seq at path, a regular file
// of at most MaxManifestSize bytes.
func ReadManifest(path string, seq int) (*Manifest, error) {
	f, err := snapshot.OpenFile(path)
	if err != nil {
		return nil, fmt.Errorf("blocks: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() > MaxManifestSize {
		if err == nil {
			err = fmt.Errorf("%w: %s is %d bytes, more than a manifest of %d blocks takes", snapshot.ErrCorrupt, path, fi.Size(), MaxBlocks)
		}
		return nil, fmt.Errorf("blocks: %w", err)
	}
	return Parse(f, path, seq)
}

// MaxManifestSize bounds a manifest file: MaxBlocks lines of at most 200
// bytes and its packs.
const MaxManifestSize = MaxBlocks*200 + maxChain*300

// Check says whether m may be the manifest of rec in sequence seq: of
// rec's size, and referencing only sequences rec's From lists (retention
// keeps those packs; any other may be gone).
func (m *Manifest) Check(rec snapshot.FileRecord) error {
	if m.Size != rec.Size {
		return fmt.Errorf("%w: manifest of %s records %d bytes, snapshot_meta %d", snapshot.ErrCorrupt, rec.Name, m.Size, rec.Size)
	}
	from, err := snapshot.ParseSeqs(rec.From)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", snapshot.ErrCorrupt, rec.Name, err)
	}
	for _, s := range m.Referenced() {
		if !slices.Contains(from, s) {
			return fmt.Errorf("%w: manifest of %s references sequence %d, which snapshot_meta does not list (from %v)", snapshot.ErrCorrupt, rec.Name, s, rec.From)
		}
	}
	return nil
}

// BlockError names a block that does not verify.
type BlockError struct {
	Seq   int    // the sequence whose pack holds it
	File  string // the file it belongs to
	Index int
	Err   error
}

func (e *BlockError) Error() string {
	return fmt.Sprintf("sequence %d, file %s, block %d: %v", e.Seq, e.File, e.Index, e.Err)
}

func (e *BlockError) Unwrap() error { return e.Err }

// Reassemble writes the file rec of sequence seq, stored as blocks per m,
// into dst: each block read from its pack (open), decoded (dec) and
// checked against its recorded hash and length, then the whole against
// rec's size and CRC-32C. A block that does not verify is a *BlockError
// wrapping snapshot.ErrCorrupt, never written.
func Reassemble(ctx context.Context, m *Manifest, rec snapshot.FileRecord, open Opener, dec Decoder, dst io.Writer) error {
	if err := m.Check(rec); err != nil {
		return fmt.Errorf("blocks: %w", err)
	}
	packs := map[int]*os.File{}
	defer func() {
		for _, f := range packs {
			f.Close()
		}
	}()
	crc := snapshot.NewChecksum()
	var buf bytes.Buffer
	for i, e := range m.Blocks {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, ok := packs[e.Seq]
		if !ok {
			var err error
			if f, err = open(e.Seq, m.Packs[e.Seq]); err != nil {
				return &BlockError{Seq: e.Seq, File: rec.Name, Index: i, Err: fmt.Errorf("pack %s: %w", m.Packs[e.Seq], err)}
			}
			packs[e.Seq] = f
		}
		buf.Reset()
		src := &errReader{r: io.NewSectionReader(f, e.Off, e.Len)}
		err := dec(ctx, &buf, src, e.Enc, e.Filter)
		switch {
		case err != nil && (src.err != nil || ctx.Err() != nil):
			return &BlockError{Seq: e.Seq, File: rec.Name, Index: i, Err: err}
		case err == nil && src.n != e.Len:
			err = fmt.Errorf("pack %s holds %d of its %d bytes at %d (truncated)", m.Packs[e.Seq], src.n, e.Len, e.Off)
		case err == nil && int64(buf.Len()) != m.blockLen(i):
			err = fmt.Errorf("decodes to %d bytes, not %d", buf.Len(), m.blockLen(i))
		case err == nil && sha256.Sum256(buf.Bytes()) != e.Sum:
			err = errors.New("its SHA-256 is not the one recorded")
		}
		if err != nil {
			return &BlockError{Seq: e.Seq, File: rec.Name, Index: i, Err: fmt.Errorf("%w: %w", snapshot.ErrCorrupt, err)}
		}
		crc.Write(buf.Bytes())
		if _, err := dst.Write(buf.Bytes()); err != nil {
			return fmt.Errorf("blocks: %s: %w", rec.Name, err)
		}
	}
	if sum := snapshot.FormatChecksum(crc.Sum32()); sum != rec.Checksum {
		return fmt.Errorf("blocks: %w: %s reassembles to checksum %s, %s was recorded", snapshot.ErrCorrupt, rec.Name, sum, rec.Checksum)
	}
	return nil
}

// errReader counts what it reads and remembers a read error, so a failing
// disk is not mistaken for a damaged block.
type errReader struct {
	r   io.Reader
	n   int64
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.n += int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		e.err = err
	}
	return n, err
}
