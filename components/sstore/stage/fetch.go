package stage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"gompi/frameworks/filem"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/compress"
	"gompi/frameworks/sstore/snapshot"
)

// restartHint is what a restart can do when a snapshot on global storage
// cannot be used.
const restartHint = "restart from an earlier committed sequence (gompi-restart -s N; gompi-restart -i lists them)"

// Fetch returns a folder holding rank's snapshot of seq as the rank wrote
// it, from the fastest intact copy: this node's cached copy, a partner
// copy this node keeps (partner.go) or its partner node keeps
// (partnerfetch.go), a rebuild from this node's XOR set
// (xorfetch.go), and last a copy fetched from global storage, decompressed
// and verified, which then serves as the node's cached copy. Each copy is
// verified (sizes and checksums) before use; one that fails is logged,
// named with why, and the next is tried.
func (m *module) Fetch(ctx context.Context, ref snapshot.Ref, seq, rank int) (string, error) {
	op := fmt.Sprintf("fetch rank %d of %s seq %d", rank, ref.Name, seq)
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("sstore/stage: %s: %w", op, err)
	}
	if rank < 0 {
		return "", fmt.Errorf("sstore/stage: %s: bad rank", op)
	}
	env, nodeDir, log, err := m.prepare(op, ref, seq)
	if err != nil {
		return "", err
	}
	m.cfg.hold.wait(env.Node, rank)
	dir := snapshot.StageLocalDir(nodeDir, ref, seq, rank)
	switch err := checkCopy(dir, rank); {
	case err == nil:
		log.Info("restart reads this node's cached copy", "ref", ref.Name, "seq", seq, "rank", rank, "dir", dir)
		return dir, nil
	case errors.Is(err, fs.ErrNotExist):
		log.Debug("no cached copy", "ref", ref.Name, "seq", seq, "rank", rank)
	default:
		log.Warn("cached copy unusable; trying the next copy", "ref", ref.Name, "seq", seq, "rank", rank, "copy", dir, "err", err)
	}
	pdir, skipped := m.fetchPartner(nodeDir, ref, seq, rank, log)
	if pdir != "" {
		return pdir, nil
	}
	switch pdir, err := m.fetchFromPartner(ctx, env, nodeDir, ref, seq, rank, log); {
	case pdir != "":
		return pdir, nil
	case err != nil:
		log.Warn("partner copy on the partner node unusable; trying the next copy", "ref", ref.Name, "seq", seq, "rank", rank, "err", err)
		skipped = append(skipped, err)
	}
	switch xdir, err := m.fetchXOR(ctx, env, nodeDir, ref, seq, rank, log); {
	case xdir != "":
		return xdir, nil
	case err != nil:
		log.Warn("XOR rebuild failed; trying the next copy", "ref", ref.Name, "seq", seq, "rank", rank, "err", err)
		skipped = append(skipped, fmt.Errorf("XOR rebuild: %w", err))
	}
	if m.cfg.noGlobal {
		return "", fmt.Errorf("sstore/stage: %s: no intact copy on this node (its cache, its partner copies, its XOR set) and no global storage (%s %s): %w",
			op, snapc.ParamGlobalDir, snapc.GlobalNone, errors.Join(append([]error{fs.ErrNotExist}, skipped...)...))
	}
	if env.FileM == nil {
		return "", fmt.Errorf("sstore/stage: %s: not in this node's cache and no FileM module was bound to fetch it (the daemon must bind its selected FileM)", op)
	}
	global, err := ref.GlobalLocal(seq, rank)
	if err != nil {
		return "", fmt.Errorf("sstore/stage: %s: %w", op, err)
	}
	work, done, err := m.tempDir(nodeDir, ".fetch-"+ref.Name+"-"+strconv.Itoa(seq)+"-"+strconv.Itoa(rank)+"-*")
	if err != nil {
		return "", fmt.Errorf("sstore/stage: %s: temporary folder: %w", op, err)
	}
	defer done()
	in, out := filepath.Join(work, "in"), filepath.Join(work, "out")
	for _, d := range []string{in, out} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return "", fmt.Errorf("sstore/stage: %s: temporary folder: %w", op, err)
		}
	}
	meta, err := m.fetchMeta(ctx, env.FileM, ref, seq, rank, global, in)
	if err == nil {
		err = m.fetchFiles(ctx, env.FileM, ref, seq, rank, meta, in, out)
	}
	if err != nil {
		return "", fmt.Errorf("sstore/stage: %s: %w", op, errors.Join(append([]error{err}, skipped...)...))
	}
	if len(skipped) > 0 {
		log.Warn("copies on the nodes passed over; restart reads global storage", "ref", ref.Name, "seq", seq, "rank", rank, "skipped", len(skipped))
	}
	plain := *meta
	plain.Files = make([]snapshot.FileRecord, len(meta.Files))
	for i, f := range meta.Files {
		f.Compression, f.Stored, f.Filter, f.Blocks, f.From = "", "", "", "", ""
		plain.Files[i] = f
	}
	if err := snapshot.WriteLocal(out, &plain); err != nil {
		return "", fmt.Errorf("sstore/stage: %s: %w", op, err)
	}
	if err := install(out, dir); err != nil {
		return "", fmt.Errorf("sstore/stage: %s: %w", op, err)
	}
	log.Info("restart reads a copy fetched from global storage", "ref", ref.Name, "seq", seq, "rank", rank, "from", global.String(), "dir", dir)
	return dir, nil
}

