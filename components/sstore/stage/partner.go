package stage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gompi/frameworks/filem"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
)

// The partner level: while a node drains a sequence to global storage it
// also puts each of its ranks' local snapshots, whole and as the ranks
// wrote them, into the local storage of one partner node, through the
// same FileM. The partner keeps them inside its own folder of the
// sequence,
//
//	<root>/<partner>/<ref name>/<seq>/.partner/<node>/gompi_snapshot_<rank>.ckpt/
//
// so they share the fate of the partner's own copies: its cache eviction
// and the removal of the sequence take them too. A restart on the partner
// node finds them there when the rank's own node is gone (Fetch).

// Partner modes (ParamPartner).
const (
	PartnerRing = "ring" // node i's copies go to node i+1 of the job's node list
	PartnerNone = "none"
)

// PartnerModes are the values of ParamPartner.
var PartnerModes = []string{PartnerRing, PartnerNone}

// partnerDirName is the folder of a sequence that holds other nodes'
// copies; it starts with a dot, so it never reads as a rank's folder.
const partnerDirName = ".partner"

// partnerOf is the node that keeps node's partner copies in a ring over
// nodes: the next one, the first after the last. "" when node has no
// partner (it is alone or not in the list).
func partnerOf(nodes []string, node string) string {
	i := slices.Index(nodes, node)
	if i < 0 || len(nodes) < 2 {
		return ""
	}
	return nodes[(i+1)%len(nodes)]
}

// partnerCopyDir is where the node partner keeps from's copy of rank.
func partnerCopyDir(partnerNodeDir string, ref snapshot.Ref, seq int, from string, rank int) string {
	return filepath.Join(snapshot.StageSeqDir(partnerNodeDir, ref, seq), partnerDirName, from, snapshot.LocalName(rank))
}

// remoteNode is how this node's FileM reaches the node folder of another
// node: on this machine when that folder is here (simulated nodes on one
// machine, or a stage root every node shares), else on the host of that
// name.
func (m *module) remoteNode(node string) (host, nodeDir string) {
	nodeDir = snapshot.StageNodeDir(m.cfg.localRoot, node)
	if fi, err := os.Stat(nodeDir); err == nil && fi.IsDir() {
		return "", nodeDir
	}
	return node, nodeDir
}

// copyToPartner puts every rank's local snapshot of seq on this node into
// the local storage of its partner, replacing what an earlier attempt
// left there. No partner (partner level off, a job of one node) is no
// error: there is nothing to do.
func (m *module) copyToPartner(ctx context.Context, env sstore.Host, ref snapshot.Ref, seq int, locals []sstore.Local, log *slog.Logger) error {
	if m.cfg.partner != PartnerRing {
		return nil
	}
	nodes := sstore.Nodes(ctx)
	partner := partnerOf(nodes, env.Node)
	if partner == "" {
		if len(nodes) > 1 {
			log.Warn("partner copy: this node is not in the job's node list; its snapshots have no partner copy", "node", env.Node, "nodes", nodes)
		}
		return nil
	}
	if err := checkName("partner node name", partner); err != nil {
		return fmt.Errorf("sstore/stage: partner copy of %s seq %d: %w", ref.Name, seq, err)
	}
	host, pdir := m.remoteNode(partner)
	dirMode, _ := snapshot.Modes(false) // node-local storage is the owner's only
	var dsts []filem.Remote
	var ts []filem.Transfer
	for _, l := range locals {
		dst := filem.Remote{Host: host, Path: partnerCopyDir(pdir, ref, seq, env.Node, l.Rank)}
		dsts = append(dsts, dst)
		ts = append(ts, filem.Transfer{Local: l.Dir, Remote: dst, DirMode: dirMode})
	}
	if err := m.acquire(ctx); err != nil {
		return fmt.Errorf("sstore/stage: partner copy of %s seq %d: %w", ref.Name, seq, err)
	}
	defer m.release()
	start := time.Now()
	if err := env.FileM.Remove(ctx, dsts); err != nil {
		return fmt.Errorf("sstore/stage: partner copy of %s seq %d to node %s: clear an earlier attempt: %w", ref.Name, seq, partner, err)
	}
	if err := env.FileM.Put(ctx, ts); err != nil {
		return fmt.Errorf("sstore/stage: partner copy of %s seq %d to node %s: %w", ref.Name, seq, partner, err)
	}
	log.Info("copied to the partner node", "ref", ref.Name, "seq", seq, "partner", partner, "ranks", len(locals), "elapsed", time.Since(start))
	return nil
}

