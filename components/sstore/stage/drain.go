package stage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gompi/frameworks/filem"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/compress"
	"gompi/frameworks/sstore/snapshot"
)

// progressEvery is how often a drain reports while big files move, besides
// a report per file established.
const progressEvery = 250 * time.Millisecond

// cleanupTimeout bounds the removal of a failed drain's files on global
// storage: it runs after the drain's own context ended.
const cleanupTimeout = time.Minute

// rankPlan is one rank's local snapshot on its way to global storage.
type rankPlan struct {
	local  sstore.Local
	meta   *snapshot.LocalMeta
	stored []string     // per file, its name on global storage when compressed
	global filem.Remote // the rank's folder of seq on global storage
	tmp    string       // the drain's temporary folder for this rank

	// Differential checkpoints (dcp.go): the base sequence (-1: none),
	// what is known of it, and per file its pack and manifest names.
	base       int
	basis      basis
	blockNames [][2]string
}

// Sync drains the local snapshots of seq on this node to global storage:
// each file is compressed (sstore_stage_compress) into a temporary file and
// put through FileM, at most sstore_stage_max_inflight files of the node at
// once; a rank's snapshot_meta, which records how each file is stored, is
// put after all its files. It returns once everything is on global storage;
// on any failure it removes its temporaries and what it put of seq for
// these ranks, and leaves earlier sequences and the local copies alone.
// After a successful drain the local copies stay as the node's cache, and
// older sequences beyond sstore_stage_cache are evicted. Temporary folders
// of the reference that a killed daemon left on the node are removed first.
func (m *module) Sync(ctx context.Context, ref snapshot.Ref, seq int, locals []sstore.Local) error {
	op := fmt.Sprintf("drain %s seq %d", ref.Name, seq)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sstore/stage: %s: %w", op, err)
	}
	env, nodeDir, log, err := m.prepare(op, ref, seq)
	if err != nil {
		return err
	}
	if env.FileM == nil {
		return fmt.Errorf("sstore/stage: %s: no FileM module was bound (the daemon must bind its selected FileM)", op)
	}
	if len(locals) == 0 {
		return nil
	}
	key := syncKey{ref.Name, seq}
	m.begin(key)
	defer m.end(key)

	m.sweep(nodeDir, ref, log)
	if m.cfg.noGlobal {
		return m.syncNodesOnly(ctx, env, nodeDir, ref, seq, locals, log)
	}
	tmp, done, err := m.tempDir(nodeDir, ".drain-"+ref.Name+"-"+strconv.Itoa(seq)+"-*")
	if err != nil {
		return fmt.Errorf("sstore/stage: %s: temporary folder: %w", op, err)
	}
	defer done()
	plans, files, total, err := m.plan(ref, seq, locals, tmp)
	if err != nil {
		return err
	}
	base := m.baseOf(ctx, env.FileM, ref, seq, log)
	for _, p := range plans {
		p.base, p.basis.log = base, log
	}
	globals := make([]filem.Remote, len(plans))
	for i, p := range plans {
		globals[i] = p.global
	}
	// A failed attempt at this sequence may have left files there; a stale
	// snapshot_meta among them would make a half-drained rank look whole.
	if err := env.FileM.Remove(ctx, globals); err != nil {
		return fmt.Errorf("sstore/stage: %s: clear what an earlier attempt left on global storage: %w", op, remoteHint(ref, err))
	}

	start := time.Now()
	prog := &progress{node: env.Node, files: files, bytes: total, start: start}
	stopTicker := prog.tick(ctx)
	// The partner copy and the XOR set are made while the files drain.
	err = m.protected(ctx, env, nodeDir, ref, seq, locals, log, func(ctx context.Context) error {
		return m.drain(ctx, env.FileM, ref, seq, plans, prog)
	})
	stopTicker()
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if rerr := env.FileM.Remove(cctx, globals); rerr != nil {
			log.Warn("failed drain: could not remove its files from global storage", "ref", ref.Name, "seq", seq, "err", rerr)
			err = fmt.Errorf("%w\n(what was put of seq %d for these ranks could not all be removed from global storage: %v)", err, seq, rerr)
		}
		return err
	}
	prog.report(ctx)
	p := prog.snapshot()
	log.Info("drained to global storage", "ref", ref.Name, "seq", seq, "ranks", len(plans), "files", files,
		"bytes", p.Bytes, "stored", p.Stored, "elapsed", p.Elapsed, "MB/s", fmt.Sprintf("%.1f", p.Rate()/1e6),
		"blocks", prog.blocks.Load(), "changed", prog.changed.Load(), "base", base)
	m.evict(nodeDir, ref, seq, locals, log)
	return nil
}

