package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"gompi/frameworks/filem"
)

// MetaStore reads and writes a reference's global metadata wherever the
// reference lives. The global coordinator, gompi-restart and
// gompi-checkpoint --list use it, so a remote global snapshot folder
// (snapc_base_global_snapshot_dir = sftp://...) works like a local one.
type MetaStore interface {
	// ReadGlobal reads the global metadata of ref.
	ReadGlobal(ctx context.Context, ref Ref) (*GlobalMeta, error)
	// WriteGlobal creates ref's folder if needed and replaces its global
	// metadata atomically.
	WriteGlobal(ctx context.Context, ref Ref, g *GlobalMeta) error
	// ReadLocal reads the snapshot_meta of rank's local snapshot of seq
	// as global storage holds it.
	ReadLocal(ctx context.Context, ref Ref, seq, rank int) (*LocalMeta, error)
}

// MetaStoreFor returns the MetaStore of ref: the local file system, or,
// for a remote reference, fm (which must reach its host; nil is an error
// that says which FileM to choose). groupRead (sstore_base_group_readable)
// gives what a remote store writes the group's read access; on this node
// a reference's folder carries that choice (MkdirRef).
func MetaStoreFor(ref Ref, fm filem.Module, groupRead bool) (MetaStore, error) {
	if !ref.IsRemote() {
		return ThisNode, nil
	}
	if fm == nil {
		return nil, fmt.Errorf("sstore: snapshot reference %s is remote: it needs a FileM that reaches its host (--mca filem sftp or rsh)", ref)
	}
	return remoteMeta{fm: fm, groupRead: groupRead}, nil
}

// ThisNode is the MetaStore of references on this node's file system.
var ThisNode MetaStore = localMeta{}

type localMeta struct{}

func (localMeta) ReadGlobal(ctx context.Context, ref Ref) (*GlobalMeta, error) {
	return readGlobal(ctx, ref)
}

func (localMeta) WriteGlobal(ctx context.Context, ref Ref, g *GlobalMeta) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := MkdirRef(ref, false); err != nil { // an owner-only one, unless its creator made it otherwise
		return err
	}
	return WriteGlobal(ref, g)
}

func (localMeta) ReadLocal(ctx context.Context, ref Ref, seq, rank int) (*LocalMeta, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return ReadLocal(ref.LocalPath(seq, rank))
}

// remoteMeta moves the metadata file through FileM, whose Put writes a
// temporary name and renames it into place: the commit stays atomic.
type remoteMeta struct {
	fm        filem.Module
	groupRead bool
}

func (m remoteMeta) ReadGlobal(ctx context.Context, ref Ref) (*GlobalMeta, error) {
	src, err := ref.Global(GlobalMetaFile)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "gompi-meta-")
	if err != nil {
		return nil, fmt.Errorf("sstore: read %s: %w", ref, err)
	}
	defer os.RemoveAll(tmp)
	local := Ref{Dir: tmp, Name: ref.Name}
	if err := m.fm.Get(ctx, []filem.Transfer{{Local: local.MetaPath(), Remote: src}}); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("sstore: no snapshot reference %s (or it has no %s): %w", ref, GlobalMetaFile, err)
		}
		return nil, fmt.Errorf("sstore: read %s: %w", src, err)
	}
	g, err := readGlobal(ctx, local)
	if err != nil {
		return nil, fmt.Errorf("sstore: %s: %w", src, err)
	}
	return g, nil
}

func (m remoteMeta) WriteGlobal(ctx context.Context, ref Ref, g *GlobalMeta) error {
	dst, err := ref.Global(GlobalMetaFile)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "gompi-meta-")
	if err != nil {
		return fmt.Errorf("sstore: write %s: %w", ref, err)
	}
	defer os.RemoveAll(tmp)
	local := Ref{Dir: tmp, Name: ref.Name}
	// WriteGlobal gives the file the access of the folder it goes into,
	// and FileM keeps it; the temporary folder is inside tmp, which is
	// the owner's alone.
	if err := MkdirRef(local, m.groupRead); err != nil {
		return fmt.Errorf("sstore: write %s: %w", ref, err)
	}
	if err := WriteGlobal(local, g); err != nil {
		return err
	}
	dirMode, _ := Modes(m.groupRead)
	if err := m.fm.Put(ctx, []filem.Transfer{{Local: filepath.Join(local.Path(), GlobalMetaFile), Remote: dst, DirMode: dirMode}}); err != nil {
		return fmt.Errorf("sstore: write %s: %w", dst, err)
	}
	return nil
}

func (m remoteMeta) ReadLocal(ctx context.Context, ref Ref, seq, rank int) (*LocalMeta, error) {
	src, err := ref.Global(fmt.Sprint(seq), LocalName(rank), LocalMetaFile)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "gompi-meta-")
	if err != nil {
		return nil, fmt.Errorf("sstore: read %s: %w", src, err)
	}
	defer os.RemoveAll(tmp)
	if err := m.fm.Get(ctx, []filem.Transfer{{Local: filepath.Join(tmp, LocalMetaFile), Remote: src}}); err != nil {
		return nil, fmt.Errorf("sstore: read %s: %w", src, err)
	}
	l, err := ReadLocal(tmp)
	if err != nil {
		return nil, fmt.Errorf("sstore: %s: %w", src, err)
	}
	return l, nil
}
