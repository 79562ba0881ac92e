// Package fscopy copies files and directory trees between two file systems
// (local, or remote through a FileM component such as sftp) the way every
// FileM must: the destination is built under a temporary name next to it
// and renamed into place, so a reader sees the old destination or the
// complete new one, and a failed copy leaves nothing behind.
package fscopy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// FS is what a copy needs of a file system. Names are slash-separated.
// Errors for missing names wrap fs.ErrNotExist.
type FS interface {
	Lstat(name string) (fs.FileInfo, error)
	ReadDir(name string) ([]fs.FileInfo, error)
	Readlink(name string) (string, error)
	Open(name string) (io.ReadCloser, error)
	// CreateFile creates name, which must not exist, fills it from r,
	// gives it perm and makes it durable. It stops with ctx's error once
	// ctx is done, leaving the partial file for the caller to remove.
	CreateFile(ctx context.Context, name string, perm fs.FileMode, r io.Reader) error
	// Mkdir creates name, which must not exist, with mode 0700.
	Mkdir(name string) error
	Symlink(target, name string) error
	Chmod(name string, mode fs.FileMode) error
	// Rename moves oldname to newname; if both are files, newname is
	// replaced atomically.
	Rename(oldname, newname string) error
	// RemoveAll removes name and all it holds; nil if it does not exist.
	RemoveAll(name string) error
	// String names the file system in messages ("" for this node's).
	String() string
}

// Exchanger is implemented by file systems that can swap two names
// atomically (Linux renameat2 RENAME_EXCHANGE), so a directory is replaced
// without an instant where the destination is missing.
type Exchanger interface {
	Exchange(a, b string) error
}

// DirSyncer is implemented by file systems that can make the entries of a
// directory durable.
type DirSyncer interface {
	SyncDir(name string) error
}

// TempMarker is part of every temporary name, so a leftover is recognisable.
const TempMarker = ".filem-tmp-"

// TempName returns a fresh temporary name for final, in final's directory.
func TempName(final string) string {
	var b [8]byte
	rand.Read(b[:])
	return path.Join(path.Dir(final), "."+path.Base(final)+TempMarker+hex.EncodeToString(b[:]))
}

// IsTemp reports whether name is one TempName made (or its ".old"
// companion, where Replace moves an old destination aside).
func IsTemp(name string) bool { return strings.Contains(path.Base(name), TempMarker) }

// FinalName is the destination a temporary name stands for.
func FinalName(tmp string) string {
	base, _, _ := strings.Cut(strings.TrimPrefix(path.Base(tmp), "."), TempMarker)
	return path.Join(path.Dir(tmp), base)
}

// Recover cleans up after copies that stopped anywhere (a lost
// connection): a destination moved aside and not replaced is moved back,
// every other temporary name is removed.
func Recover(f FS, temps []string) error {
	var errs []error
	done := map[string]bool{}
	for _, t := range temps {
		if done[t] || !IsTemp(t) {
			continue
		}
		done[t] = true
		if strings.HasSuffix(t, ".old") {
			final := FinalName(t)
			if _, err := f.Lstat(t); err != nil {
				continue // never moved aside, or already removed
			}
			if _, err := f.Lstat(final); errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, f.Rename(t, final))
				continue
			}
		}
		errs = append(errs, f.RemoveAll(t))
	}
	return errors.Join(errs...)
}

// Copy copies the file or tree at srcName on src to dstName on dst,
// replacing dstName and creating its missing parents with parentMode. A
// symlink inside a tree is copied as a symlink; at the top, it is followed.
func Copy(ctx context.Context, src FS, srcName string, dst FS, dstName string, parentMode fs.FileMode) error {
	if srcName == "" || dstName == "" {
		return errors.New("empty path")
	}
	fi, err := statFollow(src, srcName)
	if err != nil {
		return err
	}
	if fi.IsDir() && src == dst && inside(dstName, srcName) {
		return fmt.Errorf("destination %s is inside the source directory %s; choose a destination outside it", dstName, srcName)
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is a %s, not a regular file or directory; only files and directories can be copied", srcName, fi.Mode().Type())
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := path.Dir(dstName)
	if err := MkdirAll(dst, dir, parentMode); err != nil {
		return fmt.Errorf("create parent directory %s: %w", dir, err)
	}
	tmp := TempName(dstName)
	if fi.IsDir() {
		err = dst.Mkdir(tmp)
		if err == nil {
			err = copyTree(ctx, src, srcName, dst, tmp, fi.Mode())
		}
	} else {
		err = copyFile(ctx, src, srcName, dst, tmp, fi.Mode())
	}
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = Replace(dst, tmp, dstName)
	}
	if err != nil {
		Cleanup(dst, tmp)
		return err
	}
	if s, ok := dst.(DirSyncer); ok {
		return s.SyncDir(dir)
	}
	return nil
}

// Cleanup removes a temporary name after a failed copy, as far as the file
// system still lets it.
func Cleanup(dst FS, tmp string) {
	if IsTemp(tmp) {
		dst.RemoveAll(tmp)
	}
}

// statFollow is Lstat, following a symlink at the top.
func statFollow(f FS, name string) (fs.FileInfo, error) {
	fi, err := f.Lstat(name)
	for i := 0; err == nil && fi.Mode()&fs.ModeSymlink != 0; i++ {
		if i == 40 {
			return nil, fmt.Errorf("%s: too many levels of symbolic links", name)
		}
		var target string
		if target, err = f.Readlink(name); err != nil {
			return nil, err
		}
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(name), target)
		}
		name = target
		fi, err = f.Lstat(name)
	}
	return fi, err
}