// plan reads every rank's snapshot_meta and names each file's stored form.
func (m *module) plan(ref snapshot.Ref, seq int, locals []sstore.Local, tmp string) ([]*rankPlan, int, int64, error) {
	var plans []*rankPlan
	files, total := 0, int64(0)
	seen := map[int]bool{}
	for _, l := range locals {
		fail := func(format string, a ...any) ([]*rankPlan, int, int64, error) {
			return nil, 0, 0, fmt.Errorf("sstore/stage: drain %s seq %d: rank %d: "+format, append([]any{ref.Name, seq, l.Rank}, a...)...)
		}
		if l.Rank < 0 || seen[l.Rank] {
			return fail("bad or repeated rank")
		}
		seen[l.Rank] = true
		meta, err := snapshot.ReadLocal(l.Dir)
		if err != nil {
			return fail("%w", err)
		}
		if meta.Rank != l.Rank {
			return fail("%w: %s records rank %d", snapshot.ErrCorrupt, filepath.Join(l.Dir, snapshot.LocalMetaFile), meta.Rank)
		}
		taken := map[string]bool{snapshot.LocalMetaFile: true}
		for _, f := range meta.Files {
			if f.Compression != "" || f.Blocks != "" {
				return fail("%s is recorded as stored %s%s; a rank writes its files as they are", f.Name, f.Compression, f.Blocks)
			}
			taken[f.Name] = true
		}
		p := &rankPlan{local: l, meta: meta, stored: make([]string, len(meta.Files)), tmp: filepath.Join(tmp, strconv.Itoa(l.Rank)),
			blockNames: make([][2]string, len(meta.Files))}
		for i, f := range meta.Files {
			// name.zst, unless the rank wrote a file of that name too.
			p.stored[i] = takeName(taken, f.Name, compress.Suffix(m.cfg.alg))
			if m.asBlocks(f.Size) {
				p.blockNames[i] = [2]string{takeName(taken, f.Name, ".pack"), takeName(taken, f.Name, ".blocks")}
			}
			total += f.Size
		}
		files += len(meta.Files)
		if p.global, err = ref.GlobalLocal(seq, l.Rank); err != nil {
			return fail("%w", err)
		}
		if err := os.Mkdir(p.tmp, 0o700); err != nil {
			return fail("temporary folder: %w", err)
		}
		plans = append(plans, p)
	}
	return plans, files, total, nil
}

// takeName is name with suffix, or with a number before it when a file
// of the snapshot already takes that name; it takes the name.
func takeName(taken map[string]bool, name, suffix string) string {
	s := name + suffix
	for n := 1; taken[s]; n++ {
		s = name + "." + strconv.Itoa(n) + suffix
	}
	taken[s] = true
	return s
}

// drain moves every rank's files; the first failure stops the others.
func (m *module) drain(ctx context.Context, fm filem.Module, ref snapshot.Ref, seq int, plans []*rankPlan, prog *progress) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		once  sync.Once
		first error
		wg    sync.WaitGroup
	)
	for _, p := range plans {
		wg.Go(func() {
			if err := m.drainRank(ctx, fm, ref, seq, p, prog); err != nil {
				once.Do(func() { first = err; cancel(err) })
			}
		})
	}
	wg.Wait()
	return first
}

