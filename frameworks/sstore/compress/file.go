package compress

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"gompi/frameworks/sstore"
)

// File describes one snapshot file stored by CompressFile: the record the
// local metadata keeps (original name, size and checksum; algorithm and
// stored name when compressed) and how large the stored file is.
type File struct {
	sstore.FileRecord
	StoredSize int64
}

// CompressFile stores the file srcPath in dstDir compressed with alg, under
// its name plus the algorithm's suffix (as it is for none), through a
// temporary name, synced. The record carries the size and CRC-32C of the
// original bytes, counted while they are read.
func CompressFile(ctx context.Context, srcPath, dstDir, alg string, level int) (File, error) {
	name := filepath.Base(srcPath)
	if err := Check(alg, level); err != nil {
		return File{}, fmt.Errorf("compress: %s: %w", srcPath, err)
	}
	in, err := os.Open(srcPath)
	if err != nil {
		return File{}, fmt.Errorf("compress: %w", err)
	}
	defer in.Close()
	stored := name + Suffix(alg)
	w, err := sstore.CreateFile(dstDir, stored)
	if err != nil {
		return File{}, fmt.Errorf("compress: %s: %w", srcPath, err)
	}
	sum := sstore.NewChecksum()
	st, err := Compress(ctx, w, io.TeeReader(in, sum), alg, level)
	if err != nil {
		w.Abort()
		return File{}, fmt.Errorf("compress: %s into %s: %w", srcPath, dstDir, err)
	}
	rec, err := w.Close()
	if err != nil {
		return File{}, fmt.Errorf("compress: %s: %w", srcPath, err)
	}
	f := File{
		FileRecord: sstore.FileRecord{Name: name, Size: st.In, Checksum: sstore.FormatChecksum(sum.Sum32())},
		StoredSize: rec.Size,
	}
	if alg != None {
		f.Compression, f.Stored = alg, stored
	}
	return f, nil
}

// DecompressFile restores the file rec describes from srcDir (its stored
// name there) into dstDir under its original name. The restored bytes are
// counted and checksummed on the way; unless they match rec's size and
// CRC-32C the file is not created and the error wraps sstore.ErrCorrupt
// and names the stored file. A stored file that does not decode is
// corrupt too; failing to read or write (a full disk) is not.
func DecompressFile(ctx context.Context, srcDir string, rec sstore.FileRecord, dstDir string) error {
	alg, storedName := rec.Compression, rec.Stored
	if alg == "" {
		alg, storedName = None, rec.Name
	}
	if storedName == "" || storedName != filepath.Base(storedName) {
		return fmt.Errorf("decompress: %s: %w: stored name %q is not a file name", rec.Name, sstore.ErrCorrupt, storedName)
	}
	path := filepath.Join(srcDir, storedName)
	in, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("decompress: %w", err)
	}
	defer in.Close()
	w, err := sstore.CreateFile(dstDir, rec.Name)
	if err != nil {
		return fmt.Errorf("decompress: %s: %w", path, err)
	}
	src := &errReader{r: in}
	dst := &checkWriter{w: w, sum: sstore.NewChecksum()}
	_, err = Decompress(ctx, dst, src, alg)
	switch {
	case err != nil && (src.err != nil || dst.err != nil || ctx.Err() != nil):
		w.Abort()
		return fmt.Errorf("decompress: %s: %w", path, err)
	case err != nil:
		w.Abort()
		return fmt.Errorf("decompress: %w: %s does not decode: %w", sstore.ErrCorrupt, path, err)
	case dst.n != rec.Size:
		w.Abort()
		return fmt.Errorf("decompress: %w: %s holds %d bytes of %s, %d were recorded (truncated or overwritten)", sstore.ErrCorrupt, path, dst.n, rec.Name, rec.Size)
	}
	if got := sstore.FormatChecksum(dst.sum.Sum32()); got != rec.Checksum {
		w.Abort()
		return fmt.Errorf("decompress: %w: %s decodes to checksum %s, %s was recorded for %s", sstore.ErrCorrupt, path, got, rec.Checksum, rec.Name)
	}
	if _, err := w.Close(); err != nil {
		return fmt.Errorf("decompress: %s: %w", path, err)
	}
	return nil
}

// errReader remembers a read error, so a failing disk is not mistaken for
// damaged data.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		e.err = err
	}
	return n, err
}

type checkWriter struct {
	w   io.Writer
	sum hash.Hash32
	n   int64
	err error
}

func (c *checkWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.sum.Write(p[:n])
	c.n += int64(n)
	if err != nil {
		c.err = err
	}
	return n, err
}
