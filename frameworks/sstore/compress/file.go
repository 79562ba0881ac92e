package compress

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"gompi/frameworks/sstore/snapshot"
)

// File describes one snapshot file stored by CompressFile: the record the
// local metadata keeps (original name, size and checksum; algorithm and
// stored name when compressed) and how large the stored file is.
type File struct {
	snapshot.FileRecord
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
	w, err := snapshot.CreateFile(dstDir, stored)
	if err != nil {
		return File{}, fmt.Errorf("compress: %s: %w", srcPath, err)
	}
	sum := snapshot.NewChecksum()
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
		FileRecord: snapshot.FileRecord{Name: name, Size: st.In, Checksum: snapshot.FormatChecksum(sum.Sum32())},
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
// CRC-32C the file is not created and the error wraps snapshot.ErrCorrupt
// and names the stored file. A stored file that does not decode is
// corrupt too; failing to read or write (a full disk) is not.
func DecompressFile(ctx context.Context, srcDir string, rec snapshot.FileRecord, dstDir string) error {
	w, err := snapshot.CreateFile(dstDir, rec.Name)
	if err != nil {
		return fmt.Errorf("decompress: %s: %w", filepath.Join(srcDir, rec.Name), err)
	}
	if err := decodeChecked(ctx, srcDir, rec, w); err != nil {
		w.Abort()
		return err
	}
	if _, err := w.Close(); err != nil {
		return fmt.Errorf("decompress: %s: %w", filepath.Join(dstDir, rec.Name), err)
	}
	return nil
}

// VerifyFile checks the file rec describes, stored in srcDir compressed
// or not, against rec's size and CRC-32C without writing anything; its
// errors are DecompressFile's.
func VerifyFile(ctx context.Context, srcDir string, rec snapshot.FileRecord) error {
	return decodeChecked(ctx, srcDir, rec, io.Discard)
}

// Verify checks every file of the local snapshot l in dir, whether stored
// compressed, as blocks (dir is then a rank folder of a reference, whose
// sequence folder's name is its sequence) or as is
// (snapshot.RestartPoint.VerifyAllWith takes it).
func Verify(ctx context.Context, dir string, l *snapshot.LocalMeta) error {
	for _, rec := range l.Files {
		var err error
		if rec.Blocks != "" {
			seq, serr := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
			if serr != nil {
				return fmt.Errorf("decompress: %s: stored as blocks outside a sequence folder of a reference", filepath.Join(dir, rec.Name))
			}
			err = VerifyBlocks(ctx, dir, seq, rec)
		} else if rec.Compression == "" {
			// sstore's own check, whose messages say what a user sees
			// wrong with a plain file (its size, its checksum).
			err = (&snapshot.LocalMeta{Files: []snapshot.FileRecord{rec}}).VerifyContext(ctx, dir)
		} else {
			err = VerifyFile(ctx, dir, rec)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeChecked decodes the stored file of rec into out, counting and
// checksumming the bytes, and fails unless they match rec.
func decodeChecked(ctx context.Context, srcDir string, rec snapshot.FileRecord, out io.Writer) error {
	alg := rec.Compression
	if alg == "" {
		alg = None
	}
	storedName, err := rec.StoredName()
	if err != nil {
		return fmt.Errorf("decompress: %s: %w", rec.Name, err)
	}
	path := filepath.Join(srcDir, storedName)
	in, err := snapshot.OpenFile(path) // a regular file of the snapshot, not a link out of it
	if err != nil {
		return fmt.Errorf("decompress: %w", err)
	}
	defer in.Close()
	src := &errReader{r: in}
	dst := &checkWriter{w: out, sum: snapshot.NewChecksum()}
	_, err = DecompressFiltered(ctx, dst, src, alg, rec.Filter)
	switch {
	case err != nil && (src.err != nil || dst.err != nil || ctx.Err() != nil):
		return fmt.Errorf("decompress: %s: %w", path, err)
	case err != nil:
		return fmt.Errorf("decompress: %w: %s does not decode: %w", snapshot.ErrCorrupt, path, err)
	case dst.n != rec.Size:
		return fmt.Errorf("decompress: %w: %s holds %d bytes of %s, %d were recorded (truncated or overwritten)", snapshot.ErrCorrupt, path, dst.n, rec.Name, rec.Size)
	}
	if got := snapshot.FormatChecksum(dst.sum.Sum32()); got != rec.Checksum {
		return fmt.Errorf("decompress: %w: %s decodes to checksum %s, %s was recorded for %s", snapshot.ErrCorrupt, path, got, rec.Checksum, rec.Name)
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
