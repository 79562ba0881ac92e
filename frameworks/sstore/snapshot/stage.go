package snapshot

import (
	"os"
	"path/filepath"
	"strconv"
)

// The node-local layout of staged snapshots: where the stage SStore
// component keeps each rank's snapshot on its node until it is drained to
// the reference, and afterwards as a cache a restart on the same node
// reads. It is part of the format, not private to that component, because
// gompi-restart -i reads it too (to say which node still holds a copy):
//
//	<root>/<node>/<ref name>/<seq>/gompi_snapshot_<rank>.ckpt/
//
// <root> is the value of ParamStageRoot, DefaultStageRoot when empty. The
// node's name is part of the path so that several nodes sharing one
// machine (tests, the demo) or one folder never see each other's copies.

// ParamStageRoot is the parameter naming <root>. The stage component
// registers it; a tool reads its value (or the value a job recorded).
const ParamStageRoot = "sstore_stage_local_snapshot_dir"

// DefaultStageRoot is the root used when ParamStageRoot is empty:
// <tmp>/gompi-stage-<uid>, one per user.
func DefaultStageRoot() string {
	return filepath.Join(os.TempDir(), "gompi-stage-"+strconv.Itoa(os.Getuid()))
}

// StageNodeDir is the folder of node's staged snapshots under root (the
// value of ParamStageRoot; "" = DefaultStageRoot()).
func StageNodeDir(root, node string) string {
	if root == "" {
		root = DefaultStageRoot()
	}
	return filepath.Join(root, node)
}

// StageSeqDir is the folder of ref's sequence seq under nodeDir.
func StageSeqDir(nodeDir string, ref Ref, seq int) string {
	return filepath.Join(nodeDir, ref.Name, strconv.Itoa(seq))
}

// StageLocalDir is rank's staged copy of seq under nodeDir.
func StageLocalDir(nodeDir string, ref Ref, seq, rank int) string {
	return filepath.Join(StageSeqDir(nodeDir, ref, seq), LocalName(rank))
}

// StagedCopy says where node keeps its local copy of rank's snapshot of
// seq under root (as StageNodeDir takes it), and whether a copy is there:
// the folder exists and holds a readable snapshot_meta of that rank. It
// does not read the files' data (the stage component's Fetch verifies
// them before using the copy), so gompi-restart -i can ask it for every
// rank cheaply. Only a node whose folder this process can see (its own,
// or any on one machine) is answered truthfully.
func StagedCopy(root, node string, ref Ref, seq, rank int) (string, bool) {
	dir := StageLocalDir(StageNodeDir(root, node), ref, seq, rank)
	meta, err := ReadLocal(dir)
	return dir, err == nil && meta.Rank == rank
}
