package fscopy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"gompi/frameworks/filem"
	"gompi/frameworks/filem/filemtest"
	"gompi/frameworks/filem/fscopy"
)

// local moves files on this node with Copy: what rsh and sftp do for
// transfers whose Host is empty.
type local struct{}

func (local) Put(ctx context.Context, ts []filem.Transfer) error {
	return filem.Batch(ctx, 4, len(ts), func(ctx context.Context, i int) error {
		t := ts[i]
		if err := fscopy.Copy(ctx, fscopy.Local{}, t.Local, fscopy.Local{}, t.Remote.Path, t.ParentMode()); err != nil {
			return &filem.TransferError{Op: "put", Src: t.Local, Dst: t.Remote.String(), Err: err}
		}
		return nil
	})
}

func (local) Get(ctx context.Context, ts []filem.Transfer) error {
	return filem.Batch(ctx, 4, len(ts), func(ctx context.Context, i int) error {
		t := ts[i]
		if err := fscopy.Copy(ctx, fscopy.Local{}, t.Remote.Path, fscopy.Local{}, t.Local, t.ParentMode()); err != nil {
			return &filem.TransferError{Op: "get", Src: t.Remote.String(), Dst: t.Local, Err: err}
		}
		return nil
	})
}

func (local) Remove(ctx context.Context, rs []filem.Remote) error {
	return filem.Batch(ctx, 4, len(rs), func(ctx context.Context, i int) error {
		if err := fscopy.Remove(ctx, fscopy.Local{}, rs[i].Path); err != nil {
			return &filem.TransferError{Op: "remove", Src: rs[i].String(), Err: err}
		}
		return nil
	})
}

func TestConformance(t *testing.T) {
	filemtest.Run(t, func(t *testing.T) filem.Module { return local{} })
}

func TestIntoItself(t *testing.T) {
	dir := t.TempDir()
	err := fscopy.Copy(t.Context(), fscopy.Local{}, dir, fscopy.Local{}, filepath.Join(dir, "sub", "copy"), 0o700)
	if err == nil {
		t.Fatal("copying a directory into itself succeeded")
	}
}

func TestTopSymlinkFollowed(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "target"), []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := fscopy.Copy(t.Context(), fscopy.Local{}, filepath.Join(dir, "link"), fscopy.Local{}, out, 0o700); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(out)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o640 {
		t.Errorf("copy of a symlink to a file: %v %v, want a regular file of mode 0640", fi, err)
	}
}

func TestNotRegular(t *testing.T) {
	err := fscopy.Copy(t.Context(), fscopy.Local{}, "/dev/null", fscopy.Local{}, filepath.Join(t.TempDir(), "x"), 0o700)
	if err == nil {
		t.Fatal("copied a device")
	}
	if errors.Is(err, os.ErrNotExist) {
		t.Errorf("%v: a device is not a missing file", err)
	}
}
