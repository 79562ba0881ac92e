package stage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"gompi/frameworks/filem"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/frameworks/sstore/xor"
)

// xorDir is the XOR folder of seq under a node folder. LocalDir clears it
// as a new attempt at seq starts (every node writes before any syncs), so
// chunks an attempt that failed left there are never taken for this one's.
func xorDir(nodeDir string, ref snapshot.Ref, seq int) string {
	return filepath.Join(snapshot.StageSeqDir(nodeDir, ref, seq), xorDirName)
}

// protectXOR makes this node's part of its XOR set for seq: it sends its
// chunks to the other members, waits for theirs, and keeps its parity
// segment and the set's record. Off (sstore_stage_xor_set 0) or with too
// few nodes for a set, it does nothing.
func (m *module) protectXOR(ctx context.Context, env sstore.Host, nodeDir string, ref snapshot.Ref, seq int, locals []sstore.Local, log *slog.Logger) error {
	if m.cfg.xorSet == 0 {
		return nil
	}
	fail := func(err error) error {
		return fmt.Errorf("sstore/stage: XOR set of %s seq %d: %w", ref.Name, seq, err)
	}
	nodes := sstore.Nodes(ctx)
	members := xorSetOf(nodes, env.Node, m.cfg.xorSet)
	if members == nil {
		log.Warn("no XOR set: the job has fewer nodes than a set needs, or this node is not in its node list", "nodes", nodes, "min", xor.MinMembers)
		return nil
	}
	for _, n := range members {
		if err := checkName("node name", n); err != nil {
			return fail(err)
		}
	}
	self := slices.Index(members, env.Node)
	me, paths, err := memberOf(env.Node, locals)
	if err != nil {
		return fail(err)
	}
	if err := m.sendChunks(ctx, env, nodeDir, ref, seq, members, self, me, paths); err != nil {
		return fail(err)
	}
	rec, err := m.awaitChunks(ctx, nodeDir, ref, seq, members, self, me)
	if err != nil {
		return fail(err)
	}
	if err := writeSegment(nodeDir, ref, seq, rec); err != nil {
		return fail(err)
	}
	log.Info("XOR set parity kept", "ref", ref.Name, "seq", seq, "set", members, "segment", rec.set().SegmentSize(self))
	return nil
}

// sendChunks puts this node's chunk for each other member's segment,
// then its manifest (which says the chunk is whole), into that member's
// XOR folder through FileM.
func (m *module) sendChunks(ctx context.Context, env sstore.Host, nodeDir string, ref snapshot.Ref, seq int, members []string, self int, me xorMember, paths []string) error {
	sizes := make([]int64, len(me.Files))
	for i, f := range me.Files {
		sizes[i] = f.Size
	}
	data, err := openConcat(paths, sizes)
	if err != nil {
		return err
	}
	defer data.Close()
	tmp, done, err := m.tempDir(nodeDir, ".drain-"+ref.Name+"-"+strconv.Itoa(seq)+"-xor-*")
	if err != nil {
		return err
	}
	defer done()
	manifest, err := json.Marshal(me)
	if err != nil {
		return err
	}
	set := xor.Set{Sizes: make([]int64, len(members))}
	set.Sizes[self] = me.size()
	dirMode, _ := snapshot.Modes(false)
	for j, peer := range members {
		if j == self {
			continue
		}
		off, n := set.Chunk(self, j)
		chunk, mf := filepath.Join(tmp, peer+".chunk"), filepath.Join(tmp, peer+".json")
		if err := writeSection(chunk, data, off, n); err != nil {
			return err
		}
		if err := os.WriteFile(mf, manifest, snapshot.OwnerFileMode); err != nil {
			return err
		}
		host, pdir := m.remoteNode(peer)
		in := filepath.Join(xorDir(pdir, ref, seq), "in")
		for _, f := range []string{chunk, mf} { // the manifest last: it marks the chunk whole
			dst := filem.Remote{Host: host, Path: filepath.Join(in, env.Node+filepath.Ext(f))}
			if err := m.acquire(ctx); err != nil {
				return err
			}
			err := env.FileM.Put(ctx, []filem.Transfer{{Local: f, Remote: dst, DirMode: dirMode}})
			m.release()
			if err != nil {
				return fmt.Errorf("to member %s: %w", peer, err)
			}
		}
	}
	return nil
}

// writeSection copies n bytes at off of r into the new file path.
func writeSection(path string, r io.ReaderAt, off, n int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, snapshot.OwnerFileMode)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, io.NewSectionReader(r, off, n))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// awaitChunks waits until every other member's manifest is in this node's
// XOR folder and returns the set's record.
func (m *module) awaitChunks(ctx context.Context, nodeDir string, ref snapshot.Ref, seq int, members []string, self int, me xorMember) (*xorRecord, error) {
	in := filepath.Join(xorDir(nodeDir, ref, seq), "in")
	rec := &xorRecord{Seq: seq, Self: self, Members: make([]xorMember, len(members))}
	rec.Members[self] = me
	t := time.NewTicker(xorPoll)
	defer t.Stop()
	for {
		missing := ""
		for j, n := range members {
			if j == self || rec.Members[j].Node != "" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(in, n+".json"))
			if errors.Is(err, fs.ErrNotExist) {
				missing = n
				continue
			}
			if err != nil {
				return nil, err
			}
			var got xorMember
			if err := json.Unmarshal(b, &got); err != nil || got.Node != n {
				return nil, fmt.Errorf("%w: manifest of member %s in %s", snapshot.ErrCorrupt, n, in)
			}
			rec.Members[j] = got
		}
		if missing == "" {
			return rec, rec.check()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for member %s's chunk: %w", missing, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// writeSegment XORs the received chunks into this node's parity segment
// and keeps it with the set's record; the chunks go.
func writeSegment(nodeDir string, ref snapshot.Ref, seq int, rec *xorRecord) error {
	dir := xorDir(nodeDir, ref, seq)
	in := filepath.Join(dir, "in")
	set := rec.set()
	readers := make([]io.ReaderAt, set.K())
	for j, mem := range rec.Members {
		if j == rec.Self {
			continue
		}
		f, err := os.Open(filepath.Join(in, mem.Node+".chunk"))
		if err != nil {
			return err
		}
		defer f.Close()
		off, n := set.Chunk(j, rec.Self)
		if fi, err := f.Stat(); err != nil || fi.Size() != n {
			return fmt.Errorf("%w: chunk of member %s is not %d bytes", snapshot.ErrCorrupt, mem.Node, n)
		}
		readers[j] = shifted{f, off}
	}
	if err := writeAtomic(filepath.Join(dir, xorParityFile), func(w io.Writer) error {
		return xor.Segment(w, set, rec.Self, readers)
	}); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rec, "", " ")
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, xorRecordFile), func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return err
	}
	return os.RemoveAll(in)
}

// writeAtomic writes path through a temporary name, synced.
func writeAtomic(path string, fill func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	err = fill(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
