// Package sstore is the Stable Storage framework: where local snapshots are
// written and when they become stable on global storage. A sequence counts
// only once every local snapshot is established; SStore says when.
//
// The package holds the framework's interface only: Module, the Local
// snapshots a Sync establishes, the Host a hosting process provisions a
// module with, the progress a Sync reports through its context, and its
// parameters: sstore_base_group_readable (references are their owner's
// only unless it is set) and sstore_base_keep (how many restart points a
// job keeps; which ones go is snapshot.Prunable). A Sync's context may
// carry the job's node list (WithNodes) and mark a migration's sequence
// (ForMigration), for a Module that protects snapshots on other nodes;
// package xor holds the parity math of XOR sets. What a
// snapshot reference is on disk (its layout, metadata, checksums and
// verification) is package snapshot, which every Module and every reader
// of references (cr, snapc, gompi-restart, gompi-checkpoint) shares.
//
// Components: central (ranks write straight to global storage), stage
// (node-local first, drained, compressed and cached by the daemon) and none
// (C/R off: every call fails with ErrDisabled).
package sstore

import (
	"context"
	"errors"

	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// Name of the framework, and of its selection parameter.
const Name = "sstore"

// ParamGroupReadable lets the job's group read its snapshot references:
// the reference folder is created 0750 instead of 0700, and what is
// written into it takes the group's read access from it (package
// snapshot's perm.go).
const ParamGroupReadable = Name + "_base_group_readable"

// ParamKeep is how many of a reference's newest restart points stay once
// a checkpoint of the job commits; 0 keeps them all.
const ParamKeep = Name + "_base_keep"

// FrameworkParams are the framework's own parameters.
func FrameworkParams() []mca.ParamSpec {
	return []mca.ParamSpec{
		{Name: ParamGroupReadable, Type: mca.Bool, Default: "false", Level: mca.LevelUser,
			Help: "Let the job's group read its snapshot references (folders 0750, files 0640); by default they are its owner's only (0700, 0600), since they hold the program, arguments, parameters and exported variables gompi-restart runs again"},
		{Name: ParamKeep, Type: mca.Int, Default: "0", Level: mca.LevelUser,
			Help: "Keep only the newest N restart points of the job's reference: once a checkpoint commits, older sequences and the leftovers of failed ones are removed (never the only restart point); 0 keeps every sequence. Applies to a reference on the node of gompirun; gompi-checkpoint --prune does it by hand"},
	}
}

// Keep is sstore_base_keep: how many restart points to keep, 0 (all)
// when the parameter is not registered or not positive.
func Keep(vals *mca.Values) int {
	if vals == nil || !vals.Has(ParamKeep) {
		return 0
	}
	return max(0, vals.Int(ParamKeep))
}

// GroupReadable reports whether vals ask for group-readable references
// (false when the parameter is not registered, as in a test's set).
func GroupReadable(vals *mca.Values) bool {
	return vals != nil && vals.Has(ParamGroupReadable) && vals.Bool(ParamGroupReadable)
}

// Local is one rank's local snapshot of a sequence.
type Local struct {
	Rank int    `json:"rank"`
	Dir  string `json:"dir"` // where the rank wrote it on its node
}

// Module is a selected storage strategy, used on every node.
type Module interface {
	// LocalDir creates and returns the directory rank writes its snapshot
	// of seq into.
	LocalDir(ctx context.Context, ref snapshot.Ref, seq, rank int) (string, error)
	// Sync makes the local snapshots of seq written on this node stable on
	// global storage; it returns once they are established there.
	Sync(ctx context.Context, ref snapshot.Ref, seq int, locals []Local) error
	// Fetch makes rank's snapshot of seq readable on this node (from a
	// local cache when one holds it) and returns its directory.
	Fetch(ctx context.Context, ref snapshot.Ref, seq, rank int) (string, error)
	// Remove deletes this node's copies of seq.
	Remove(ctx context.Context, ref snapshot.Ref, seq int) error
}

// ErrDisabled is wrapped when no storage strategy is enabled.
var ErrDisabled = errors.New("stable storage is not enabled")
