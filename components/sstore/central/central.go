// Package central is the SStore component that writes every local
// snapshot straight into the global snapshot reference
// (<snapc_base_global_snapshot_dir>/<ref>/<seq>/gompi_snapshot_<rank>.ckpt),
// as Open MPI's sstore/central did. Its precondition is that the global
// folder is reachable at the same path from every node (one machine, or a
// shared file system); no file is ever moved, so FileM raw suffices.
//
// Sync is quick: it checks that each rank's snapshot_meta is there and that
// every file it records exists with its recorded size, and makes the
// directory entries durable. Checksums are verified by restart, which
// reads every byte anyway.
package central

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gompi/frameworks/filem/fscopy"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// Name of the component.
const Name = "central"

// Priority is the component's default priority: above stage (10, later),
// as in Open MPI, so central is what ft-enable-cr's `sstore =` selects.
const Priority = 20

// New returns the central SStore component.
func New() mca.Component[sstore.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: sstore.Name, Name: Name,
		Description: "Local snapshots written straight to the global snapshot folder (snapc_base_global_snapshot_dir), which every node must reach",
		Version:     "1.0.0",
		Priority:    Priority,
	}, query)
}

// query answers when checkpoint/restart is on (ft_cr_enabled) or when
// sstore names central explicitly; with C/R off, none is left to refuse.
func query(_ context.Context, q mca.Query) (sstore.Module, int, error) {
	if err := q.SkipUnlessCR(sstore.Name, Name); err != nil {
		return nil, 0, err
	}
	return module{}, q.Priority, nil
}

type module struct{}

// LocalDir creates rank's local snapshot directory of seq, empty. A
// directory left there by an attempt that never committed is replaced.
func (module) LocalDir(ctx context.Context, ref snapshot.Ref, seq, rank int) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("sstore/central: local directory of rank %d: %w", rank, err)
	}
	if seq < 0 || rank < 0 {
		return "", fmt.Errorf("sstore/central: local directory: bad sequence %d or rank %d", seq, rank)
	}
	if ref.IsRemote() {
		return "", fmt.Errorf("sstore/central: the global snapshot folder %s is remote, and central writes straight into it: run with --mca sstore stage (ranks write node-local snapshots that gompid moves there with FileM)", ref.Dir)
	}
	if _, err := os.Stat(ref.Path()); err != nil {
		return "", fmt.Errorf("sstore/central: reference %s: %w (sstore central needs the global snapshot folder on every node: a shared file system, or one machine)", ref.Path(), err)
	}
	dir := ref.LocalPath(seq, rank)
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("sstore/central: clear %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, snapshot.DirMode(ref.Path())); err != nil { // the reference's access
		return "", fmt.Errorf("sstore/central: create %s: %w", dir, err)
	}
	return dir, nil
}

// Sync checks every local snapshot of locals and makes their directory
// entries durable. The error names the first rank and file that is wrong.
func (module) Sync(ctx context.Context, ref snapshot.Ref, seq int, locals []sstore.Local) error {
	var errs []error
	for _, l := range locals {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("sstore/central: sync seq %d: %w", seq, err)
		}
		if err := check(ref, seq, l); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := fscopy.SyncDir(l.Dir); err != nil {
			errs = append(errs, fmt.Errorf("sstore/central: sync %s: %w", l.Dir, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, d := range []string{ref.SeqDir(seq), ref.Path()} {
		if err := fscopy.SyncDir(d); err != nil {
			return fmt.Errorf("sstore/central: sync %s: %w", d, err)
		}
	}
	return nil
}

// check verifies one rank's local snapshot without reading its data.
func check(ref snapshot.Ref, seq int, l sstore.Local) error {
	if want := ref.LocalPath(seq, l.Rank); filepath.Clean(l.Dir) != want {
		return fmt.Errorf("sstore/central: rank %d wrote to %s, not to its local snapshot %s", l.Rank, l.Dir, want)
	}
	meta, err := snapshot.ReadLocal(l.Dir)
	if err != nil {
		return fmt.Errorf("sstore/central: rank %d: %w", l.Rank, err)
	}
	if meta.Rank != l.Rank {
		return fmt.Errorf("sstore/central: %w: %s records rank %d, not %d", snapshot.ErrCorrupt, filepath.Join(l.Dir, snapshot.LocalMetaFile), meta.Rank, l.Rank)
	}
	for _, f := range meta.Files {
		name := f.Name
		want := f.Size
		if f.Compression != "" {
			name, want = f.Stored, -1 // stored compressed: its size differs from the recorded one
		}
		st, err := os.Stat(filepath.Join(l.Dir, name))
		switch {
		case err != nil:
			return fmt.Errorf("sstore/central: rank %d: %w", l.Rank, err)
		case !st.Mode().IsRegular():
			return fmt.Errorf("sstore/central: rank %d: %s is not a regular file", l.Rank, filepath.Join(l.Dir, name))
		case want >= 0 && st.Size() != want:
			return fmt.Errorf("sstore/central: %w: rank %d: %s is %d bytes, %d were recorded", snapshot.ErrCorrupt, l.Rank, filepath.Join(l.Dir, name), st.Size(), want)
		}
	}
	return nil
}

// Fetch returns rank's local snapshot of seq on global storage, which
// every node reads in place.
func (module) Fetch(ctx context.Context, ref snapshot.Ref, seq, rank int) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("sstore/central: fetch rank %d: %w", rank, err)
	}
	dir := ref.LocalPath(seq, rank)
	st, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("sstore/central: fetch rank %d of %s seq %d: %w", rank, ref.Name, seq, err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("sstore/central: fetch rank %d: %s is not a directory", rank, dir)
	}
	return dir, nil
}

// Remove deletes the whole sequence from global storage.
func (module) Remove(ctx context.Context, ref snapshot.Ref, seq int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sstore/central: remove seq %d: %w", seq, err)
	}
	if seq < 0 {
		return fmt.Errorf("sstore/central: remove: bad sequence %d", seq)
	}
	if err := os.RemoveAll(ref.SeqDir(seq)); err != nil {
		return fmt.Errorf("sstore/central: remove %s: %w", ref.SeqDir(seq), err)
	}
	return fscopy.SyncDir(ref.Path())
}

var (
	_ sstore.Module = module{}
)
