// Package raw is the FileM component for nodes that share one file system:
// a "transfer" is a local copy. Every destination is written under a
// temporary name in its own directory, synced, and renamed into place, so a
// reader sees the old destination or the complete new one, never a part.
package raw

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"gompi/frameworks/filem"
	"gompi/frameworks/filem/fscopy"
	"gompi/mca"
)

// Component name and its parameters.
const (
	Name             = "raw"
	ParamConcurrency = filem.Name + "_" + Name + "_max_concurrent"
)

// chunkSize is how much is copied between two looks at the context, so a
// cancelled transfer of a large file stops within one chunk.
const chunkSize = 1 << 20

// tmpMarker is part of every temporary name, so a leftover is recognisable.
const tmpMarker = ".filem-tmp-"

// New returns the raw FileM component.
func New() mca.Component[filem.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: filem.Name, Name: Name,
		Description: "Copies files on a file system every node shares (no network transfer)",
		Version:     "1.0.0",
		Priority:    20,
		Params: []mca.ParamSpec{{
			Name: ParamConcurrency, Type: mca.Int, Default: "4", Level: mca.LevelTuner,
			Help: "How many transfers of one batch the raw FileM copies at the same time (at least 1)",
		}},
	}, query)
}

func query(ctx context.Context, q mca.Query) (filem.Module, int, error) {
	n := q.Values.Int(ParamConcurrency)
	if n < 1 {
		return nil, 0, fmt.Errorf("filem/raw: %s = %d: must be at least 1", ParamConcurrency, n)
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, 0, fmt.Errorf("filem/raw: cannot learn the local host name: %w", err)
	}
	return &module{max: n, host: host}, q.Priority, nil
}

type module struct {
	max  int
	host string
	copier
}

// copier copies files and trees. Its one field is a seam for the
// package's tests: the modules Query makes leave it nil.
type copier struct {
	afterChunk func() // runs after each chunk a copy writes
}

func (m *module) Put(ctx context.Context, ts []filem.Transfer) error {
	return m.batch(ctx, len(ts), func(ctx context.Context, i int) error {
		t := ts[i]
		return m.copyOne(ctx, "put", t.Local, t.Remote, t.Local, t.Remote.Path, t.ParentMode())
	})
}

func (m *module) Get(ctx context.Context, ts []filem.Transfer) error {
	return m.batch(ctx, len(ts), func(ctx context.Context, i int) error {
		t := ts[i]
		return m.copyOne(ctx, "get", t.Remote.String(), t.Remote, t.Remote.Path, t.Local, t.ParentMode())
	})
}

func (m *module) Remove(ctx context.Context, paths []filem.Remote) error {
	return m.batch(ctx, len(paths), func(ctx context.Context, i int) error {
		r := paths[i]
		fail := func(err error) error { return &filem.TransferError{Op: "remove", Src: r.String(), Err: err} }
		if err := m.local(r); err != nil {
			return fail(err)
		}
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		if r.Path == "" {
			return fail(errors.New("empty path"))
		}
		if err := os.RemoveAll(r.Path); err != nil {
			return fail(err)
		}
		return nil
	})
}

