package rsh

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"gompi/frameworks/filem/fscopy"
)

// Directory trees travel as tar streams through ssh (the node's own tar
// at the other end) rather than with scp -r, which follows symlinks
// instead of copying them.

// writeTar writes the tree at root (its top followed if a symlink) to w,
// names relative to it ("./", "./a", ...), symlinks as symlinks.
func writeTar(ctx context.Context, w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	top, err := os.Stat(root)
	if err != nil {
		return err
	}
	if err := writeEntry(tw, root, "./", top); err != nil {
		return err
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		name := "./" + filepath.ToSlash(rel)
		if fi.IsDir() {
			name += "/"
		}
		if err := writeEntry(tw, p, name, fi); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, fscopy.Reader{Ctx: ctx, R: f})
			f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func writeEntry(tw *tar.Writer, p, name string, fi fs.FileInfo) error {
	var link string
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		var err error
		if link, err = os.Readlink(p); err != nil {
			return err
		}
	case fi.IsDir(), fi.Mode().IsRegular():
	default:
		return fmt.Errorf("%s is a %s, not a regular file, directory or symlink; it cannot be copied", p, fi.Mode().Type())
	}
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	h.Name = name
	h.Mode = tarMode(fscopy.KeepMode(fi.Mode()))
	h.Uname, h.Gname, h.Uid, h.Gid = "", "", 0, 0
	return tw.WriteHeader(h)
}

// tarMode is a mode as tar stores it (c_ISUID etc.).
func tarMode(m fs.FileMode) int64 {
	v := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}

func fileMode(h *tar.Header) fs.FileMode {
	m := fs.FileMode(h.Mode).Perm()
	if h.Mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if h.Mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if h.Mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// extractTar fills the existing, empty directory dst from a tar stream.
// Every name must stay inside dst (os.Root refuses the rest, through
// symlinks too); only directories, regular files and symlinks are taken.
// Files are synced; directory modes are set last, deepest first, so
// read-only directories can be filled.
func extractTar(ctx context.Context, r io.Reader, dst string) error {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	dirModes := map[string]fs.FileMode{}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read the tar stream: %w", err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "/"))
		if strings.HasPrefix(h.Name, "/") || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("tar stream names %q, outside the destination", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if name != "." {
				if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
					return err
				}
			}
			dirModes[name] = fileMode(h)
		case tar.TypeReg:
			if sparse(h) {
				// A sparse entry's holes read as zeros without input: a few
				// bytes could make us write terabytes. GNU tar writes none
				// unless asked (--sparse), and getTreeScript does not ask.
				return fmt.Errorf("tar stream holds %q as a sparse file; sparse files are not taken", h.Name)
			}
			if err := extractFile(ctx, root, name, fileMode(h), tr); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := root.Symlink(h.Linkname, name); err != nil {
				return err
			}
		default:
			return fmt.Errorf("tar stream holds %q of type %q; only files, directories and symlinks are copied", h.Name, h.Typeflag)
		}
	}
	dirs := make([]string, 0, len(dirModes))
	for d := range dirModes {
		dirs = append(dirs, d)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(dirs))) // children before parents
	for _, d := range dirs {
		if err := syncRootDir(root, d); err != nil {
			return err
		}
		if err := root.Chmod(d, dirModes[d]); err != nil {
			return err
		}
	}
	return nil
}

func sparse(h *tar.Header) bool {
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

func extractFile(ctx context.Context, root *os.Root, name string, mode fs.FileMode, r io.Reader) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(fscopy.Writer{Ctx: ctx, W: f}, r)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncRootDir(root *os.Root, name string) error {
	d, err := root.Open(name)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
