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
	"strconv"

	"gompi/frameworks/filem"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/frameworks/sstore/xor"
)

// readXORRecord reads and checks this node's record of its XOR set of
// seq; nil and no error when the node keeps none.
func readXORRecord(nodeDir string, ref snapshot.Ref, seq int) (*xorRecord, error) {
	path := filepath.Join(xorDir(nodeDir, ref, seq), xorRecordFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec xorRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", snapshot.ErrCorrupt, path, err)
	}
	if rec.Seq != seq {
		return nil, fmt.Errorf("%w: %s records seq %d", snapshot.ErrCorrupt, path, rec.Seq)
	}
	if err := rec.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rec, nil
}

// fetchXOR rebuilds rank's snapshot of seq from the XOR set this node
// belongs to: the other members' cached snapshots and parity segments
// give back the lost member's data, and the rank's part of it, verified
// against its rebuilt snapshot_meta, becomes this node's copy. "" and no
// error when this node keeps no set that holds the rank.
func (m *module) fetchXOR(ctx context.Context, env sstore.Host, nodeDir string, ref snapshot.Ref, seq, rank int, log *slog.Logger) (string, error) {
	rec, err := readXORRecord(nodeDir, ref, seq)
	if err == nil && (rec == nil || rec.memberOf(rank) < 0) {
		rec, err = m.memberRecord(ctx, env, nodeDir, ref, seq, rank)
	}
	if err != nil || rec == nil || rec.memberOf(rank) < 0 {
		return "", err
	}
	lost := rec.memberOf(rank)
	work, done, err := m.tempDir(nodeDir, ".fetch-"+ref.Name+"-"+strconv.Itoa(seq)+"-"+strconv.Itoa(rank)+"-*")
	if err != nil {
		return "", err
	}
	defer done()
	members, segments, closeAll, err := m.openSet(ctx, env, rec, lost, ref, seq, work)
	defer closeAll()
	if err != nil {
		return "", err
	}
	payload := filepath.Join(work, "payload")
	if err := writeAtomic(payload, func(w io.Writer) error {
		return xor.Rebuild(w, rec.set(), lost, members, segments)
	}); err != nil {
		return "", err
	}
	out := filepath.Join(work, "out")
	if err := extractRank(payload, rec.Members[lost], rank, out); err != nil {
		return "", err
	}
	if err := checkCopy(out, rank); err != nil {
		return "", fmt.Errorf("the rebuilt snapshot does not verify: %w", err)
	}
	dir := snapshot.StageLocalDir(nodeDir, ref, seq, rank)
	if err := install(out, dir); err != nil {
		return "", err
	}
	log.Info("restart reads a snapshot rebuilt from its XOR set", "ref", ref.Name, "seq", seq, "rank", rank, "lost", rec.Members[lost].Node, "dir", dir)
	return dir, nil
}