// batch runs n transfers, at most m.max at a time, and joins their errors
// in batch order.
func (m *module) batch(ctx context.Context, n int, one func(ctx context.Context, i int) error) error {
	errs := make([]error, n)
	sem := make(chan struct{}, m.max)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = one(ctx, i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// local checks that r names this node.
func (m *module) local(r filem.Remote) error {
	if r.Host == "" || r.Host == m.host || r.Host == "localhost" {
		return nil
	}
	if short, _, _ := strings.Cut(m.host, "."); r.Host == short {
		return nil
	}
	return fmt.Errorf("filem/raw: host %q is not this node (%s) and raw only copies on a shared file system; select filem=rsh or filem=sftp: %w",
		r.Host, m.host, filem.ErrUnreachable)
}

func (m *module) copyOne(ctx context.Context, op, name string, r filem.Remote, src, dst string, dirMode fs.FileMode) error {
	fail := func(err error) error {
		return &filem.TransferError{Op: op, Src: name, Dst: dstName(op, r, dst), Err: err}
	}
	if err := m.local(r); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if src == "" || dst == "" {
		return fail(errors.New("empty path"))
	}
	if err := m.copyPath(ctx, src, dst, dirMode); err != nil {
		return fail(err)
	}
	return nil
}

func dstName(op string, r filem.Remote, dst string) string {
	if op == "put" {
		return r.String()
	}
	return dst
}

// copyPath copies the file or tree at src to dst, replacing dst and
// creating its missing parents with dirMode.
func (c copier) copyPath(ctx context.Context, src, dst string, dirMode fs.FileMode) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	absSrc, err1 := filepath.Abs(src)
	absDst, err2 := filepath.Abs(dst)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	if fi.IsDir() && absDst != absSrc && strings.HasPrefix(absDst, absSrc+string(filepath.Separator)) {
		return fmt.Errorf("destination %s is inside the source directory %s; choose a destination outside it", dst, src)
	}
	dir := filepath.Dir(absDst)
	if err := fscopy.MkdirAll(fscopy.Local{}, dir, dirMode); err != nil {
		return fmt.Errorf("create parent directory: %w", err)
	}
	base := filepath.Base(absDst)
	var tmp string
	switch {
	case fi.Mode().IsRegular():
		f, err := os.CreateTemp(dir, "."+base+tmpMarker+"*")
		if err != nil {
			return err
		}
		tmp = f.Name()
		if err := c.fillFile(ctx, f, src, fi.Mode()); err != nil {
			os.Remove(tmp)
			return err
		}
	case fi.IsDir():
		tmp, err = os.MkdirTemp(dir, "."+base+tmpMarker+"*")
		if err != nil {
			return err
		}
		if err := c.copyTree(ctx, src, tmp, fi.Mode()); err != nil {
			os.RemoveAll(tmp)
			return err
		}
	default:
		return fmt.Errorf("%s is a %s, not a regular file or directory; only files and directories can be copied", src, fi.Mode().Type())
	}
	if err := ctx.Err(); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := replace(tmp, absDst); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return fscopy.SyncDir(dir)
}

// replace moves tmp to dst. A file over a file is one rename; where a
// directory is involved the two are exchanged atomically (the old tree is
// removed afterwards), falling back to moving the old one aside on file
// systems without RENAME_EXCHANGE.
func replace(tmp, dst string) error {
	old, err := os.Lstat(dst)
	if errors.Is(err, fs.ErrNotExist) {
		return os.Rename(tmp, dst)
	}
	if err != nil {
		return err
	}
	tfi, err := os.Lstat(tmp)
	if err != nil {
		return err
	}
	if !old.IsDir() && !tfi.IsDir() {
		return os.Rename(tmp, dst)
	}
	err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dst, unix.RENAME_EXCHANGE)
	if err == nil {
		// tmp now holds the old destination.
		return os.RemoveAll(tmp)
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("replace %s: %w", dst, err)
	}
	aside := tmp + ".old"
	if err := os.Rename(dst, aside); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		if back := os.Rename(aside, dst); back != nil {
			return fmt.Errorf("replace %s: %w (and the old copy stays at %s: %v)", dst, err, aside, back)
		}
		return err
	}
	return os.RemoveAll(aside)
}

// fillFile copies src into the open temporary file f, gives it mode and
// syncs it. f is closed on return.
func (c copier) fillFile(ctx context.Context, f *os.File, src string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		f.Close()
		return err
	}
	defer in.Close()
	if err := c.copyChunks(ctx, f, in); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(fscopy.KeepMode(mode)); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (c copier) copyChunks(ctx context.Context, w io.Writer, r io.Reader) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := io.CopyN(w, r, chunkSize)
		if c.afterChunk != nil {
			c.afterChunk()
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if n < chunkSize {
			return nil
		}
	}
}

// copyTree fills the existing, empty directory dst with the contents of src
// and gives it mode. Files inside are written directly: the whole tree is
// still under a temporary name.
func (c copier) copyTree(ctx context.Context, src, dst string, mode fs.FileMode) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, d := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		fi, err := os.Lstat(s)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode().IsRegular():
			f, err := os.OpenFile(d, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			if err := c.fillFile(ctx, f, s, fi.Mode()); err != nil {
				return err
			}
		case fi.IsDir():
			if err := os.Mkdir(d, 0o700); err != nil {
				return err
			}
			if err := c.copyTree(ctx, s, d, fi.Mode()); err != nil {
				return err
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(s)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, d); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s is a %s, not a regular file, directory or symlink; it cannot be copied", s, fi.Mode().Type())
		}
	}
	// The mode is set last so a read-only source directory can still be filled.
	if err := os.Chmod(dst, fscopy.KeepMode(mode)); err != nil {
		return err
	}
	return fscopy.SyncDir(dst)
}

var (
	_ filem.Module = (*module)(nil)
)