// drainRank moves one rank's files, then its snapshot_meta.
func (m *module) drainRank(ctx context.Context, fm filem.Module, ref snapshot.Ref, seq int, p *rankPlan, prog *progress) error {
	recs := make([]snapshot.FileRecord, len(p.meta.Files))
	errs := make([]error, len(p.meta.Files))
	var wg sync.WaitGroup
	for i := range p.meta.Files {
		if err := m.acquire(ctx); err != nil {
			errs[i] = fileError(ref, seq, p, p.meta.Files[i].Name, err)
			break
		}
		wg.Go(func() {
			defer m.release()
			recs[i], errs[i] = m.drainFile(ctx, fm, ref, seq, p, i, prog)
			if errs[i] != nil {
				errs[i] = fileError(ref, seq, p, p.meta.Files[i].Name, errs[i])
			}
		})
	}
	wg.Wait()
	if err := firstCause(errs); err != nil {
		return err
	}

	gm := *p.meta
	gm.Files = recs
	var buf bytes.Buffer
	if err := gm.Encode(&buf); err != nil {
		return fileError(ref, seq, p, snapshot.LocalMetaFile, err)
	}
	src := filepath.Join(p.tmp, snapshot.LocalMetaFile)
	if err := os.WriteFile(src, buf.Bytes(), snapshot.OwnerFileMode); err != nil {
		return fileError(ref, seq, p, snapshot.LocalMetaFile, err)
	}
	dst, err := ref.Global(strconv.Itoa(seq), snapshot.LocalName(p.local.Rank), snapshot.LocalMetaFile)
	if err == nil {
		if err = m.acquire(ctx); err == nil {
			err = m.put(ctx, fm, ref, src, dst)
			m.release()
		}
	}
	if err != nil {
		return fileError(ref, seq, p, snapshot.LocalMetaFile, err)
	}
	return nil
}

