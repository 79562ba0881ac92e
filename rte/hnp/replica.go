package hnp

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// stageRoot is the stage component's node-local root the job runs with
// ("" = its default), and whether the job stores with sstore stage.
func stageRoot(vals *mca.Values) (string, bool) {
	isStage := func(c string) bool { return strings.TrimSpace(c) == "stage" }
	if !vals.Has(sstore.Name) || !slices.ContainsFunc(strings.Split(vals.String(sstore.Name), ","), isStage) {
		return "", false
	}
	if vals.Has(snapshot.ParamStageRoot) {
		return vals.String(snapshot.ParamStageRoot), true
	}
	return "", true
}

// protectsOnNodes reports whether the job's stage keeps copies of its
// snapshots on other nodes (partner copies, XOR sets) or has no global
// storage: then the reference's metadata goes to every node too.
func protectsOnNodes(vals *mca.Values) bool {
	if _, ok := stageRoot(vals); !ok {
		return false
	}
	partner := vals.Has(snapshot.ParamStagePartner) && vals.String(snapshot.ParamStagePartner) != "none"
	xorSet := vals.Has(snapshot.ParamStageXORSet) && vals.Int(snapshot.ParamStageXORSet) > 0
	return partner || xorSet || snapc.NoGlobal(vals)
}

// noGlobalRef is where a job with no global storage keeps its reference:
// in the metadata-replica folder of the node of its rank 0.
func noGlobalRef(vals *mca.Values, rankNodes []string, name string) (snapshot.Ref, error) {
	root, ok := stageRoot(vals)
	if !ok {
		return snapshot.Ref{}, fmt.Errorf("%s = %s needs sstore stage (its partner copies or XOR sets keep the snapshots): run with --mca sstore stage", snapc.ParamGlobalDir, snapc.GlobalNone)
	}
	if len(rankNodes) == 0 || rankNodes[0] == "" {
		return snapshot.Ref{}, fmt.Errorf("%s = %s: the job has no rank 0 node", snapc.ParamGlobalDir, snapc.GlobalNone)
	}
	return snapshot.Ref{Dir: snapshot.StageRefsDir(root, rankNodes[0]), Name: name}, nil
}

// replicaStore writes the reference's metadata to its own place, then a
// copy into the stage folder of every node of the job (snapshot's
// replica.go), so the commit record survives with the nodes' copies. A
// node whose folder is not on this machine gets none (that needs a FileM
// to reach it, which is not done): the warning says so once.
type replicaStore struct {
	snapshot.MetaStore
	root   string
	nodes  []string
	log    *slog.Logger
	warned map[string]bool
}

func newReplicaStore(inner snapshot.MetaStore, vals *mca.Values, rankNodes []string, log *slog.Logger) snapshot.MetaStore {
	if inner == nil {
		inner = snapshot.ThisNode
	}
	if !protectsOnNodes(vals) {
		return inner
	}
	root, _ := stageRoot(vals)
	return &replicaStore{MetaStore: inner, root: root, nodes: sstore.NodesOf(rankNodes), log: log, warned: map[string]bool{}}
}

func (r *replicaStore) WriteGlobal(ctx context.Context, ref snapshot.Ref, g *snapshot.GlobalMeta) error {
	if err := r.MetaStore.WriteGlobal(ctx, ref, g); err != nil {
		return err
	}
	for _, node := range r.nodes {
		rr := snapshot.Ref{Dir: snapshot.StageRefsDir(r.root, node), Name: ref.Name}
		if !ref.IsRemote() && filepath.Clean(rr.Path()) == filepath.Clean(ref.Path()) {
			continue
		}
		if fi, err := os.Stat(snapshot.StageNodeDir(r.root, node)); err != nil || !fi.IsDir() {
			if !r.warned[node] {
				r.warned[node] = true
				r.log.Warn("the reference's metadata is not copied to a node whose stage folder is not on this machine", "node", node, "ref", ref.Name)
			}
			continue
		}
		err := os.MkdirAll(rr.Dir, 0o700)
		if err == nil {
			err = snapshot.ThisNode.WriteGlobal(ctx, rr, g)
		}
		if err != nil {
			r.log.Warn("cannot copy the reference's metadata to a node", "node", node, "ref", ref.Name, "err", err)
		}
	}
	return nil
}
