package snapshot

import "path/filepath"

// Node-local copies of a reference's metadata. When the stage SStore
// component protects snapshots on other nodes (partner copies, XOR sets)
// or there is no global storage at all (snapc_base_global_snapshot_dir
// none), gompirun writes the reference's global metadata, the commit
// record included, into every node's stage folder as well:
//
//	<root>/<node>/.refs/<ref name>/global_snapshot_meta
//
// Each is a reference gompi-restart reads (Ref{Dir: StageRefsDir(root,
// node)}), whose snapshots the nodes keep: their caches, partner copies
// and XOR sets. With no global storage the reference a job reports is
// the one on the node of its rank 0.

// The stage component's parameters that say whether it protects
// snapshots on other nodes; it registers them, gompirun reads them.
const (
	ParamStagePartner = "sstore_stage_partner"
	ParamStageXORSet  = "sstore_stage_xor_set"
)

// StageRefsDir is the folder of node's copies of references' metadata
// under root (as StageNodeDir takes it).
func StageRefsDir(root, node string) string {
	return filepath.Join(StageNodeDir(root, node), ".refs")
}