// firstCause picks the error that started a failure: one that is not the
// cancellation it caused in the other files.
func firstCause(errs []error) error {
	var first error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if !errors.Is(err, context.Canceled) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func fileError(ref snapshot.Ref, seq int, p *rankPlan, name string, err error) error {
	return fmt.Errorf("sstore/stage: drain %s seq %d: rank %d: file %s: %w", ref.Name, seq, p.local.Rank, name, err)
}

// drainFile establishes file i of a rank on global storage and returns its
// record as global storage keeps it.
func (m *module) drainFile(ctx context.Context, fm filem.Module, ref snapshot.Ref, seq int, p *rankPlan, i int, prog *progress) (snapshot.FileRecord, error) {
	rec := p.meta.Files[i]
	src := filepath.Join(p.local.Dir, rec.Name)
	if p.blockNames[i][0] != "" {
		return m.drainBlocks(ctx, fm, ref, seq, p, i, prog)
	}
	fi, err := os.Stat(src)
	switch {
	case err != nil:
		return rec, err
	case !fi.Mode().IsRegular():
		return rec, fmt.Errorf("%s is not a regular file", src)
	case fi.Size() != rec.Size:
		return rec, fmt.Errorf("%w: %s is %d bytes, its snapshot_meta records %d (changed since the rank wrote it)", snapshot.ErrCorrupt, src, fi.Size(), rec.Size)
	}
	dstOf := func(name string) (filem.Remote, error) {
		return ref.Global(strconv.Itoa(seq), snapshot.LocalName(p.local.Rank), name)
	}
	counted := false // source bytes already counted while compressing
	choice, err := m.choose(ctx, src, rec.Size)
	if err != nil {
		return rec, err
	}
	if choice.Compress {
		counted = true
		stored := p.stored[i]
		tmp := filepath.Join(p.tmp, stored)
		in, sum, out, err := compressTo(ctx, src, tmp, m.cfg.alg, m.cfg.level, choice.Filter, &prog.bytesDone)
		if err != nil {
			os.Remove(tmp)
			return rec, err
		}
		if in != rec.Size || sum != rec.Checksum {
			os.Remove(tmp)
			return rec, fmt.Errorf("%w: %s reads as %d bytes with checksum %s, its snapshot_meta records %d bytes and %s (changed since the rank wrote it)", snapshot.ErrCorrupt, src, in, sum, rec.Size, rec.Checksum)
		}
		// What does not shrink is stored as is: restart need not decode it.
		if out < in {
			dst, err := dstOf(stored)
			if err == nil {
				err = m.put(ctx, fm, ref, tmp, dst)
			}
			os.Remove(tmp)
			if err != nil {
				return rec, err
			}
			prog.stored.Add(out)
			prog.fileDone(ctx)
			rec.Compression, rec.Stored, rec.Filter = m.cfg.alg, stored, choice.Filter
			return rec, nil
		}
		os.Remove(tmp)
	}
	dst, err := dstOf(rec.Name)
	if err == nil {
		err = m.put(ctx, fm, ref, src, dst)
	}
	if err != nil {
		return rec, err
	}
	if !counted {
		prog.bytesDone.Add(rec.Size)
	}
	prog.stored.Add(rec.Size)
	prog.fileDone(ctx)
	return rec, nil
}

// choose samples the file src (of size bytes) to decide how it is stored.
func (m *module) choose(ctx context.Context, src string, size int64) (compress.Choice, error) {
	if m.cfg.alg == compress.None {
		return compress.Choice{}, nil
	}
	f, err := os.Open(src)
	if err != nil {
		return compress.Choice{}, err
	}
	defer f.Close()
	return compress.Choose(ctx, f, size, m.cfg.alg, m.cfg.level, m.cfg.shuffle)
}

// put moves one file to global storage with the reference's access
// (sstore_base_group_readable): FileM keeps the file's mode and creates
// the folders on the way with the transfer's. The file is a rank's local
// copy or the drain's temporary, both inside owner-only folders, so
// giving it the group's read access here exposes nothing on this node.
func (m *module) put(ctx context.Context, fm filem.Module, ref snapshot.Ref, src string, dst filem.Remote) error {
	dirMode, fileMode := snapshot.Modes(m.cfg.groupRead)
	if err := os.Chmod(src, fileMode); err != nil {
		return err
	}
	return remoteHint(ref, fm.Put(ctx, []filem.Transfer{{Local: src, Remote: dst, DirMode: dirMode}}))
}

// compressTo compresses src into the new file dst, counting the source
// bytes it reads into read, and returns the source's size and checksum and
// the compressed size. dst is a private temporary: it is not synced.
//
// The compressor never sees a failing read: the zstd encoder (klauspost
// v1.20) returns from Close after a read error while a block may still be
// being written to dst. So a cancellation or read error ends the source
// early, as if at its end, and is returned once the compressor is done.
func compressTo(ctx context.Context, src, dst, alg string, level int, filter string, read *atomic.Int64) (in int64, sum string, out int64, err error) {
	f, err := os.Open(src)
	if err != nil {
		return 0, "", 0, err
	}
	defer f.Close()
	w, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, "", 0, fmt.Errorf("compress into %s: %w", dst, err)
	}
	h := snapshot.NewChecksum()
	sr := &sourceReader{r: f, n: read, stop: ctx.Err}
	st, err := compress.CompressFiltered(context.WithoutCancel(ctx), w, io.TeeReader(sr, h), alg, level, filter)
	if cerr := w.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		err = sr.err
	}
	if err != nil {
		return 0, "", 0, fmt.Errorf("compress into %s: %w", dst, err)
	}
	return st.In, snapshot.FormatChecksum(h.Sum32()), st.Out, nil
}

// sourceReader adds what it reads to a progress counter, and turns a
// cancellation (stop) or read error into the end of the input, kept in err.
type sourceReader struct {
	r    io.Reader
	n    *atomic.Int64
	stop func() error
	err  error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, io.EOF
	}
	if err := s.stop(); err != nil {
		s.err = err
		return 0, io.EOF
	}
	n, err := s.r.Read(p)
	s.n.Add(int64(n))
	if err != nil && err != io.EOF {
		s.err = err
		err = io.EOF
	}
	return n, err
}

// progress is a drain's counters. Reports are serialised by mu and read
// counters that only grow, so successive reports never go back.
type progress struct {
	node  string
	files int
	bytes int64
	start time.Time

	filesDone atomic.Int64
	bytesDone atomic.Int64 // source bytes read (compressed) or moved (as is)
	stored    atomic.Int64 // bytes established on global storage
	blocks    atomic.Int64 // blocks of the files drained as blocks
	changed   atomic.Int64 // of those, blocks stored in this sequence

	mu sync.Mutex
}