// partnerCopies lists the partner copies of rank's snapshot of seq that
// this node keeps for other nodes. Only real folders under the node's
// own tree count: a link planted there is refused, never followed.
func partnerCopies(nodeDir string, ref snapshot.Ref, seq, rank int) ([]string, error) {
	base := filepath.Join(snapshot.StageSeqDir(nodeDir, ref, seq), partnerDirName)
	ents, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() || checkName("node", e.Name()) != nil {
			continue // a link or a stray file
		}
		dir := filepath.Join(base, e.Name(), snapshot.LocalName(rank))
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
			out = append(out, dir)
		}
	}
	return out, nil
}

// fetchPartner returns a verified partner copy of rank's snapshot of seq
// that this node keeps, logging every copy it passes over and why.
func (m *module) fetchPartner(nodeDir string, ref snapshot.Ref, seq, rank int, log *slog.Logger) (string, []error) {
	dirs, err := partnerCopies(nodeDir, ref, seq, rank)
	if err != nil {
		log.Warn("cannot list the partner copies", "ref", ref.Name, "seq", seq, "rank", rank, "err", err)
		return "", []error{fmt.Errorf("partner copies: %w", err)}
	}
	var skipped []error
	for _, dir := range dirs {
		if err := checkCopy(dir, rank); err != nil {
			log.Warn("partner copy unusable; trying the next copy", "ref", ref.Name, "seq", seq, "rank", rank, "copy", dir, "err", err)
			skipped = append(skipped, fmt.Errorf("partner copy %s: %w", dir, err))
			continue
		}
		log.Info("restart reads a partner copy", "ref", ref.Name, "seq", seq, "rank", rank, "from", filepath.Base(filepath.Dir(dir)), "dir", dir)
		return dir, skipped
	}
	return "", skipped
}

// keepLocal is how many sequences of a reference a node keeps once
// drained: sstore_stage_cache, and with no global storage at least two,
// so the sequence being synced never evicts the last committed one.
func (m *module) keepLocal() int {
	if m.cfg.noGlobal {
		return max(m.cfg.cache, 2)
	}
	return m.cfg.cache
}

// syncNodesOnly is Sync with no global storage (snapc_base_global_snapshot_dir
// none): the ranks' snapshots are checked, copied to the partner and
// protected by the XOR set, and stay on the node.
func (m *module) syncNodesOnly(ctx context.Context, env sstore.Host, nodeDir string, ref snapshot.Ref, seq int, locals []sstore.Local, log *slog.Logger) error {
	for _, l := range locals {
		if err := checkCopy(l.Dir, l.Rank); err != nil {
			return fmt.Errorf("sstore/stage: sync %s seq %d: rank %d: %w", ref.Name, seq, l.Rank, err)
		}
	}
	if err := m.protected(ctx, env, nodeDir, ref, seq, locals, log, nil); err != nil {
		return err
	}
	log.Info("kept on the nodes (no global storage)", "ref", ref.Name, "seq", seq, "ranks", len(locals))
	m.evict(nodeDir, ref, seq, locals, log)
	return nil
}

// protected runs also (the drain to global storage; nil for none) while
// the snapshots of seq are copied to the partner node and protected by
// the node's XOR set (not a migration's: sstore.IsMigration). All must succeed; the first failure stops the
// others, and is the one returned.
func (m *module) protected(ctx context.Context, env sstore.Host, nodeDir string, ref snapshot.Ref, seq int, locals []sstore.Local, log *slog.Logger, also func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var parts []func(context.Context) error
	if !sstore.IsMigration(ctx) { // no restart point: nothing to protect
		parts = append(parts,
			func(ctx context.Context) error { return m.copyToPartner(ctx, env, ref, seq, locals, log) },
			func(ctx context.Context) error { return m.protectXOR(ctx, env, nodeDir, ref, seq, locals, log) })
	}
	if also != nil {
		parts = append(parts, also)
	}
	errs := make(chan error, len(parts))
	for _, p := range parts {
		go func() { errs <- p(ctx) }() // each waited for below
	}
	var first error
	for range parts {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}
