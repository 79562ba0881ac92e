package hnp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"gompi/frameworks/filem"
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
// replica.go), so the commit record survives with the nodes' copies: on
// this machine where a node's folder is here (simulated nodes, a shared
// stage root), else on the node of that name through a FileM selected
// with the job's parameters the first time one is needed (filem rsh or
// sftp reach other hosts; raw does not). A copy that cannot be written
// is warned about once per node and does not fail the commit, which the
// reference itself holds.
type replicaStore struct {
	snapshot.MetaStore
	root      string
	nodes     []string
	groupRead bool
	log       *slog.Logger
	openFileM func(context.Context) (filem.Module, error)

	mu     sync.Mutex // guards what follows
	warned map[string]bool
	opened bool
	fm     filem.Module
	fmErr  error
}

func newReplicaStore(inner snapshot.MetaStore, vals *mca.Values, rankNodes []string, openFileM func(context.Context) (filem.Module, error), log *slog.Logger) snapshot.MetaStore {
	if inner == nil {
		inner = snapshot.ThisNode
	}
	if !protectsOnNodes(vals) {
		return inner
	}
	root, _ := stageRoot(vals)
	return &replicaStore{MetaStore: inner, root: root, nodes: sstore.NodesOf(rankNodes), groupRead: sstore.GroupReadable(vals),
		log: log, openFileM: openFileM, warned: map[string]bool{}}
}

func (r *replicaStore) WriteGlobal(ctx context.Context, ref snapshot.Ref, g *snapshot.GlobalMeta) error {
	if err := r.MetaStore.WriteGlobal(ctx, ref, g); err != nil {
		return err
	}
	for _, node := range r.nodes {
		dir := snapshot.StageRefsDir(r.root, node)
		if !ref.IsRemote() && filepath.Clean(filepath.Join(dir, ref.Name)) == filepath.Clean(ref.Path()) {
			continue
		}
		var err error
		if fi, serr := os.Stat(snapshot.StageNodeDir(r.root, node)); serr == nil && fi.IsDir() {
			if err = os.MkdirAll(dir, 0o700); err == nil {
				err = snapshot.ThisNode.WriteGlobal(ctx, snapshot.Ref{Dir: dir, Name: ref.Name}, g)
			}
		} else {
			err = r.writeRemote(ctx, node, dir, ref.Name, g)
		}
		if err != nil {
			r.warnOnce(node, ref, err)
		}
	}
	return nil
}

// writeRemote writes the copy of node through FileM.
func (r *replicaStore) writeRemote(ctx context.Context, node, dir, name string, g *snapshot.GlobalMeta) error {
	fm, err := r.fileM(ctx)
	if err != nil {
		return fmt.Errorf("the node's stage folder is not on this machine and no FileM reaches it: %w", err)
	}
	rr := snapshot.Ref{Dir: filem.Location{Host: node, Path: dir}.String(), Name: name}
	ms, err := snapshot.MetaStoreFor(rr, fm, r.groupRead)
	if err != nil {
		return err
	}
	return ms.WriteGlobal(ctx, rr, g)
}

func (r *replicaStore) fileM(ctx context.Context) (filem.Module, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.opened {
		r.opened = true
		if r.openFileM == nil {
			r.fmErr = errors.New("no FileM to select")
		} else {
			r.fm, r.fmErr = r.openFileM(ctx)
		}
	}
	return r.fm, r.fmErr
}

func (r *replicaStore) warnOnce(node string, ref snapshot.Ref, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.warned[node] {
		r.warned[node] = true
		r.log.Warn("cannot copy the reference's metadata to a node", "node", node, "ref", ref.Name, "err", err)
	}
}

// Close closes the FileM the copies used, if one was selected.
func (r *replicaStore) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.fm.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