func (p *progress) snapshot() sstore.Progress {
	return sstore.Progress{
		Node: p.node, Files: p.files, FilesDone: int(p.filesDone.Load()),
		Bytes: p.bytes, BytesDone: p.bytesDone.Load(), Stored: p.stored.Load(),
		Elapsed: time.Since(p.start),
	}
}

func (p *progress) report(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sstore.ReportProgress(ctx, p.snapshot())
}

func (p *progress) fileDone(ctx context.Context) {
	p.filesDone.Add(1)
	p.report(ctx)
}

// tick reports every progressEvery until the returned stop is called.
func (p *progress) tick(ctx context.Context) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.report(ctx)
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}

// tempDir makes a temporary folder in nodeDir that sweep leaves alone
// until done removes it.
func (m *module) tempDir(nodeDir, pattern string) (dir string, done func(), err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, err = os.MkdirTemp(nodeDir, pattern)
	if err != nil {
		return "", nil, err
	}
	m.temps[dir] = true
	return dir, func() {
		os.RemoveAll(dir)
		m.mu.Lock()
		delete(m.temps, dir)
		m.mu.Unlock()
	}, nil
}

// sweep removes the temporary folders of ref on this node that no call of
// this process is using: what a killed daemon left behind. Reference
// names are per job, so another job's drain is never swept.
func (m *module) sweep(nodeDir string, ref snapshot.Ref, log *slog.Logger) {
	var stale []string
	for _, kind := range []string{".drain-", ".fetch-"} {
		found, _ := filepath.Glob(filepath.Join(nodeDir, kind+globEscape(ref.Name)+"-*"))
		stale = append(stale, found...)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range stale {
		if m.temps[d] {
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			log.Warn("cannot remove a stale temporary folder", "dir", d, "err", err)
			continue
		}
		log.Info("removed the temporary folder of an interrupted drain or fetch", "dir", d)
	}
}

// globEscape quotes the pattern characters of a file name.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (m *module) begin(k syncKey) {
	m.mu.Lock()
	m.active[k]++
	m.mu.Unlock()
}

func (m *module) end(k syncKey) {
	m.mu.Lock()
	if m.active[k]--; m.active[k] <= 0 {
		delete(m.active, k)
	}
	m.mu.Unlock()
}

func (m *module) draining(ref string, seq int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.active[syncKey{ref, seq}] > 0
}

// evict keeps the newest sstore_stage_cache sequences of ref up to seq on
// this node and removes the older ones. Newer sequences (being written)
// and sequences still draining are never touched; of seq itself only the
// ranks just drained are removed (with a cache of 0).
func (m *module) evict(nodeDir string, ref snapshot.Ref, seq int, locals []sstore.Local, log *slog.Logger) {
	refDir := filepath.Join(nodeDir, ref.Name)
	ents, err := os.ReadDir(refDir)
	if err != nil {
		log.Warn("cache eviction: cannot list the local copies", "dir", refDir, "err", err)
		return
	}
	var seqs []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n < 0 || strconv.Itoa(n) != e.Name() || !e.IsDir() || n > seq {
			continue
		}
		if n != seq && m.draining(ref.Name, n) {
			continue
		}
		seqs = append(seqs, n)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(seqs)))
	for i, s := range seqs {
		if i < m.keepLocal() {
			continue
		}
		dir := snapshot.StageSeqDir(nodeDir, ref, s)
		if s == seq {
			for _, l := range locals {
				if own := snapshot.StageLocalDir(nodeDir, ref, seq, l.Rank); filepath.Clean(l.Dir) == own {
					if err := os.RemoveAll(own); err != nil {
						log.Warn("cache eviction", "dir", own, "err", err)
					}
				}
			}
			os.Remove(dir) // only once no other rank's copy is left
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("cache eviction", "dir", dir, "err", err)
			continue
		}
		log.Debug("evicted from the local cache", "ref", ref.Name, "seq", s)
	}
}
