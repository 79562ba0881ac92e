package stage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"strconv"

	"gompi/frameworks/filem"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
)

// seqNodes reads, from the reference's metadata, the nodes of seq in the
// job's order (that of their first rank) and the node of rank: this
// node's copy of the metadata first (snapshot's replica.go), else the
// reference itself when it is on this machine. false when neither is
// readable or seq is not recorded.
func (m *module) seqNodes(node string, ref snapshot.Ref, seq, rank int) (nodes []string, of string, ok bool) {
	refs := []snapshot.Ref{{Dir: snapshot.StageRefsDir(m.cfg.localRoot, node), Name: ref.Name}}
	if !ref.IsRemote() {
		refs = append(refs, ref)
	}
	for _, r := range refs {
		meta, err := snapshot.ReadGlobal(r)
		if err != nil {
			continue
		}
		rec, found := meta.Seq(seq)
		if !found {
			continue
		}
		procs := append([]snapshot.ProcRecord(nil), rec.Procs...)
		sort.Slice(procs, func(i, j int) bool { return procs[i].Rank < procs[j].Rank })
		var rankNodes []string
		for _, p := range procs {
			rankNodes = append(rankNodes, p.Node)
			if p.Rank == rank {
				of = p.Node
			}
		}
		if of != "" {
			return sstore.NodesOf(rankNodes), of, true
		}
	}
	return nil, "", false
}

// fetchFromPartner gets rank's partner copy of seq from the node that
// keeps it when that is another node (a restart placed the rank on
// neither its node nor its partner): the partner follows from the
// sequence's nodes in the reference's metadata. The copy is verified and
// becomes this node's. "" and no error when no other node keeps one.
func (m *module) fetchFromPartner(ctx context.Context, env sstore.Host, nodeDir string, ref snapshot.Ref, seq, rank int, log *slog.Logger) (string, error) {
	if m.cfg.partner != PartnerRing {
		return "", nil
	}
	nodes, of, ok := m.seqNodes(env.Node, ref, seq, rank)
	if !ok {
		return "", nil
	}
	partner := partnerOf(nodes, of)
	if partner == "" || partner == env.Node || of == env.Node {
		return "", nil // this node's own copies were looked at already
	}
	for _, n := range []string{of, partner} {
		if err := checkName("node name", n); err != nil {
			return "", fmt.Errorf("%w: the reference's metadata: %v", snapshot.ErrCorrupt, err)
		}
	}
	if env.FileM == nil {
		return "", fmt.Errorf("the partner copy is on node %s and no FileM was bound to get it", partner)
	}
	host, pdir := m.remoteNode(partner)
	src := filem.Remote{Host: host, Path: partnerCopyDir(pdir, ref, seq, of, rank)}
	work, done, err := m.tempDir(nodeDir, ".fetch-"+ref.Name+"-"+strconv.Itoa(seq)+"-"+strconv.Itoa(rank)+"-*")
	if err != nil {
		return "", err
	}
	defer done()
	out := filepath.Join(work, "out")
	if err := env.FileM.Get(ctx, []filem.Transfer{{Local: out, Remote: src}}); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("node %s keeps no partner copy (%s): %w", partner, src, err)
		}
		return "", fmt.Errorf("partner copy %s: %w", src, err)
	}
	if err := checkCopy(out, rank); err != nil {
		return "", fmt.Errorf("partner copy %s: %w", src, err)
	}
	dir := snapshot.StageLocalDir(nodeDir, ref, seq, rank)
	if err := install(out, dir); err != nil {
		return "", err
	}
	log.Info("restart reads a partner copy from its partner node", "ref", ref.Name, "seq", seq, "rank", rank, "node", of, "partner", partner, "dir", dir)
	return dir, nil
}
