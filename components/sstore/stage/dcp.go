package stage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"gompi/frameworks/filem"
	"gompi/frameworks/sstore/blocks"
	"gompi/frameworks/sstore/compress"
	"gompi/frameworks/sstore/snapshot"
)

// Differential checkpoints (sstore_stage_differential): a drain stores each
// file as blocks (package blocks), only those that changed since the
// previous committed sequence in a pack of its own, and references the
// others where that sequence's manifest has them. The manifests of the
// previous sequence are read from global storage, not from this node's
// cache: after a restart a rank may run on another node, and global
// storage is what a restart reads back. Anything wrong with them makes the
// file's drain full, never a failure: a differential sequence only saves
// space.

// The parameters of differential checkpoints.
const (
	ParamDifferential = prefix + "differential"
	ParamBlockSize    = prefix + "block_size"
	ParamFullEvery    = prefix + "full_every"
)

// baseOf is the sequence a differential drain of seq compares with: the
// newest committed restart point before it, or -1 (a full drain) when
// differential checkpoints are off, there is none or the metadata cannot
// be read.
func (m *module) baseOf(ctx context.Context, fm filem.Module, ref snapshot.Ref, seq int, log *slog.Logger) int {
	if !m.cfg.differential {
		return -1
	}
	ms, err := snapshot.MetaStoreFor(ref, fm, m.cfg.groupRead)
	var g *snapshot.GlobalMeta
	if err == nil {
		g, err = ms.ReadGlobal(ctx, ref)
	}
	if err != nil {
		log.Warn("differential checkpoint: cannot read the reference's metadata; this sequence is full", "ref", ref.Name, "seq", seq, "err", err)
		return -1
	}
	base := -1
	for _, s := range g.Committed() {
		if s < seq {
			base = s
		}
	}
	return base
}

// basis is what a rank's drain knows of its base sequence, read once.
type basis struct {
	once sync.Once
	meta *snapshot.LocalMeta // nil: no base
	dir  string              // where its manifests are fetched to
	log  *slog.Logger
}

// baseManifest returns the manifest of file name in the rank's base
// sequence, or nil (the file is drained full): no base, or the base stored
// it otherwise, or its manifest is missing or damaged (logged).
func (m *module) baseManifest(ctx context.Context, fm filem.Module, ref snapshot.Ref, p *rankPlan, name string) *blocks.Manifest {
	b := &p.basis
	b.once.Do(func() {
		if p.base < 0 {
			return
		}
		b.dir = filepath.Join(p.tmp, ".base")
		meta, err := m.fetchBaseMeta(ctx, fm, ref, p, b.dir)
		if err != nil {
			b.log.Warn("differential checkpoint: the base sequence's snapshot_meta is unusable; this rank's files are drained full", "ref", ref.Name, "base", p.base, "rank", p.local.Rank, "err", err)
			return
		}
		b.meta = meta
	})
	if b.meta == nil {
		return nil
	}
	for _, f := range b.meta.Files {
		if f.Name != name || f.Blocks == "" {
			continue
		}
		src, err := ref.Global(strconv.Itoa(p.base), snapshot.LocalName(p.local.Rank), f.Blocks)
		dst := filepath.Join(b.dir, f.Blocks)
		if err == nil {
			err = fm.Get(ctx, []filem.Transfer{{Local: dst, Remote: src}})
		}
		var man *blocks.Manifest
		if err == nil {
			man, err = blocks.ReadManifest(dst, p.base)
		}
		if err == nil {
			err = man.Check(f)
		}
		if err != nil {
			b.log.Warn("differential checkpoint: the base sequence's manifest is unusable; the file is drained full", "ref", ref.Name, "base", p.base, "rank", p.local.Rank, "file", name, "err", err)
			return nil
		}
		return man
	}
	return nil
}

func (m *module) fetchBaseMeta(ctx context.Context, fm filem.Module, ref snapshot.Ref, p *rankPlan, dir string) (*snapshot.LocalMeta, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	src, err := ref.Global(strconv.Itoa(p.base), snapshot.LocalName(p.local.Rank), snapshot.LocalMetaFile)
	if err != nil {
		return nil, err
	}
	if err := fm.Get(ctx, []filem.Transfer{{Local: filepath.Join(dir, snapshot.LocalMetaFile), Remote: src}}); err != nil {
		return nil, err
	}
	meta, err := snapshot.ReadLocal(dir)
	if err == nil && meta.Rank != p.local.Rank {
		err = fmt.Errorf("%w: records rank %d", snapshot.ErrCorrupt, meta.Rank)
	}
	return meta, err
}

