package sstore

import (
	"context"
	"slices"
)

// The job's node list travels in a Sync's context, like its progress
// callback: a Module that protects a node's snapshots on other nodes
// (stage's partner copies and XOR sets) needs it, the others ignore it,
// and the Module interface stays as it is.
type nodesKey struct{}

// WithNodes returns a context whose Sync calls know the job's nodes, in
// the job's order (the order of their first rank).
func WithNodes(ctx context.Context, nodes []string) context.Context {
	return context.WithValue(ctx, nodesKey{}, slices.Clone(nodes))
}

// Nodes returns the job's nodes WithNodes put into ctx, nil when none.
func Nodes(ctx context.Context) []string {
	n, _ := ctx.Value(nodesKey{}).([]string)
	return n
}

// NodesOf lists the distinct nodes of a job whose rank r runs on
// rankNodes[r], in the order of their first rank.
func NodesOf(rankNodes []string) []string {
	var out []string
	for _, n := range rankNodes {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

type migrationKey struct{}

// ForMigration marks a Sync of a migration's sequence, which saves only
// the ranks that move and is no restart point: a Module copies nothing
// of it to other nodes (only the nodes of the moving ranks sync it, so a
// set of nodes that waited for each other would wait for ever).
func ForMigration(ctx context.Context) context.Context {
	return context.WithValue(ctx, migrationKey{}, true)
}

// IsMigration reports whether ctx is a migration's Sync (ForMigration).
func IsMigration(ctx context.Context) bool {
	v, _ := ctx.Value(migrationKey{}).(bool)
	return v
}