// checkCopy verifies a local copy: rank's snapshot_meta and every file of
// its size and checksum. A missing copy wraps fs.ErrNotExist.
func checkCopy(dir string, rank int) error {
	meta, err := snapshot.ReadLocal(dir)
	if err != nil {
		return err
	}
	if meta.Rank != rank {
		return fmt.Errorf("%w: %s records rank %d", snapshot.ErrCorrupt, filepath.Join(dir, snapshot.LocalMetaFile), meta.Rank)
	}
	return meta.Verify(dir)
}

// fetchMeta gets rank's snapshot_meta from global storage into in.
func (m *module) fetchMeta(ctx context.Context, fm filem.Module, ref snapshot.Ref, seq, rank int, global filem.Remote, in string) (*snapshot.LocalMeta, error) {
	src, err := ref.Global(strconv.Itoa(seq), snapshot.LocalName(rank), snapshot.LocalMetaFile)
	if err != nil {
		return nil, err
	}
	if err := fm.Get(ctx, []filem.Transfer{{Local: filepath.Join(in, snapshot.LocalMetaFile), Remote: src}}); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("not in this node's cache, and global storage holds no complete copy (%s has no %s): %w; %s, or check snapc_base_global_snapshot_dir",
				global, snapshot.LocalMetaFile, err, restartHint)
		}
		return nil, remoteHint(ref, err)
	}
	meta, err := snapshot.ReadLocal(in)
	if err != nil {
		return nil, fmt.Errorf("%s on global storage: %w; %s", src, err, restartHint)
	}
	if meta.Rank != rank {
		return nil, fmt.Errorf("%w: %s on global storage records rank %d; %s", snapshot.ErrCorrupt, src, meta.Rank, restartHint)
	}
	return meta, nil
}

// fetchFiles gets every file of meta into in and restores it into out,
// decompressed and verified, at most sstore_stage_max_inflight at once.
func (m *module) fetchFiles(ctx context.Context, fm filem.Module, ref snapshot.Ref, seq, rank int, meta *snapshot.LocalMeta, in, out string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(meta.Files))
	var wg sync.WaitGroup
	for i, rec := range meta.Files {
		if err := m.acquire(ctx); err != nil {
			errs[i] = fmt.Errorf("file %s: %w", rec.Name, err)
			break
		}
		wg.Go(func() {
			defer m.release()
			if err := m.fetchFile(ctx, fm, ref, seq, rank, rec, in, out); err != nil {
				errs[i] = err
				cancel()
			}
		})
	}
	wg.Wait()
	return firstCause(errs)
}

func (m *module) fetchFile(ctx context.Context, fm filem.Module, ref snapshot.Ref, seq, rank int, rec snapshot.FileRecord, in, out string) error {
	if rec.Blocks != "" {
		return m.fetchBlocks(ctx, fm, ref, seq, rank, rec, in, out)
	}
	stored := rec.Name
	if rec.Compression != "" {
		stored = rec.Stored
	}
	src, err := ref.Global(strconv.Itoa(seq), snapshot.LocalName(rank), stored)
	if err != nil {
		return fmt.Errorf("file %s: %w", rec.Name, err)
	}
	local := filepath.Join(in, stored)
	if err := fm.Get(ctx, []filem.Transfer{{Local: local, Remote: src}}); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file %s: %s is missing on global storage although its snapshot_meta records it: %w; %s", rec.Name, src, err, restartHint)
		}
		return fmt.Errorf("file %s: %w", rec.Name, remoteHint(ref, err))
	}
	defer os.Remove(local)
	if rec.Compression != "" {
		err = compress.DecompressFile(ctx, in, rec, out)
	} else {
		err = verifyPlain(local, rec)
		if err == nil {
			err = os.Rename(local, filepath.Join(out, rec.Name))
		}
	}
	if errors.Is(err, snapshot.ErrCorrupt) {
		return fmt.Errorf("file %s: %s on global storage is damaged: %w; %s", rec.Name, src, err, restartHint)
	}
	if err != nil {
		return fmt.Errorf("file %s (from %s): %w", rec.Name, src, err)
	}
	return nil
}

// verifyPlain checks a file stored as is against its record.
func verifyPlain(path string, rec snapshot.FileRecord) error {
	size, sum, err := snapshot.ChecksumFile(path)
	switch {
	case err != nil:
		return err
	case size != rec.Size:
		return fmt.Errorf("%w: %d bytes, %d were recorded (truncated or overwritten)", snapshot.ErrCorrupt, size, rec.Size)
	case sum != rec.Checksum:
		return fmt.Errorf("%w: checksum %s, %s was recorded", snapshot.ErrCorrupt, sum, rec.Checksum)
	}
	return nil
}

// install moves the restored folder into place as the node's copy,
// replacing a damaged one.
func install(restored, dir string) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.Rename(restored, dir); err != nil {
		return err
	}
	d, err := os.Open(parent)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