func inside(name, dir string) bool {
	name, dir = path.Clean(name), path.Clean(dir)
	return name != dir && strings.HasPrefix(name, strings.TrimSuffix(dir, "/")+"/")
}

// Replace moves tmp to final. A file over a file is one rename; where a
// directory is involved the two are exchanged atomically when the file
// system can, else the old destination is moved aside first (a reader may
// then briefly find no destination, but never a partial one).
func Replace(f FS, tmp, final string) error {
	old, err := f.Lstat(final)
	if errors.Is(err, fs.ErrNotExist) {
		return f.Rename(tmp, final)
	}
	if err != nil {
		return err
	}
	tfi, err := f.Lstat(tmp)
	if err != nil {
		return err
	}
	if !old.IsDir() && !tfi.IsDir() {
		if err := f.Rename(tmp, final); err == nil {
			return nil
		}
		// A server without an atomic replacing rename: move aside below.
	}
	if x, ok := f.(Exchanger); ok {
		if err := x.Exchange(tmp, final); err == nil {
			return f.RemoveAll(tmp) // it now holds the old destination
		}
	}
	aside := tmp + ".old"
	if err := f.Rename(final, aside); err != nil {
		return fmt.Errorf("move the old %s aside: %w", final, err)
	}
	if err := f.Rename(tmp, final); err != nil {
		if back := f.Rename(aside, final); back != nil {
			return fmt.Errorf("replace %s: %w (and the old copy stays at %s: %v)", final, err, aside, back)
		}
		return fmt.Errorf("replace %s: %w", final, err)
	}
	return f.RemoveAll(aside)
}

func copyFile(ctx context.Context, src FS, srcName string, dst FS, dstName string, mode fs.FileMode) error {
	in, err := src.Open(srcName)
	if err != nil {
		return err
	}
	defer in.Close()
	return dst.CreateFile(ctx, dstName, KeepMode(mode), in)
}

// copyTree fills the existing, empty directory dstName with the contents
// of srcName and then gives it mode, so a read-only source directory can
// still be filled. The whole tree is under a temporary name, so its
// entries are written directly.
func copyTree(ctx context.Context, src FS, srcName string, dst FS, dstName string, mode fs.FileMode) error {
	ents, err := src.ReadDir(srcName)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, d := path.Join(srcName, e.Name()), path.Join(dstName, e.Name())
		switch {
		case e.Mode().IsRegular():
			err = copyFile(ctx, src, s, dst, d, e.Mode())
		case e.IsDir():
			if err = dst.Mkdir(d); err == nil {
				err = copyTree(ctx, src, s, dst, d, e.Mode())
			}
		case e.Mode()&fs.ModeSymlink != 0:
			var target string
			if target, err = src.Readlink(s); err == nil {
				err = dst.Symlink(target, d)
			}
		default:
			err = fmt.Errorf("%s is a %s, not a regular file, directory or symlink; it cannot be copied", s, e.Mode().Type())
		}
		if err != nil {
			return err
		}
	}
	if err := dst.Chmod(dstName, KeepMode(mode)); err != nil {
		return err
	}
	if s, ok := dst.(DirSyncer); ok {
		return s.SyncDir(dstName)
	}
	return nil
}

// SyncDir makes the entries of dir durable: a create or rename is only
// stable once its directory is synced. A file system that cannot sync a
// directory (EINVAL) has nothing more to make durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return nil
}

// KeepMode is the part of a mode a copy keeps.
func KeepMode(m fs.FileMode) fs.FileMode {
	return m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// Remove removes name and all it holds; removing what does not exist is
// no error.
func Remove(ctx context.Context, f FS, name string) error {
	if name == "" {
		return errors.New("empty path")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return f.RemoveAll(name)
}

// Reader stops reading once ctx is done.
type Reader struct {
	Ctx context.Context
	R   io.Reader
}

func (r Reader) Read(p []byte) (int, error) {
	if err := r.Ctx.Err(); err != nil {
		return 0, err
	}
	return r.R.Read(p)
}

// Writer stops writing once ctx is done.
type Writer struct {
	Ctx context.Context
	W   io.Writer
}

func (w Writer) Write(p []byte) (int, error) {
	if err := w.Ctx.Err(); err != nil {
		return 0, err
	}
	return w.W.Write(p)
}

// MkdirAll creates name and its missing parents on f, each with exactly
// mode (whatever the umask on f's side); folders that exist keep theirs.
// It is written over Mkdir and Chmod so that every FS, remote ones
// included, creates the same modes.
func MkdirAll(f FS, name string, mode fs.FileMode) error {
	fi, err := statFollow(f, name)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("%s exists and is not a directory", name)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if parent := path.Dir(name); parent != name {
		if err := MkdirAll(f, parent, mode); err != nil {
			return err
		}
	}
	if err := f.Mkdir(name); err != nil {
		// Made meanwhile by a concurrent transfer: fine if a folder.
		if fi, serr := statFollow(f, name); serr == nil && fi.IsDir() {
			return nil
		}
		return err
	}
	return f.Chmod(name, mode.Perm())
}