// openSet opens every member's data and parity segment but the lost
// one's: on this machine where their node folders are here, else fetched
// through FileM into work first.
func (m *module) openSet(ctx context.Context, env sstore.Host, rec *xorRecord, lost int, ref snapshot.Ref, seq int, work string) (members, segments []io.ReaderAt, closeAll func(), err error) {
	k := len(rec.Members)
	members, segments = make([]io.ReaderAt, k), make([]io.ReaderAt, k)
	var closers []io.Closer
	closeAll = func() {
		for _, c := range closers {
			c.Close()
		}
	}
	for i, mem := range rec.Members {
		if i == lost {
			continue
		}
		host, pdir := m.remoteNode(mem.Node)
		var paths []string
		var sizes []int64
		for _, f := range mem.Files {
			paths = append(paths, filepath.Join(snapshot.StageLocalDir(pdir, ref, seq, f.Rank), f.Name))
			sizes = append(sizes, f.Size)
		}
		parity := filepath.Join(xorDir(pdir, ref, seq), xorParityFile)
		all := append(paths, parity)
		if host != "" {
			if env.FileM == nil {
				return nil, nil, closeAll, fmt.Errorf("member %s is on another host and no FileM was bound", mem.Node)
			}
			if all, err = fetchAll(ctx, env.FileM, host, all, filepath.Join(work, mem.Node)); err != nil {
				return nil, nil, closeAll, fmt.Errorf("member %s: %w", mem.Node, err)
			}
		}
		for j, p := range all[:len(paths)] {
			if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() || fi.Size() != sizes[j] {
				return nil, nil, closeAll, fmt.Errorf("member %s: %s is missing, not a file, or not of its recorded %d bytes", mem.Node, p, sizes[j])
			}
		}
		c, err := openConcat(all[:len(paths)], sizes)
		if err != nil {
			return nil, nil, closeAll, fmt.Errorf("member %s: %w", mem.Node, err)
		}
		closers = append(closers, c)
		seg, err := os.Open(all[len(paths)])
		if err != nil {
			return nil, nil, closeAll, fmt.Errorf("member %s: parity segment: %w", mem.Node, err)
		}
		closers = append(closers, seg)
		if fi, err := seg.Stat(); err != nil || fi.Size() != rec.set().SegmentSize(i) {
			return nil, nil, closeAll, fmt.Errorf("member %s: %w: parity segment %s is not of its %d bytes", mem.Node, snapshot.ErrCorrupt, all[len(paths)], rec.set().SegmentSize(i))
		}
		members[i], segments[i] = c, seg
	}
	return members, segments, closeAll, nil
}

// fetchAll gets the files paths on host into dir and returns their local
// names.
func fetchAll(ctx context.Context, fm filem.Module, host string, paths []string, dir string) ([]string, error) {
	var ts []filem.Transfer
	var out []string
	for i, p := range paths {
		local := filepath.Join(dir, strconv.Itoa(i))
		ts = append(ts, filem.Transfer{Local: local, Remote: filem.Remote{Host: host, Path: p}})
		out = append(out, local)
	}
	return out, fm.Get(ctx, ts)
}

// extractRank writes rank's files of the member's rebuilt data payload
// into the new folder out.
func extractRank(payload string, mem xorMember, rank int, out string) error {
	if err := os.Mkdir(out, 0o700); err != nil {
		return err
	}
	f, err := os.Open(payload)
	if err != nil {
		return err
	}
	defer f.Close()
	var off int64
	for _, file := range mem.Files {
		if file.Rank == rank {
			if err := writeSection(filepath.Join(out, file.Name), f, off, file.Size); err != nil {
				return err
			}
		}
		off += file.Size
	}
	return nil
}

// memberRecord reads the XOR record of rank's set from a surviving member
// when this node is in no set of seq, or in another (a restart put the rank outside its
// set): the set follows from the sequence's nodes in the reference's
// metadata. nil and no error when there is no set to ask.
func (m *module) memberRecord(ctx context.Context, env sstore.Host, nodeDir string, ref snapshot.Ref, seq, rank int) (*xorRecord, error) {
	if m.cfg.xorSet == 0 {
		return nil, nil
	}
	nodes, of, ok := m.seqNodes(env.Node, ref, seq, rank)
	if !ok {
		return nil, nil
	}
	for _, member := range xorSetOf(nodes, of, m.cfg.xorSet) {
		if member == of || member == env.Node || checkName("node name", member) != nil {
			continue
		}
		host, pdir := m.remoteNode(member)
		if host != "" {
			if env.FileM == nil {
				continue
			}
			local, done, err := m.tempDir(nodeDir, ".fetch-"+ref.Name+"-"+strconv.Itoa(seq)+"-"+strconv.Itoa(rank)+"-*")
			if err != nil {
				return nil, err
			}
			defer done()
			src := filem.Remote{Host: host, Path: filepath.Join(xorDir(pdir, ref, seq), xorRecordFile)}
			if err := env.FileM.Get(ctx, []filem.Transfer{{Local: filepath.Join(xorDir(local, ref, seq), xorRecordFile), Remote: src}}); err != nil {
				continue
			}
			pdir = local
		}
		if rec, err := readXORRecord(pdir, ref, seq); err == nil && rec != nil && rec.memberOf(rank) >= 0 {
			return rec, nil
		}
	}
	return nil, nil
}
