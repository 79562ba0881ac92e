// Package snapshot is the on-disk format of a global snapshot reference,
// the one thing every process of a checkpoint agrees on: a rank writes its
// local snapshot in it, the SStore modules move it, the global coordinator
// commits sequences in it and gompi-restart reads it back.
//
// It holds the layout of a reference (Ref, RefName, LocalName), its two
// metadata files (GlobalMeta in global_snapshot_meta, LocalMeta in each
// rank's snapshot_meta) with their text encoding, how a snapshot file is
// written durably with its CRC-32C (CreateFile, FileWriter,
// WriteFileAtomic), how a restart point is chosen and verified (ChooseSeq,
// RestartPoint), and MetaStore, which reads and writes the metadata of a
// reference wherever it lives (this node, or a remote host through FileM).
//
// It knows nothing of the SStore framework's modules: package sstore (the
// framework's interface) imports it, never the reverse. Its errors keep
// the "sstore:" prefix users have always seen, since the format is the
// SStore framework's.
package snapshot
