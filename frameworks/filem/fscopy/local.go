package fscopy

import (
	"context"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// Local is this node's file system.
type Local struct{}

func (Local) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }

func (Local) ReadDir(name string) ([]fs.FileInfo, error) {
	ents, err := os.ReadDir(name)
	if err != nil {
		return nil, err
	}
	out := make([]fs.FileInfo, 0, len(ents))
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		out = append(out, fi)
	}
	return out, nil
}

func (Local) Readlink(name string) (string, error) { return os.Readlink(name) }

func (Local) Open(name string) (io.ReadCloser, error) { return os.Open(name) }

// chunk is how much is copied between two looks at the context.
const chunk = 1 << 20

func (Local) CreateFile(ctx context.Context, name string, perm fs.FileMode, r io.Reader) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if wt, ok := r.(io.WriterTo); ok && !isFile(r) {
		// A remote file writes itself, keeping many reads in flight.
		_, err = wt.WriteTo(Writer{Ctx: ctx, W: f})
	} else {
		err = copyChunks(ctx, f, r)
	}
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func isFile(r io.Reader) bool { _, ok := r.(*os.File); return ok }

// copyChunks copies in chunks of 1 MiB, each with io.CopyN so the kernel's
// copy_file_range/splice paths still apply between local files.
func copyChunks(ctx context.Context, w io.Writer, r io.Reader) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := io.CopyN(w, r, chunk)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if n < chunk {
			return nil
		}
	}
}

func (Local) Mkdir(name string) error                   { return os.Mkdir(name, 0o700) }
func (Local) Symlink(target, name string) error         { return os.Symlink(target, name) }
func (Local) Chmod(name string, mode fs.FileMode) error { return os.Chmod(name, mode) }
func (Local) Rename(oldname, newname string) error      { return os.Rename(oldname, newname) }
func (Local) RemoveAll(name string) error               { return os.RemoveAll(name) }
func (Local) String() string                            { return "" }

func (Local) Exchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

func (Local) SyncDir(name string) error { return SyncDir(name) }

var (
	_ FS        = Local{}
	_ Exchanger = Local{}
	_ DirSyncer = Local{}
)
