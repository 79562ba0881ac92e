package daemon

import (
	"context"

	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
)

// nodesStore hands the job's node list to every Sync of the node's stable
// storage (sstore.WithNodes): stage picks each node's partner and XOR set
// from it. The list is read at each Sync, so a migration's new placement
// counts from the next checkpoint on.
type nodesStore struct {
	sstore.Module
	nodes func() []string
}

func (s nodesStore) Sync(ctx context.Context, ref snapshot.Ref, seq int, locals []sstore.Local) error {
	return s.Module.Sync(sstore.WithNodes(ctx, s.nodes()), ref, seq, locals)
}

// jobNodes is the job's node list, in the order of their first rank.
func (d *daemon) jobNodes() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.launch == nil {
		return nil
	}
	return sstore.NodesOf(d.launch.RankNodes)
}