// drainBlocks establishes file i of a rank on global storage as blocks:
// its pack of changed blocks (when any changed) and its manifest.
func (m *module) drainBlocks(ctx context.Context, fm filem.Module, ref snapshot.Ref, seq int, p *rankPlan, i int, prog *progress) (snapshot.FileRecord, error) {
	rec := p.meta.Files[i]
	src := filepath.Join(p.local.Dir, rec.Name)
	if fi, err := os.Stat(src); err != nil || !fi.Mode().IsRegular() {
		if err == nil {
			err = fmt.Errorf("%s is not a regular file", src)
		}
		return rec, err
	}
	choice, err := m.choose(ctx, src, rec.Size)
	if err != nil {
		return rec, err
	}
	prev := m.baseManifest(ctx, fm, ref, p, rec.Name)
	if !prev.Base(m.cfg.blockSize, m.cfg.fullEvery) {
		prev = nil
	}
	names := p.blockNames[i]
	packPath, manPath := filepath.Join(p.tmp, names[0]), filepath.Join(p.tmp, names[1])
	defer os.Remove(packPath)
	defer os.Remove(manPath)
	man, st, err := buildPack(ctx, src, packPath, prev, seq, m.cfg.blockSize, names[0], compress.BlockEncoder(ctx, m.cfg.alg, m.cfg.level, choice), &prog.bytesDone)
	if err != nil {
		return rec, err
	}
	if st.Size != rec.Size || st.Checksum != rec.Checksum {
		return rec, fmt.Errorf("%w: %s reads as %d bytes with checksum %s, its snapshot_meta records %d bytes and %s (changed since the rank wrote it)", snapshot.ErrCorrupt, src, st.Size, st.Checksum, rec.Size, rec.Checksum)
	}
	mf, err := os.OpenFile(manPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return rec, err
	}
	err = man.Encode(mf)
	if cerr := mf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rec, fmt.Errorf("write the manifest: %w", err)
	}
	stored := []string{names[1]}
	if st.Changed > 0 {
		stored = append(stored, names[0])
	}
	for _, name := range stored {
		dst, err := ref.Global(strconv.Itoa(seq), snapshot.LocalName(p.local.Rank), name)
		if err == nil {
			err = m.put(ctx, fm, ref, filepath.Join(p.tmp, name), dst)
		}
		if err != nil {
			return rec, err
		}
	}
	if fi, err := os.Stat(manPath); err == nil {
		prog.stored.Add(fi.Size())
	}
	prog.stored.Add(st.Stored)
	prog.blocks.Add(int64(st.Blocks))
	prog.changed.Add(int64(st.Changed))
	prog.fileDone(ctx)
	rec.Blocks, rec.From = names[1], snapshot.JoinSeqs(man.Referenced())
	return rec, nil
}

// buildPack splits src into blocks, the changed ones into the new file
// packPath, counting the bytes read into read.
func buildPack(ctx context.Context, src, packPath string, prev *blocks.Manifest, seq, blockSize int, packName string, enc blocks.Encoder, read interface{ Add(int64) int64 }) (*blocks.Manifest, blocks.Stats, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, blocks.Stats{}, err
	}
	defer f.Close()
	w, err := os.OpenFile(packPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, blocks.Stats{}, err
	}
	man, st, err := blocks.Build(ctx, &countReader{r: f, n: read}, prev, seq, blockSize, w, packName, enc)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return man, st, err
}

type countReader struct {
	r io.Reader
	n interface{ Add(int64) int64 }
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// asBlocks says whether a file of size bytes is drained as blocks.
func (m *module) asBlocks(size int64) bool {
	return m.cfg.differential && blocks.NumBlocks(size, m.cfg.blockSize) <= blocks.MaxBlocks
}

// fetchBlocks restores file rec of rank's sequence seq, stored as blocks,
// into out: its manifest and every pack it references fetched into in,
// then reassembled and verified block by block.
func (m *module) fetchBlocks(ctx context.Context, fm filem.Module, ref snapshot.Ref, seq, rank int, rec snapshot.FileRecord, in, out string) error {
	dirOf := func(s int) string { return filepath.Join(in, ".blocks", strconv.Itoa(s), snapshot.LocalName(rank)) }
	get := func(s int, name string) (string, error) {
		src, err := ref.Global(strconv.Itoa(s), snapshot.LocalName(rank), name)
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(dirOf(s), 0o700); err != nil {
			return "", err
		}
		dst := filepath.Join(dirOf(s), name)
		if err := fm.Get(ctx, []filem.Transfer{{Local: dst, Remote: src}}); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return "", fmt.Errorf("%s is missing on global storage although sequence %d's snapshot_meta references it: %w; %s", src, seq, err, restartHint)
			}
			return "", remoteHint(ref, err)
		}
		return dst, nil
	}
	path, err := get(seq, rec.Blocks)
	if err != nil {
		return fmt.Errorf("file %s: %w", rec.Name, err)
	}
	man, err := blocks.ReadManifest(path, seq)
	if err == nil {
		err = man.Check(rec)
	}
	if err != nil {
		return fmt.Errorf("file %s: manifest on global storage: %w; %s", rec.Name, err, restartHint)
	}
	for s, pack := range man.Packs {
		if _, err := get(s, pack); err != nil {
			return fmt.Errorf("file %s: %w", rec.Name, err)
		}
	}
	w, err := snapshot.CreateFile(out, rec.Name)
	if err != nil {
		return err
	}
	if err := blocks.Reassemble(ctx, man, rec, blocks.DirOpener(dirOf(seq)), compress.DecodeBlock, w); err != nil {
		w.Abort()
		if errors.Is(err, snapshot.ErrCorrupt) {
			return fmt.Errorf("file %s: damaged on global storage: %w; %s", rec.Name, err, restartHint)
		}
		return fmt.Errorf("file %s: %w", rec.Name, err)
	}
	_, err = w.Close()
	return err
}
